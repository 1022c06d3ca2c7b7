"""The live cycle runner end to end against a simulated cluster (the fake API server).

:class:`SimCluster` plays the node lifecycle controller, the ReplicaSet/StatefulSet/
DaemonSet controllers, kubelets and the attach/detach controller on :class:`FakeApiServer`,
on a compressed clock (tenths of seconds instead of tens): powering a node off makes it
NotReady, then evicts its pods and replaces the Deployment's elsewhere; powering it on makes
it Ready, finalises its Terminating pods and brings the StatefulSet member back with its
volume. The real engine, observer, probers, session and journal run against it.
Also used by ``bench/longevity_bench.py``.

In tests/integration, not tests/unit: the engine's waits, its probers and the simulated
controllers' timers all run on real time (compressed), and the cycle budgets are judged
against it. A fake clock would need the whole engine (session, longevity cycle, waits) to
take one.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.errors import PermanentError
from harness.inventory import Inventory, load_inventory
from harness.journal import Journal, recover
from harness.kube.client import KubeClient
from harness.kube.timeline import Timeline
from harness.longevity.records import CYCLES_FILE, read_log
from harness.longevity.run import RunOptions, run_longevity
from harness.power.base import PowerDriver, PowerState
from harness.scenario.targets.choice import DEFAULT_PHRASE
from harness.session import Session, journal_path_for
from tests.fakes.api import FakeApiServer, node, pod, set_ready

NS = "lab"
RACKS = ("a", "b", "c")
WORKERS = [f"w-{r}{i}" for r in RACKS for i in (1, 2, 3)]
FAST_BUDGETS = {
    "not_ready": "2s",
    "evacuation": "3s",
    "recovery": "4s",
    "service_outage": "2s",
    "volume_reattach": "2s",
    "cleanup": "3s",
}


@dataclass
class Timings:
    not_ready: float = 0.3
    evict: float = 0.3  # after NotReady
    replace_ready: float = 0.2
    back: float = 0.2  # power-on -> node Ready
    member_ready: float = 0.2


@dataclass
class SimCluster:
    api: FakeApiServer
    timings: Timings = field(default_factory=Timings)
    power: dict[str, PowerState] = field(default_factory=dict)
    #: nodes that never become Ready again after power-on
    broken: set[str] = field(default_factory=set)
    #: nodes whose "kubelet" does not finalise Terminating pods after power-on
    no_finalise: set[str] = field(default_factory=set)
    #: called (once) at the first power-off
    on_power_off: Callable[[], None] | None = None
    _timers: list[threading.Timer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(100))

    # -- setup -------------------------------------------------------------------------------

    def populate(self) -> None:
        for i, r in enumerate(RACKS):
            self.api.add("nodes", node(f"cp-{i + 1}", zone=f"rack-{r}"))
        for w in WORKERS:
            self.api.add("nodes", node(w, zone=f"rack-{w[2]}"))
            self.power[w] = PowerState.ON
        for w in ("web", "quorum", "agent"):
            kind = {"web": "deployments", "quorum": "statefulsets", "agent": "daemonsets"}[w]
            obj: dict[str, Any] = {"metadata": {"name": w, "namespace": NS}, "spec": {}}
            if w == "agent":
                obj["status"] = {"desiredNumberScheduled": len(WORKERS)}
            else:
                obj["spec"]["replicas"] = 3
            self.api.add(kind, obj)
        for i, w in enumerate(("w-a1", "w-b2", "w-c3")):
            self._pod(f"web-{i}", w, ("ReplicaSet", "web-5d8f"), ready=True)
        for i, w in enumerate(("w-a2", "w-b1", "w-c3")):
            self._pod(f"quorum-{i}", w, ("StatefulSet", "quorum"), ready=True)
            self.api.add("volumeattachments", self._va(f"quorum-{i}", w))
        for w in WORKERS:
            self._pod(f"agent-{w}", w, ("DaemonSet", "agent"), ready=True)

    def _pod(self, name: str, node_name: str, owner: tuple[str, str], *, ready: bool) -> None:
        p = pod(name, namespace=NS, node_name=node_name, ready=ready, owner=owner)
        if owner[0] == "ReplicaSet":
            p["metadata"]["labels"]["pod-template-hash"] = "5d8f"
        self.api.add("pods", p)

    @staticmethod
    def _va(member: str, node_name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": f"csi-{member}-{node_name}"},
            "spec": {
                "attacher": "lab.csi",
                "nodeName": node_name,
                "source": {"persistentVolumeName": f"pv-{member}"},
            },
            "status": {"attached": True},
        }

    # -- scheduling ------------------------------------------------------------------------

    def later(self, delay: float, fn: Callable[[], object]) -> None:
        t = threading.Timer(delay, fn)
        t.daemon = True
        with self._lock:
            self._timers = [x for x in self._timers if x.is_alive()]
            self._timers.append(t)
        t.start()

    def close(self) -> None:
        with self._lock:
            for t in self._timers:
                t.cancel()

    def pods_on(self, node_name: str) -> list[dict[str, Any]]:
        with self.api._cond:
            return [
                copy.deepcopy(p)
                for p in self.api.objects["pods"].values()
                if (p.get("spec") or {}).get("nodeName") == node_name
            ]

    def _owner(self, p: dict[str, Any]) -> str:
        refs = p["metadata"].get("ownerReferences") or [{}]
        return str(refs[0].get("kind", ""))

    # -- what power does -------------------------------------------------------------------

    def power_off(self, name: str) -> None:
        self.power[name] = PowerState.OFF
        hook, self.on_power_off = self.on_power_off, None
        if hook is not None:
            self.later(0.05, hook)
        self.later(self.timings.not_ready, lambda: self._not_ready(name))

    def _not_ready(self, name: str) -> None:
        if self.power[name] is not PowerState.OFF:
            return

        def change(n: dict[str, Any]) -> None:
            set_ready(n, "Unknown")
            n["spec"]["taints"] = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]

        self.api.update("nodes", "", name, change)
        for p in self.pods_on(name):
            self.api.update("pods", NS, p["metadata"]["name"], lambda o: set_ready(o, False))
        self.later(self.timings.evict, lambda: self._evict(name))

    def _evict(self, name: str) -> None:
        if self.power[name] is not PowerState.OFF:
            return
        for p in self.pods_on(name):
            kind = self._owner(p)
            if kind == "DaemonSet":
                continue

            def mark(o: dict[str, Any]) -> None:
                o["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                o["metadata"]["deletionGracePeriodSeconds"] = 30

            self.api.update("pods", NS, p["metadata"]["name"], mark)
            if kind == "ReplicaSet":
                # like a topology spread: same rack first, a node without a web pod first
                busy = {
                    (q.get("spec") or {}).get("nodeName")
                    for q in self.api.objects["pods"].values()
                    if q["metadata"]["name"].startswith("web-")
                    and not q["metadata"].get("deletionTimestamp")
                }
                target = min(
                    (w for w in WORKERS if self.power[w] is PowerState.ON),
                    key=lambda w: (w[2] != name[2], w in busy, w),
                )
                new = f"web-{next(self._names)}"
                self._pod(new, target, ("ReplicaSet", "web-5d8f"), ready=False)
                self.later(
                    self.timings.replace_ready,
                    functools.partial(
                        self.api.update, "pods", NS, new, lambda o: set_ready(o, True)
                    ),
                )

    def power_on(self, name: str) -> None:
        self.power[name] = PowerState.ON
        if name not in self.broken:
            self.later(self.timings.back, lambda: self._back(name))

    def _back(self, name: str) -> None:
        def change(n: dict[str, Any]) -> None:
            set_ready(n, "True")
            n["spec"]["taints"] = []

        self.api.update("nodes", "", name, change)
        for p in self.pods_on(name):
            pname = p["metadata"]["name"]
            if p["metadata"].get("deletionTimestamp"):
                if name in self.no_finalise:
                    continue
                self.api.remove("pods", NS, pname)
                if self._owner(p) == "StatefulSet":
                    va = f"csi-{pname}-{name}"
                    self.api.update(
                        "volumeattachments", "", va, lambda o: o["status"].update(attached=False)
                    )
                    self._pod(pname, name, ("StatefulSet", "quorum"), ready=False)
                    self.later(
                        self.timings.member_ready, functools.partial(self._member, pname, va)
                    )
            else:
                self.api.update("pods", NS, pname, lambda o: set_ready(o, True))

    def _member(self, name: str, va: str) -> None:
        self.api.update("volumeattachments", "", va, lambda o: o["status"].update(attached=True))
        self.api.update("pods", NS, name, lambda o: set_ready(o, True))

    def web_ready(self) -> int:
        with self.api._cond:
            return sum(
                1
                for p in self.api.objects["pods"].values()
                if p["metadata"]["name"].startswith("web-")
                and not p["metadata"].get("deletionTimestamp")
                and any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in p["status"]["conditions"]
                )
            )


class SimDriver:
    def __init__(self, sim: SimCluster, node_name: str) -> None:
        self.sim = sim
        self.node = node_name

    def state(self) -> PowerState:
        return self.sim.power[self.node]

    def off(self, *, graceful: bool = False) -> None:
        self.sim.power_off(self.node)

    def on(self) -> None:
        self.sim.power_on(self.node)

    def cycle(self) -> None:
        self.off()
        self.on()

    def close(self) -> None:
        return None


class SimExecutor:
    """Journal undos against the simulator (what ``powercut recover`` would do)."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim

    def power_on(self, node: str) -> None:
        if self.sim.power[node] is not PowerState.ON:
            self.sim.power_on(node)

    def uncordon(self, node: str) -> None:
        return None

    def remove_taint(self, node: str, key: str, effect: str) -> None:
        return None

    def restore_node(self, node: str, manifest: dict[str, Any]) -> None:
        return None


class SimSession(Session):
    sim: SimCluster

    def driver(self, node: str, protocol: str | None = None) -> PowerDriver:
        return SimDriver(self.sim, node)

    def __enter__(self) -> SimSession:
        super().__enter__()
        if self.undo is not None:
            self.undo.executor = SimExecutor(self.sim)
        return self


class HealthServer:
    """``web``'s health URL: 200 while it has a Ready pod, 503 otherwise."""

    def __init__(self, sim: SimCluster) -> None:
        outer = sim

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                code = 200 if outer.web_ready() else 503
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def write_inventory(path: Path, health_url: str) -> Path:
    nodes = []
    for i, r in enumerate(RACKS):
        nodes.append((f"cp-{i + 1}", "control-plane", f"rack-{r}"))
    nodes.extend((w, "worker", f"rack-{w[2]}") for w in WORKERS)
    lines = [
        "name: sim",
        "timings: fast",
        "cluster: {kubeconfig: /dev/null}",
        "safety: {max_nodes_down: 3}",
        "workloads:",
        f"- {{namespace: {NS}, kind: Deployment, name: web, min_available: 1,"
        f" health: {{http: '{health_url}'}}}}",
        f"- {{namespace: {NS}, kind: StatefulSet, name: quorum, min_available: 2}}",
        f"- {{namespace: {NS}, kind: DaemonSet, name: agent, critical: false}}",
        "nodes:",
    ]
    for name, role, rack in nodes:
        lines.append(
            f"- {{name: {name}, role: {role}, rack: {rack}, power: {{driver: ipmi, "
            "endpoint: '127.0.0.1:9', username: sim, password_env: SIM_BMC_PASSWORD}}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Sim:
    sim: SimCluster
    api: FakeApiServer
    client: KubeClient
    inventory_path: Path
    inventory: Inventory

    def options(self, out: Path, **kw: Any) -> RunOptions:
        base: dict[str, Any] = {
            "inventory": self.inventory_path,
            "out": out,
            "fraction": 1 / 3,
            "groups": "auto",  # fixed groups, rotated; test_each_cycle_chooses... the default
            "outage_s": 0.3,
            "budget_overrides": FAST_BUDGETS,
            "keep_timelines": "all",
            "probe_interval_s": 0.05,
            "settle_s": 4.0,
            "report": False,
        }
        base.update(kw)
        return RunOptions(**base)

    def session_factory(self, inv: Inventory, client: KubeClient, tl: Timeline) -> Session:
        s = SimSession(inv, client=client, timeline=tl, lock=False)
        s.sim = self.sim
        return s

    def run(self, opts: RunOptions, **kw: Any) -> Any:
        kw.setdefault("say", lambda _m: None)
        return run_longevity(opts, client=self.client, session_factory=self.session_factory, **kw)


#: Changes and requests the fake API server keeps (about 30 changes and 3 requests a cycle):
#: bounded, so that a long run (``bench/longevity_bench.py rss --sim``, in this process)
#: measures the harness's memory, not the fake's history.
SIM_HISTORY = 200


@contextlib.contextmanager
def simulated(tmp_path: Path, timings: Timings | None = None) -> Iterator[Sim]:
    with FakeApiServer(max_history=SIM_HISTORY, max_requests=SIM_HISTORY) as api:
        sim = SimCluster(api, timings or Timings())
        sim.populate()
        health = HealthServer(sim)
        client = api.client()
        try:
            inv_path = write_inventory(tmp_path / "sim.yaml", health.url)
            yield Sim(sim, api, client, inv_path, load_inventory(inv_path))
        finally:
            sim.close()
            client.close()
            health.close()


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


pytestmark = pytest.mark.timeout(120)


def test_two_cycles_measured_end_to_end(tmp_path: Path, state: Path) -> None:
    with simulated(tmp_path) as s:
        outcome = s.run(s.options(tmp_path / "run", cycles=2))
        assert outcome.result.reason == "2 cycles done", outcome.result
        assert all(p is PowerState.ON for p in s.sim.power.values())
    log = read_log(tmp_path / "run" / CYCLES_FILE)
    assert [(c.cycle, c.group, c.status) for c in log.cycles] == [
        (1, "g1", "passed"),
        (2, "g2", "passed"),
    ], [c.reason for c in log.cycles]
    first = log.cycles[0]
    assert first.nodes == ["w-a1", "w-b1", "w-c1"]
    assert 0.25 <= (first.phases["not_ready"] or 0) < 2
    assert (first.phases["evacuation"] or 0) >= 0.5
    web = first.detail["workloads"]["lab/Deployment/web"]
    evacuation = first.phases["evacuation"]
    assert evacuation is not None
    assert web["affected"] and web["recovery_s"] >= evacuation - 0.05
    quorum = first.detail["workloads"]["lab/StatefulSet/quorum"]
    assert quorum["from"] == "power-on" and quorum["recovery_s"] is not None
    assert set(first.detail["volumes"]) == {"pv-quorum-1"}  # quorum-1 lived on w-b1
    assert first.detail["volumes"]["pv-quorum-1"]["reattach_s"] is not None
    assert first.phases["volume_reattach"] == first.detail["volumes"]["pv-quorum-1"]["reattach_s"]
    assert first.timeline and (tmp_path / "run" / first.timeline).exists()
    assert first.detail["services"]["web"]["samples"] > 5
    assert log.runs[0]["groups"] == [
        {"name": "g1", "nodes": ["w-a1", "w-b1", "w-c1"]},
        {"name": "g2", "nodes": ["w-a2", "w-b2", "w-c2"]},
        {"name": "g3", "nodes": ["w-a3", "w-b3", "w-c3"]},
    ]
    assert Journal.read(journal_path_for(s.inventory))  # every power-off was journaled
    assert not [e for e in Journal.read(journal_path_for(s.inventory)) if e.owes_undo]


def test_each_cycle_chooses_its_group_by_the_default_target(tmp_path: Path, state: Path) -> None:
    """Without fixed groups, each cycle's group is the steps' "one third of the worker nodes,
    one per rack, sparing the critical workloads", chosen from where the pods are then."""
    with simulated(tmp_path) as s:
        outcome = s.run(s.options(tmp_path / "run", cycles=2, groups="target"))
        assert outcome.result.reason == "2 cycles done", outcome.result
        assert all(p is PowerState.ON for p in s.sim.power.values())
    log = read_log(tmp_path / "run" / CYCLES_FILE)
    assert [c.group for c in log.cycles] == ["c1", "c2"]
    for c in log.cycles:
        assert c.status != "failed", c.reason
        assert len(c.nodes) == 3 and {n[2] for n in c.nodes} == {"a", "b", "c"}
    assert log.runs[0]["target"] == DEFAULT_PHRASE


def test_a_node_that_does_not_come_back_stops_the_run_powered_on(
    tmp_path: Path, state: Path
) -> None:
    with simulated(tmp_path) as s:
        s.sim.broken.add("w-b1")
        outcome = s.run(s.options(tmp_path / "run", cycles=3, settle_s=1.5))
        assert outcome.result.failed
        assert "could not restore the steady state" in outcome.result.reason
        assert "node w-b1 is not Ready (Unknown)" in outcome.result.reason
        assert s.sim.power["w-b1"] is PowerState.ON
    log = read_log(tmp_path / "run" / CYCLES_FILE)
    assert [c.status for c in log.cycles] == ["failed"]
    assert "cleanup" in log.cycles[0].incomplete


def test_stuck_terminating_pods_are_force_deleted_and_reported(tmp_path: Path, state: Path) -> None:
    with simulated(tmp_path) as s:
        s.sim.no_finalise.add("w-a1")
        outcome = s.run(s.options(tmp_path / "run", cycles=1))
        assert not outcome.result.failed, outcome.result.reason
    rec = read_log(tmp_path / "run" / CYCLES_FILE).cycles[0]
    assert rec.status == "missed"
    assert rec.detail["remediation"]["force_deleted"] == ["lab/web-0"]
    assert "did not settle by itself" in rec.reason


def test_crash_leaves_undos_owed_recover_then_resume_continues(tmp_path: Path, state: Path) -> None:
    with simulated(tmp_path) as s:
        out = tmp_path / "run"
        s.run(s.options(out, cycles=1))
        # A run that died during cycle 2: its power-offs are journaled, their undos owed, and
        # half a line was being written.
        session = s.session_factory(s.inventory, s.client, Timeline())
        session.undo_on_exit = False
        with session:
            session.power_off(["w-a2", "w-b2", "w-c2"])
        with (out / CYCLES_FILE).open("ab") as f:
            f.write(b'{"type": "cycle", "cycle": 2, "gro')
        assert s.sim.power["w-a2"] is PowerState.OFF
        opts = s.options(out)
        with pytest.raises(PermanentError, match="still owes 3 undo"):
            s.run(opts, resume=True)
        with Journal(journal_path_for(s.inventory)) as journal:
            results = recover(journal, SimExecutor(s.sim))
        assert [r.ok for r in results] == [True, True, True]
        outcome = s.run(s.options(out, cycles=3), resume=True)
        assert outcome.result.reason == "3 cycles done", outcome.result
    log = read_log(out / CYCLES_FILE)
    assert [(c.cycle, c.group) for c in log.cycles] == [(1, "g1"), (2, "g2"), (3, "g3")]
    assert [r["event"] for r in log.runs] == ["start", "stop", "resume", "stop"]
    assert log.runs[2]["run_id"] == log.runs[0]["run_id"]


def test_a_directory_with_a_run_is_not_overwritten(tmp_path: Path, state: Path) -> None:
    with simulated(tmp_path) as s:
        out = tmp_path / "run"
        s.run(s.options(out, cycles=1))
        with pytest.raises(Exception, match="already holds a longevity run"):
            s.run(s.options(out, cycles=2))


def test_sim_power_off_and_on_move_the_workloads(tmp_path: Path) -> None:
    with simulated(tmp_path, Timings(0.01, 0.01, 0.01, 0.01, 0.01)) as s:
        s.sim.power_off("w-a1")

        def moved() -> bool:
            names = {p["metadata"]["name"] for p in s.sim.pods_on("w-a1")}
            return "web-0" in names and s.sim.web_ready() == 3

        deadline = time.monotonic() + 5  # timings of 0.01 s: a loaded machine needs slack
        while not moved() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert moved()
        assert uuid.UUID(s.sim.pods_on("w-a1")[0]["metadata"]["uid"])


def test_sigterm_mid_cycle_finishes_and_records_that_cycle(tmp_path: Path, state: Path) -> None:
    import os
    import signal

    with simulated(tmp_path) as s:
        original = signal.getsignal(signal.SIGTERM)
        s.sim.on_power_off = lambda: os.kill(os.getpid(), signal.SIGTERM)  # during cycle 1
        outcome = s.run(s.options(tmp_path / "run", cycles=3))
        assert signal.getsignal(signal.SIGTERM) == original
        assert outcome.result.interrupted and outcome.result.reason == "SIGTERM received"
        assert all(p is PowerState.ON for p in s.sim.power.values())
    log = read_log(tmp_path / "run" / CYCLES_FILE)
    assert [c.cycle for c in log.cycles] == [1]
    assert log.cycles[0].status != "failed" and log.cycles[0].phases["cleanup"] is not None
    assert not [e for e in Journal.read(journal_path_for(s.inventory)) if e.owes_undo]
