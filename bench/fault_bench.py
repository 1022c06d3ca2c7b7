"""Fault-injection benchmark: interrupt powercut at random moments and check nothing is left.

Brings a lab up (3 control planes, 3 racks x 3 workers, the sample workloads) and, for each
interruption, starts a random scenario (`powercut run -k <one feature scenario>`) or a
longevity run (`powercut longevity --fraction 1/3`) and hits it at a random moment with one
of these faults:

* ``sigkill``: SIGKILL to powercut and its pytest child at once (a crash: nothing runs its
  undos; the child may stay a zombie), then an immediate ``powercut recover``;
* ``sigterm`` / ``sigint``: the signal to powercut, which must undo and exit 3;
* ``bmc-stops``: the lab's BMCs stop answering (its supervisor is SIGSTOPped) in the middle
  of a ``powercut power off``, and answer again later; then ``powercut recover``;
* ``apiserver-restart``: every API server of the lab (one, with ``--one-apiserver`` and in the
  short form) is killed (the lab restarts them) while an Observer watches a node being
  cordoned and uncordoned (40 flips, and on until the killed API servers are ready again and
  three watch timeouts more); the Observer's transitions are checked per flip, by
  resourceVersion, against the acknowledged patches and against an independent ordinary
  list+watch client (which re-lists at once on 410 Gone, as client-go's reflector does). A
  flip the Observer did not see is "inside an announced gap" when its resourceVersion is
  inside a gap the Observer put on its timeline (a watch refused with 410 Gone by every API
  server it tried, which re-listed: when every API server restarts, each watch cache starts
  afresh and cannot replay the changes made before it did, and flips that undid each other
  leave no trace in the list), else "lost without an announced gap" (target 0); a flip the
  independent watch's stream delivered and the Observer missed is "lost that the
  independent watch saw" (target 0). ``--cut-watches`` drops both watches from the kill
  until the killed API servers are ready again; ``--trace`` prints each restart's timeline;
* ``cp-lease-holder``: the control-plane node whose controller-manager holds the leader
  lease is powered off under a running scenario (then back on), which must still end with a
  documented exit code.

After each, it waits for the cluster to settle and counts what is left: nodes off, nodes
cut off (on but not Ready), cordoned, tainted (out-of-service, or unreachable/not-ready
after settling), the cluster lock, journal entries still owed (after recover), exit codes
that broke the contract in README ("powercut run exit codes": interrupted -> 3; recover
-> 0), transitions lost without an announced gap (target 0), those the independent watch saw
(target 0) and, apart, those lost inside one, those the independent watch lost, and the
Observer's 410s, retries that resumed, and re-lists. Anything left is repaired before the
next one, and counted.

Run: ``.venv/bin/python bench/fault_bench.py [--count 50] [--seed N]`` (full form, >= 50
interruptions); ``--short`` (the form `make test` runs, a few minutes). Exit 1 when any
count that has a target of 0 is not 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fakes.relay

from harness.errors import PowercutError
from harness.inventory import Inventory, load_inventory
from harness.journal import Journal
from harness.kube.actions import OUT_OF_SERVICE_KEY
from harness.kube.client import Gone, KubeClient
from harness.kube.lock import LEASE_NAME, LEASE_NAMESPACE
from harness.kube.observer import NODE, OBSERVER, Observer, gaps
from harness.kube.timeline import Timeline
from harness.power.base import PowerState
from harness.power.factory import driver_for
from harness.session import journal_path_for
from tests.fakes.relay import Relay

#: Feature scenarios picked from at random (`-k` expressions), each a few dozen seconds.
SCENARIOS = (
    "stuck_pods_are_forcedeleted",
    "outofservice_taint_moves",
    "node_object_is_deleted",
    "drained_powercycled",
    "member_waits",
    "every_node_of_one_rack",
    "daemonset_pods_return and redfish",
    "worker_loses_power_as_a_chaostoolkit",
)
SIGNAL_FAULTS = ("sigkill", "sigterm", "sigint")
OTHER_FAULTS = ("bmc-stops", "apiserver-restart", "cp-lease-holder")
SETTLE_S = 90.0
#: apiserver-restart: flipping goes on this many watch timeouts after the API servers killed
#: are ready again, and at most MAX_FLIPPING_S after the kill
HOLD_AFTER_READY = 3
#: the lab supervisor's crash-loop guard (harness.lab.supervisor: MAX_RESTARTS in
#: RESTART_WINDOW_S), which the bench respects rather than imports (the lab is a consumer)
LAB_MAX_RESTARTS = 5
LAB_RESTART_WINDOW_S = 600.0
MAX_FLIPPING_S = 90.0
RUN_EXIT = {
    0: "passed",
    1: "failed",
    2: "harness error",
    3: "interrupted",
    4: "restore failed",
    5: "stopped by a stop condition",
}


@dataclass
class Tally:
    interruptions: Counter[str] = field(default_factory=Counter)
    off: int = 0
    cut_off: int = 0
    cordoned: int = 0
    tainted: int = 0
    locks: int = 0
    owed: int = 0
    contract: int = 0
    lost: int = 0  # without an announced gap
    lost_in_gap: int = 0  # inside a gap the Observer announced (no target: said, not silent)
    lost_vs_independent: int = 0  # flips the Observer missed that the independent watch saw
    lost_independent: int = 0  # flips the independent watch missed (no target: the reference)
    gone: int = 0  # 410 Gone answers to the Observer's watches
    resumed: int = 0  # rounds of 410s ended by a retry on another API server, no re-list
    relists: int = 0  # the Observer's re-lists after a 410
    exact_relists: int = 0  # of which read at the watch caches' start (etcd), not now
    gaps: int = 0  # node gaps announced
    notes: list[str] = field(default_factory=list)

    def broken(self) -> int:
        return (
            self.off + self.cut_off + self.cordoned + self.tainted + self.locks + self.owed
            + self.contract + self.lost + self.lost_vs_independent
        )  # fmt: skip


class Lab:
    """The bench's own lab, driven through the `powercut` command."""

    def __init__(self, root: Path, base_port: int) -> None:
        self.root = root
        self.state = root / "lab"
        self.inventory_path = root / "inv.yaml"
        self.base_port = base_port
        self.env = {**os.environ, "POWERCUT_STATE_DIR": str(root / "powercut-state")}
        self.kills: dict[str, list[float]] = {}  # component -> when the bench killed it

    def powercut(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def up(self) -> None:
        out = self.powercut(
            "lab", "up", "--workloads", "--base-port", str(self.base_port),
            "--state-dir", str(self.state), "--inventory-out", str(self.inventory_path),
        )  # fmt: skip
        if out.returncode:
            raise SystemExit(f"lab up failed: {out.stderr.strip()[-2000:]}")
        os.environ["POWERCUT_STATE_DIR"] = self.env["POWERCUT_STATE_DIR"]

    def down(self) -> None:
        self.powercut("lab", "down", "--state-dir", str(self.state))

    def status(self) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.state / "state.json").read_text())
        return data

    def pids(self, contains: str) -> list[int]:
        return list(self.components(contains).values())

    def components(self, contains: str) -> dict[str, int]:
        """Name -> pid of the running components whose name contains ``contains``."""
        comps = self.status().get("components") or {}
        assert isinstance(comps, dict)
        return {n: int(c["pid"]) for n, c in comps.items() if contains in n and c.get("pid")}

    def wait_restartable(self, names: list[str]) -> None:
        """The lab restarts a crashed process at most LAB_MAX_RESTARTS times in
        LAB_RESTART_WINDOW_S, then leaves it down (a crash-loop guard): wait until killing
        each of ``names`` once more stays within that."""
        now = time.monotonic()
        waits = [
            kills[-LAB_MAX_RESTARTS] + LAB_RESTART_WINDOW_S - now
            for kills in (self.kills.get(n, []) for n in names)
            if len(kills) >= LAB_MAX_RESTARTS
        ]
        if waits and max(waits) > 0:
            print(f"  (waiting {max(waits):.0f} s: the lab's crash-loop guard)", flush=True)
            time.sleep(max(waits))

    def killed(self, name: str) -> None:
        self.kills.setdefault(name, []).append(time.monotonic())


# -- what is left ---------------------------------------------------------------------------


def power_states(inv: Inventory) -> dict[str, PowerState]:
    def read(name: str) -> PowerState:
        d = driver_for(inv.node(name), budgets=inv.timing_budgets())
        try:
            return d.state()
        except PowercutError:
            return PowerState.UNKNOWN
        finally:
            d.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip(inv.node_names(), pool.map(read, inv.node_names()), strict=True))


def node_problems(client: KubeClient) -> dict[str, list[str]]:
    """Per node: not-ready, cordoned, tainted (out-of-service, unreachable, not-ready)."""
    items, _ = client.list("/api/v1/nodes")
    out: dict[str, list[str]] = {}
    for n in items:
        name = n["metadata"]["name"]
        problems = []
        ready = [c for c in n.get("status", {}).get("conditions", []) if c.get("type") == "Ready"]
        if not ready or ready[0].get("status") != "True":
            problems.append("not-ready")
        if n.get("spec", {}).get("unschedulable"):
            problems.append("cordoned")
        for t in n.get("spec", {}).get("taints") or []:
            if t.get("key") in (
                OUT_OF_SERVICE_KEY,
                "node.kubernetes.io/unreachable",
                "node.kubernetes.io/not-ready",
            ):
                problems.append("tainted")
                break
        out[name] = problems
    return out


def settle_and_count(lab: Lab, inv: Inventory, client: KubeClient, tally: Tally, tag: str) -> bool:
    """Wait for the cluster to settle; count what is left. True if nothing is."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        power = power_states(inv)
        try:
            problems = node_problems(client)
        except PowercutError:
            problems = {n: ["api-unreachable"] for n in inv.node_names()}
        clean = all(p is PowerState.ON for p in power.values()) and not any(problems.values())
        if clean or time.monotonic() > deadline:
            break
        time.sleep(2)
    off = [n for n, p in power.items() if p is not PowerState.ON]
    cut = [n for n, p in problems.items() if "not-ready" in p and power.get(n) is PowerState.ON]
    cordoned = [n for n, p in problems.items() if "cordoned" in p]
    tainted = [n for n, p in problems.items() if "tainted" in p]
    try:
        lease = client.get_or_none(
            f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
        )
    except PowercutError:
        lease = None
    path = journal_path_for(inv)
    owed = [e for e in Journal.read(path) if e.owes_undo] if path.exists() else []
    tally.off += len(off)
    tally.cut_off += len(cut)
    tally.cordoned += len(cordoned)
    tally.tainted += len(tainted)
    tally.locks += lease is not None
    tally.owed += len(owed)
    left = {
        "off": off, "cut off": cut, "cordoned": cordoned, "tainted": tainted,
        "lock": ["powercut-lock"] if lease else [], "owed": [str(e) for e in owed],
    }  # fmt: skip
    left = {k: v for k, v in left.items() if v}
    if left:
        tally.notes.append(f"{tag}: left {left}")
        repair(lab, inv, client)
    return not left


def repair(lab: Lab, inv: Inventory, client: KubeClient) -> None:
    """Put the cluster back after a run that left something (counted already)."""
    lab.powercut("recover", "-i", str(lab.inventory_path))
    for name in inv.node_names():
        d = driver_for(inv.node(name), budgets=inv.timing_budgets())
        try:
            if d.state() is not PowerState.ON:
                d.on()
        except PowercutError:
            pass
        finally:
            d.close()
    for name in inv.node_names():
        with contextlib.suppress(PowercutError):
            client.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": None}})
    path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
    try:
        if client.get_or_none(path) is not None:
            client.delete(path)
    except PowercutError:
        pass


# -- faults ---------------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def start_target(
    lab: Lab, rng: random.Random, *, longevity: bool = True
) -> tuple[subprocess.Popen[bytes], str]:
    """A random scenario or a longevity run, in a session of its own."""
    out = lab.root / f"out-{time.monotonic_ns()}"
    if not longevity or rng.random() < 0.7:
        scenario = rng.choice(SCENARIOS)
        argv = ["run", "-i", str(lab.inventory_path), "--out", str(out), "--no-html",
                "--", "-k", scenario]  # fmt: skip
        what = f"run -k {scenario}"
    else:
        argv = ["longevity", "-i", str(lab.inventory_path), "--fraction", "1/3",
                "--duration", "10m", "--out", str(out), "--no-report"]  # fmt: skip
        what = "longevity --fraction 1/3"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *argv],
        env=lab.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return proc, what


def signal_fault(
    lab: Lab, inv: Inventory, client: KubeClient, rng: random.Random, fault: str, tally: Tally
) -> str:
    proc, what = start_target(lab, rng)
    moment = rng.uniform(2.0, 45.0)
    time.sleep(moment)
    alive = proc.poll() is None
    tag = f"{fault} at {moment:.1f}s of {what}"
    if fault == "sigkill":
        victims = [proc.pid, *children(proc.pid)]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        rec = lab.powercut("recover", "-i", str(lab.inventory_path))
        if rec.returncode != 0:
            tally.contract += 1
            tally.notes.append(f"{tag}: recover exited {rec.returncode}: {rec.stderr[-500:]}")
        tag += f" (recover {rec.returncode})"
    else:
        sig = signal.SIGTERM if fault == "sigterm" else signal.SIGINT
        if alive:
            proc.send_signal(sig)
        try:
            rc = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
            tally.notes.append(f"{tag}: still running 300 s after the signal")
        expected = (3,) if alive else tuple(RUN_EXIT)
        if rc not in expected:
            tally.contract += 1
            tally.notes.append(f"{tag}: exit {rc}, documented: {expected}")
        tag += f" (exit {rc}{'' if alive else ', had ended'})"
    settle_and_count(lab, inv, client, tally, tag)
    return tag


def bmc_stops(
    lab: Lab, inv: Inventory, client: KubeClient, rng: random.Random, tally: Tally
) -> str:
    node = rng.choice([n.name for n in inv.nodes_by_role("worker")])
    supervisor = int(str(lab.status()["supervisor_pid"]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "power",
            "off",
            node,
            "-i",
            str(lab.inventory_path),
            "--skip-preflight",
        ],
        env=lab.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    moment = rng.uniform(0.0, 0.6)
    time.sleep(moment)
    os.kill(supervisor, signal.SIGSTOP)
    frozen = rng.uniform(5.0, 45.0)  # past the power deadline (30 s, fast) about half the time
    try:
        time.sleep(frozen)
    finally:
        os.kill(supervisor, signal.SIGCONT)
    try:
        rc = proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        tally.notes.append(f"bmc-stops {node}: power off still running after 300 s")
    if rc not in (0, 2):
        tally.contract += 1
        tally.notes.append(f"bmc-stops {node}: power off exited {rc}, documented 0 or 2")
    rec = lab.powercut("recover", "-i", str(lab.inventory_path))
    if rec.returncode != 0:
        tally.contract += 1
        tally.notes.append(f"bmc-stops {node}: recover exited {rec.returncode}")
    tag = f"bmc-stops {moment:.2f}s into power off {node}, {frozen:.0f}s (exit {rc})"
    settle_and_count(lab, inv, client, tally, tag)
    return tag


class IndependentWatch(threading.Thread):
    """An ordinary list+watch client of one node, sharing nothing with the Observer: it
    resumes a broken watch from the last resourceVersion and, on 410 Gone, re-lists at once,
    as client-go's reflector does. It does not retry the watch on other API servers: it is
    the reference an ordinary client gets, so a flip it saw that the Observer missed is
    the Observer's fault, and flips both miss are lost to every watch.

    ``seen`` holds the resourceVersions of the flips its watch delivered; ``relists`` the
    (resumed-from, listed-at) resourceVersions of each re-list, whose net change it counts
    as one flip seen (the last one in the window) or none."""

    def __init__(self, client: KubeClient, node: str, trace: Trace) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.node = node
        self.trace = trace
        self.flips = 0
        self.seen: set[int] = set()
        self.relists: list[tuple[int, int, bool]] = []  # since, at, net change
        self.stop = threading.Event()
        self.listed = threading.Event()  # the first list is in: flips from now on count
        self._cancel: Callable[[], None] | None = None

    def run(self) -> None:
        path = "/api/v1/nodes"
        selector = f"metadata.name={self.node}"
        last: bool | None = None
        rv: str | None = None
        resumed_from = ""
        while not self.stop.is_set():
            try:
                if rv is None:  # (re-)list and diff: the net change is one flip or none
                    items, rv = self.client.list(path, fieldSelector=selector)
                    now = bool(items[0]["spec"].get("unschedulable")) if items else False
                    changed = last is not None and now != last
                    if last is not None:
                        self.relists.append((int(resumed_from or 0), int(rv), changed))
                        self.trace.add(f"independent re-listed at {rv} (net flip: {changed})")
                    self.flips += changed
                    last = now
                    self.listed.set()
                for ev in self.client.watch(
                    path, resource_version=rv, timeout_s=30, fieldSelector=selector,
                    on_open=self._opened,
                ):  # fmt: skip
                    rv = ev.object.get("metadata", {}).get("resourceVersion", rv)
                    if ev.type in ("ADDED", "MODIFIED"):
                        now = bool(ev.object.get("spec", {}).get("unschedulable"))
                        if now != last:
                            self.flips += 1
                            self.seen.add(int(str(rv)))
                        last = now
                    if self.stop.is_set():
                        return
            except Gone as exc:
                self.trace.add(f"independent 410: {exc.api_message[:80]}")
                resumed_from, rv = rv or "", None
            except PowercutError:
                time.sleep(0.2)

    def _opened(self, cancel: Callable[[], None]) -> None:
        self._cancel = cancel

    def close(self) -> None:
        self.stop.set()
        if self._cancel is not None:
            self._cancel()
        self.join(timeout=10)


class Trace:
    """Timestamped lines of one fault (printed with --trace), relative to the kill."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []
        self.zero = time.monotonic()
        self._lock = threading.Lock()

    def add(self, what: str, mono: float | None = None) -> None:
        with self._lock:
            self.lines.append((time.monotonic() if mono is None else mono, what))

    def render(self) -> str:
        return "\n".join(f"    {t - self.zero:+8.3f} s  {what}" for t, what in sorted(self.lines))


def watch_readiness(
    lab: Lab, trace: Trace, stop: threading.Event, back: threading.Event
) -> threading.Thread:
    """Note when each API server answers /readyz again after the kill (directly, not through
    the balancer), for the trace; set ``back`` once every one that went down is ready."""

    def run() -> None:
        clients = {
            kc.name.removeprefix("kubeconfig-"): KubeClient.from_kubeconfig(kc, timeout_s=1.0)
            for kc in sorted(lab.state.glob("kubeconfig-cp-*"))
        }
        ready = dict.fromkeys(clients, True)
        went_down: set[str] = set()
        while not stop.is_set():
            for name, c in clients.items():
                try:
                    c.request_raw("GET", "/readyz", timeout_s=1.0)
                    ok = True
                except PowercutError:
                    ok = False
                if ok != ready[name]:
                    trace.add(f"kube-apiserver {name} {'ready' if ok else 'not ready'}")
                    ready[name] = ok
                    if not ok:
                        went_down.add(name)
            if went_down and all(ready.values()):
                back.set()
            stop.wait(0.1)
        for c in clients.values():
            c.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def seen_through_windows(
    flips: list[int], watched: set[int] | None, windows: list[tuple[int, int]]
) -> set[int]:
    """The flips (resourceVersions) a watcher saw: those its watch delivered (all outside
    its re-list windows when ``watched`` is None), and in each window (resumed-from,
    listed-at] the last flip when the window holds an odd number (the re-list's net
    change)."""
    seen = set(watched) if watched is not None else set(flips)
    for since, at in windows:
        inside = [rv for rv in flips if since < rv <= at]
        seen -= set(inside)
        if len(inside) % 2:
            seen.add(inside[-1])
    return seen


def apiserver_restart(
    lab: Lab,
    inv: Inventory,
    client: KubeClient,
    rng: random.Random,
    tally: Tally,
    every: bool,
    watch_timeout_s: int,
    show_trace: bool,
    cut_port: int | None,
) -> str:
    node = rng.choice([n.name for n in inv.nodes_by_role("worker")])
    tl = Timeline()
    trace = Trace()
    proxy: Relay | None = None
    watching = client
    if cut_port is not None:  # both watches reach the cluster through a relay we can cut
        where = urlsplit(client.server)
        proxy = Relay((where.hostname or "127.0.0.1", where.port or 443), cut_port)
        relayed = replace(client.creds, server=f"https://127.0.0.1:{cut_port}")
        watching = KubeClient(relayed)
    obs = Observer(watching.clone(), None, timeline=tl, watch_timeout_s=watch_timeout_s).start()
    independent = IndependentWatch(watching.clone(), node, trace)
    independent.start()
    if not independent.listed.wait(30):
        tally.notes.append("apiserver-restart: the independent watch could not list in 30 s")
    flips = 0
    acked: list[tuple[float, int]] = []  # when each flip was acknowledged, its resourceVersion
    kill_at = rng.randint(5, 25)
    stop_readiness, back = threading.Event(), threading.Event()
    readiness: threading.Thread | None = None
    back_at: float | None = None
    # Flips go on after the restarted API servers are ready again, for HOLD_AFTER_READY
    # watch timeouts: every watch then reconnects through the balancer, and some land on a
    # restarted API server whose cache started after their resourceVersion.
    hold_s = HOLD_AFTER_READY * watch_timeout_s
    try:
        i = 0
        while i < 40 or (
            readiness is not None
            and time.monotonic() - trace.zero < MAX_FLIPPING_S
            and (back_at is None or time.monotonic() < back_at + hold_s)
        ):
            if back_at is None and back.is_set():
                back_at = time.monotonic()
                if proxy is not None:
                    proxy.mend()
                    trace.add("the watches reach the cluster again")
            i += 1
            if i == kill_at:
                running = lab.components("apiserver")
                names = sorted(running) if every else rng.sample(sorted(running), 1)
                lab.wait_restartable(names)
                running = lab.components("apiserver")
                victims = [running[n] for n in names if n in running]
                trace.zero = time.monotonic()
                for name in names:
                    with contextlib.suppress(ProcessLookupError, KeyError):
                        os.kill(running[name], signal.SIGKILL)
                        lab.killed(name)
                trace.add(f"SIGKILL to {len(victims)} kube-apiserver(s)")
                if proxy is not None:
                    proxy.cut()
                    trace.add("the watches are cut off from the cluster")
                readiness = watch_readiness(lab, trace, stop_readiness, back)
            body = {"spec": {"unschedulable": True if flips % 2 == 0 else None}}
            deadline = time.monotonic() + 60
            while True:
                try:
                    out = client.patch(f"/api/v1/nodes/{node}", body)
                    flips += 1
                    rv = int(out["metadata"]["resourceVersion"])
                    acked.append((time.monotonic(), rv))
                    trace.add(f"flip {flips} acknowledged at {rv} ({'on' if flips % 2 else 'off'})")
                    break
                except PowercutError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            time.sleep(0.2)
        if flips % 2:
            out = client.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": None}})
            flips += 1
            acked.append((time.monotonic(), int(out["metadata"]["resourceVersion"])))
        time.sleep(3)
    finally:
        node_flips = [
            t
            for t in tl
            if t.kind == NODE and t.name == node and t.transition in ("cordoned", "uncordoned")
        ]
        seen = len(node_flips)
        obs.stop()
        independent.close()
        if proxy is not None:
            proxy.close()
            watching.close()
        stop_readiness.set()
        if readiness is not None:
            readiness.join(5)
    notes = tl.all(kind=OBSERVER)
    gone = [t for t in notes if t.transition == "watch-gone"]
    relists = [t for t in notes if t.transition == "relisted"]
    exact = [t for t in relists if t.detail.get("exact")]
    for t in notes:
        if t.name == "nodes" and t.transition in ("watch-gone", "relisted", "watch-broken"):
            d = t.detail
            what = {
                "watch-gone": f"410, cache starts at {d.get('cache_start')} "
                f"(try {d.get('attempt')}, from {d.get('resource_version')})",
                "relisted": f"re-listed at {d.get('resource_version')} "
                f"(exact: {d.get('exact')}, resumed from {d.get('since_resource_version')}, "
                f"{d.get('changes')} change(s))",
                "watch-broken": str(d.get("error", ""))[:70],
            }[t.transition]
            trace.add(f"observer {what}", t.mono)
    for t in node_flips:
        how = " (re-list)" if t.detail.get("relist") else ""
        trace.add(f"observer {t.transition}{how}", t.mono)
    flip_rvs = [rv for _, rv in acked]
    announced = gaps(tl, resources=["nodes"])
    windows = [
        (int(t.detail["since_resource_version"] or 0), int(t.detail["resource_version"]))
        for t in relists
        if t.name == "nodes" and t.detail.get("since_resource_version")
    ]
    lost = max(0, flips - seen)
    if windows or not any(t.name == "nodes" for t in relists):
        obs_seen = seen_through_windows(flip_rvs, None, windows)
        in_gap = len(set(flip_rvs) - obs_seen)
    else:  # an Observer whose gap notes carry no resourceVersions: by time, as before
        in_gap = sum(
            1 for at, _ in acked if any(g.since_mono <= at <= g.until_mono for g in announced)
        )
        obs_seen = set(flip_rvs)
    lost_unannounced = max(0, lost - in_gap)
    ind_windows = [(since, at) for since, at, _ in independent.relists]
    ind_seen = seen_through_windows(flip_rvs, independent.seen, ind_windows)
    lost_independent = len(set(flip_rvs) - ind_seen)
    lost_seen_by_independent = len((set(flip_rvs) - obs_seen) & independent.seen)
    tally.lost += lost_unannounced
    tally.lost_in_gap += lost - lost_unannounced
    tally.lost_vs_independent += lost_seen_by_independent
    tally.lost_independent += lost_independent
    tally.gone += len(gone)
    tally.relists += len(relists)
    tally.exact_relists += len(exact)
    tally.resumed += max(0, sum(1 for t in gone if t.detail.get("attempt") == 1) - len(relists))
    tally.gaps += len(announced)
    if lost or lost_independent:
        windows_s = ", ".join(f"{g.seconds:.1f} s ({g.reason[:60]})" for g in announced) or "none"
        tally.notes.append(
            f"apiserver-restart: {flips} cordon flips acknowledged; the Observer saw {seen} "
            f"({lost - lost_unannounced} lost inside its announced gaps: {windows_s}; "
            f"{lost_unannounced} without; {lost_seen_by_independent} that the independent "
            f"watch saw), the independent watch {independent.flips} ({lost_independent} lost)"
        )
    tag = (
        f"apiserver-restart ({'every' if every else 'one'} API server) at flip {kill_at} of "
        f"{flips} on {node}: observer {seen} ({len(gone)} 410(s), {len(relists)} re-list(s), "
        f"{len(exact)} at a cache start; {len(announced)} node gap(s) covering {in_gap} "
        f"flip(s)), independent {independent.flips} ({len(independent.relists)} re-list(s))"
    )
    if show_trace:
        tag += "\n" + trace.render()
    settle_and_count(lab, inv, client, tally, tag)
    return tag


def controller_manager_leader(lab: Lab) -> str | None:
    """The control-plane node whose controller-manager logged the latest lease acquisition."""
    best: tuple[str, str] | None = None
    prefix = "kube-controller-manager-"
    for log in (lab.state / "logs").glob(f"{prefix}*.log"):
        for line in log.read_text(errors="replace").splitlines():
            low = line.lower()
            if (
                "successfully acquired lease" in low
                and "kube-system/kube-controller-manager" in low
            ):
                stamp = " ".join(line.split()[:2])  # klog: "I1125 08:18:34.674999"
                if best is None or stamp > best[0]:
                    best = (stamp, log.stem.removeprefix(prefix))
    return None if best is None else best[1]


def cp_lease_holder(
    lab: Lab, inv: Inventory, client: KubeClient, rng: random.Random, tally: Tally
) -> str:
    cps = [n.name for n in inv.nodes_by_role("control-plane")]
    leader = controller_manager_leader(lab)
    victim = next((c for c in cps if leader and leader in c), rng.choice(cps))
    proc, what = start_target(lab, rng, longevity=False)  # one that ends by itself
    time.sleep(rng.uniform(3.0, 20.0))
    d = driver_for(inv.node(victim), budgets=inv.timing_budgets())
    try:
        d.off()
        time.sleep(rng.uniform(5.0, 20.0))
        d.on()
    finally:
        d.close()
    try:
        rc = proc.wait(timeout=900)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait()
        tally.notes.append(f"cp-lease-holder: {what} still running 900 s later; SIGTERM")
    if rc not in RUN_EXIT:
        tally.contract += 1
        tally.notes.append(f"cp-lease-holder: {what} exited {rc}")
    tag = f"cp-lease-holder {victim} (leader: {leader or 'unknown'}) under {what} (exit {rc})"
    settle_and_count(lab, inv, client, tally, tag)
    return tag


# -- main -----------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=50, help="interruptions (default 50)")
    ap.add_argument("--short", action="store_true", help="the short form: one of each fault")
    ap.add_argument("--seed", type=int, default=None, help="replay a run (printed at the start)")
    ap.add_argument(
        "--base-port",
        type=int,
        default=int(os.environ.get("POWERCUT_BENCH_PORT", "25000")),
        help="the bench lab's first port (default $POWERCUT_BENCH_PORT or 25000; a lab takes 1000)",
    )
    ap.add_argument(
        "--only",
        choices=[*SIGNAL_FAULTS, *OTHER_FAULTS],
        default=None,
        help="inject only this fault (--count times)",
    )
    ap.add_argument(
        "--watch-timeout",
        type=int,
        default=3,
        help="the apiserver-restart Observer's watch timeout in seconds (default 3: every "
        "watch reconnects through the balancer several times a run, so some land on a "
        "restarted API server; the Observer's own default is 300)",
    )
    ap.add_argument(
        "--cut-watches",
        action="store_true",
        help="apiserver-restart: the Observer and the independent watch reach the cluster "
        "through a relay that drops them from the kill until the killed API servers are ready "
        "again (the harness cut off meanwhile), so they come back with a resourceVersion "
        "older than a restarted API server's watch cache; the relay listens on the bench "
        "lab's last port (base + 999)",
    )
    ap.add_argument(
        "--trace",
        action="store_true",
        help="print each apiserver-restart's timeline: the kill, each API server ready again, "
        "each acknowledged flip, each 410 and re-list, what each watch saw",
    )
    ap.add_argument(
        "--one-apiserver",
        action="store_true",
        help="restart one API server of three (a lost control-plane node), not all at once "
        "(the short form does)",
    )
    args = ap.parse_args()
    if args.short:
        args.one_apiserver = True
    logging.basicConfig(level=logging.ERROR)  # the watches' reconnections are expected here
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    rng = random.Random(seed)
    if args.short:
        faults = [*SIGNAL_FAULTS, *OTHER_FAULTS]
    else:
        faults = [*SIGNAL_FAULTS, *OTHER_FAULTS]
        faults += [rng.choice([*SIGNAL_FAULTS * 3, *OTHER_FAULTS]) for _ in range(args.count)]
        faults = faults[: max(args.count, len(SIGNAL_FAULTS) + len(OTHER_FAULTS))]
    if args.only:
        faults = [args.only] * args.count
    rng.shuffle(faults)
    print(f"fault bench: {len(faults)} interruptions, seed {seed}", flush=True)
    tally = Tally()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="powercut-fault-bench-") as tmp:
        lab = Lab(Path(tmp), args.base_port)
        lab.up()
        try:
            inv = load_inventory(lab.inventory_path)
            client = KubeClient.from_kubeconfig(inv.cluster.kubeconfig, inv.cluster.context)
            for i, fault in enumerate(faults, 1):
                t0 = time.monotonic()
                if fault in SIGNAL_FAULTS:
                    tag = signal_fault(lab, inv, client, rng, fault, tally)
                elif fault == "bmc-stops":
                    tag = bmc_stops(lab, inv, client, rng, tally)
                elif fault == "apiserver-restart":
                    tag = apiserver_restart(
                        lab, inv, client, rng, tally, not args.one_apiserver,
                        args.watch_timeout, args.trace,
                        args.base_port + 999 if args.cut_watches else None,
                    )  # fmt: skip
                else:
                    tag = cp_lease_holder(lab, inv, client, rng, tally)
                tally.interruptions[fault] += 1
                print(
                    f"[{i}/{len(faults)}] {tag} ({time.monotonic() - t0:.0f} s; "
                    f"{tally.broken()} problems so far)",
                    flush=True,
                )
        finally:
            lab.down()
    total = sum(tally.interruptions.values())
    print(f"\nfault bench, seed {seed}, {(time.monotonic() - started) / 60:.1f} min")
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(tally.interruptions.items()))
    print(f"interruptions: {total} ({kinds})")
    for label, value in (
        ("nodes left off", tally.off),
        ("nodes left cut off (on, not Ready)", tally.cut_off),
        ("nodes left cordoned", tally.cordoned),
        ("nodes left tainted", tally.tainted),
        ("cluster locks left", tally.locks),
        ("journal entries owed after recover", tally.owed),
        ("transitions lost without an announced gap", tally.lost),
        ("lost that the independent watch saw", tally.lost_vs_independent),
        ("exit codes that broke the contract", tally.contract),
    ):
        print(f"{label:42} {value:4}  (target 0){'' if value == 0 else '  MISSED'}")
    print(
        f"{'transitions lost inside an announced gap':42} {tally.lost_in_gap:4}  "
        "(announced on the timeline: a watch re-listed after 410 Gone)"
    )
    if tally.interruptions["apiserver-restart"]:
        print(
            f"{'transitions the independent watch lost':42} {tally.lost_independent:4}  "
            "(an ordinary list+watch client: re-lists at once on 410)"
        )
        print(
            f"Observer watches: {tally.gone} 410 Gone, {tally.resumed} round(s) resumed on "
            f"another API server, {tally.relists} re-list(s) ({tally.exact_relists} at the "
            f"watch caches' start), {tally.gaps} node gap(s) announced"
        )
    for note in tally.notes:
        print(f"  - {note}")
    return 0 if tally.broken() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
