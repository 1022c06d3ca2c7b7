"""``powercut lab {build,up,status,down}``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.clock import SYSTEM_CLOCK
from harness.errors import ConfigError, PowercutError
from harness.journal.liveness import process_alive
from harness.lab import build
from harness.lab.bmc.profiles import PROFILES
from harness.lab.expose import check_address
from harness.lab.inventory_out import write_inventory
from harness.lab.pki import LabPKI
from harness.lab.procs import group_is_ours, recorded_alive, write_identity
from harness.lab.spec import (
    AUTHN_FILE,
    TIMING_NAMES,
    LabSpec,
    busy_ports,
    check_authentication_config,
    default_state_dir,
)
from harness.settings import attached

_STATE_HELP = (
    "the lab's state directory (etcd, certificates, kubeconfig, credentials, lab.json; "
    "default $POWERCUT_LAB_DIR, else ~/.cache/powercut/lab): one lab per directory"
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lab = sub.add_parser(
        "lab",
        help="the embedded lab: a real control plane with kwok nodes and BMCs on loopback",
        description="Build, start, inspect and stop the embedded lab cluster. The lab keeps "
        "its state (etcd, certificates, kubeconfig, credentials, lab.json) in --state-dir "
        "DIR, else $POWERCUT_LAB_DIR, else ~/.cache/powercut/lab: one lab per directory, so "
        "give a lab that runs beside another its own directory and --base-port, and name "
        "the same directory to status and down.",
    )
    lsub = lab.add_subparsers(dest="lab_command", required=True, metavar="COMMAND")
    b = lsub.add_parser(
        "build", help="obtain the pinned lab binaries (environment, cache, Go build)"
    )
    b.set_defaults(func=cmd_build)
    up = lsub.add_parser("up", help="start a lab (reports and changes nothing if one runs)")
    up.add_argument("--racks", type=int, default=3, help="number of racks (default 3)")
    up.add_argument(
        "--workers-per-rack",
        type=int,
        default=3,
        help="workers per rack (default 3; at most 1,000 nodes in all)",
    )
    up.add_argument(
        "--control-planes", type=int, default=3, help="control-plane nodes: 1, 3 or 5 (default 3)"
    )
    up.add_argument(
        "--timings",
        default="fast",
        help=f"timing profile: {' or '.join(TIMING_NAMES)} (default fast)",
    )
    up.add_argument("--workloads", action="store_true", help="deploy the sample workloads")
    up.add_argument(
        "--boot-seconds",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds from a node's power-on to its kubelet starting (its POST and boot; the "
        "BMCs read On meanwhile); default: the timing profile's, 15 (fast) or 60 (upstream), "
        "longer than the node monitor's grace period so a reboot makes the node NotReady",
    )
    up.add_argument(
        "--node-boot-seconds",
        action="append",
        default=[],
        metavar="NODE=SECONDS",
        help="the boot time of one node, over --boot-seconds (repeatable), e.g. w-a1=40",
    )
    up.add_argument(
        "--redfish-profile",
        action="append",
        default=[],
        metavar="NODE=PROFILE",
        help="the Redfish BMC of a node (or * for every node) plays a vendor's behaviour "
        f"(repeatable): {', '.join(PROFILES)}; see docs/bmc.md. The node's inventory entry "
        "then points at that profile's port (Redfish as its power driver)",
    )
    up.add_argument(
        "--inventory-out",
        type=Path,
        default=Path("inventories/lab.yaml"),
        help="where to write the lab's inventory (default inventories/lab.yaml)",
    )
    up.add_argument(
        "--base-port", type=int, default=21000, help="first loopback port (default 21000)"
    )
    up.add_argument(
        "--expose",
        default="",
        metavar="ADDR",
        help="also serve the API servers, BMCs, SSH, health endpoints and Prometheus on this "
        "address of the machine (e.g. a Docker network's gateway, for a runner in a "
        "container); certificates and known_hosts name it too",
    )
    up.add_argument(
        "--allow-ephemeral-ports",
        action="store_true",
        help="let the ports overlap the kernel's ephemeral range (where the only free ports "
        "lie there); an outgoing connection may then hold a lab port first, and lab up "
        "names it busy",
    )
    up.add_argument(
        "--authentication-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="an AuthenticationConfiguration (apiserver.config.k8s.io/v1) for the API "
        "servers: JWT issuers the lab trusts besides its own, e.g. a management cluster's "
        "ServiceAccount tokens (docs/management.md); copied into the state directory, where "
        "the API servers re-read it when it changes",
    )
    up.add_argument("--state-dir", type=Path, default=None, metavar="DIR", help=_STATE_HELP)
    up.set_defaults(func=cmd_up)
    st = lsub.add_parser("status", help="components, nodes, racks and power states")
    st.add_argument("--state-dir", type=Path, default=None, metavar="DIR", help=_STATE_HELP)
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.set_defaults(func=cmd_status)
    dn = lsub.add_parser("down", help="stop everything the lab started (idempotent)")
    dn.add_argument("--state-dir", type=Path, default=None, metavar="DIR", help=_STATE_HELP)
    dn.set_defaults(func=cmd_down)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_build(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    bins = build.obtain(_say)
    for group, source in bins.sources.items():
        print(f"{group}: {source}")
    print(f"lab binaries ready in {time.monotonic() - t0:.1f}s")
    return 0


def parse_node_seconds(items: list[str]) -> dict[str, float]:
    """``NODE=SECONDS`` options into a mapping (the spec checks names and ranges)."""
    out: dict[str, float] = {}
    for item in items:
        node, sep, value = item.partition("=")
        try:
            if not sep or not node.strip():
                raise ValueError(item)
            out[node.strip()] = float(value)
        except ValueError:
            raise ConfigError(
                f"invalid value {item!r}; valid: NODE=SECONDS, e.g. w-a1=40",
                field="--node-boot-seconds",
            ) from None
    return out


def parse_redfish_profiles(items: list[str]) -> dict[str, str]:
    """``NODE=PROFILE`` options into a mapping (the spec checks names and profiles)."""
    out: dict[str, str] = {}
    for item in items:
        node, sep, name = item.partition("=")
        if not sep or not node.strip() or not name.strip():
            raise ConfigError(
                f"invalid value {item!r}; valid: NODE=PROFILE or *=PROFILE, e.g. w-a1=ilo "
                f"(profiles: {', '.join(PROFILES)})",
                field="--redfish-profile",
            )
        out[node.strip()] = name.strip()
    return out


def _running_pid(root: Path) -> int | None:
    return recorded_alive(root / "supervisor.pid")


def cmd_up(args: argparse.Namespace) -> int:
    root: Path = (args.state_dir or default_state_dir(attached(args))).resolve()
    spec = LabSpec(
        state_dir=str(root),
        racks=args.racks,
        workers_per_rack=args.workers_per_rack,
        control_planes=args.control_planes,
        timings=args.timings,
        base_port=args.base_port,
        workloads=args.workloads,
        boot_seconds=args.boot_seconds,
        node_boot_seconds=parse_node_seconds(args.node_boot_seconds),
        redfish_profiles=parse_redfish_profiles(args.redfish_profile),
        expose=check_address(args.expose) if args.expose else "",
        allow_ephemeral_ports=bool(getattr(args, "allow_ephemeral_ports", False)),
    )
    authn_file = getattr(args, "authentication_config", None)
    authn = check_authentication_config(authn_file) if authn_file else ""
    if _running_pid(root) is not None:
        print(f"a lab is already running (state in {root}); nothing changed")
        return cmd_status(argparse.Namespace(state_dir=root, json=False))
    if root.exists():
        if not is_lab_dir(root):
            raise _not_a_lab(root, "--state-dir")
        _teardown(root, quiet=True)  # what a crashed lab left behind
    busy = busy_ports(spec.all_ports())
    if busy:
        raise ConfigError(
            f"port(s) already in use: {', '.join(busy[:5])}; stop what holds them "
            "or choose another --base-port",
            field="--base-port",
        )
    if spec.control_planes > 1 and not shutil.which("haproxy"):
        raise ConfigError(
            "haproxy is not installed (apt-get install haproxy), needed with more than one "
            "control plane; or use --control-planes 1",
            field="--control-planes",
        )
    bins = build.obtain(_say)
    spec.binaries = {k: str(v) for k, v in bins.paths.items()}
    spec.services = ["web", "quorum", "registry"] if spec.workloads else []
    # Debian's prometheus (`make venv` installs it): the SLOs, alerts and stop conditions.
    spec.prometheus = shutil.which("prometheus") or ""
    if not spec.prometheus:
        _say("lab: prometheus is not installed (apt-get install prometheus): no SLOs")
    t0 = time.monotonic()
    (root / "logs").mkdir(parents=True)
    root.chmod(0o700)
    if authn:
        (root / AUTHN_FILE).write_text(authn)
        (root / AUTHN_FILE).chmod(0o600)
        spec.authentication_config = str(root / AUTHN_FILE)
    pki = LabPKI(root / "pki")
    pki.issue(
        "apiserver",
        common_name="kube-apiserver",
        server_names=(
            *spec.tls_hosts(),
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "10.96.0.1",
        ),
    )
    pki.issue("admin", common_name="powercut-admin", organization="system:masters", client=True)
    pki.service_account_keys()
    spec.save()
    log = (root / "logs" / "supervisor.out").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.lab.supervisor", "--state-dir", str(root)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # the lab is one process group, stoppable as a whole
    )
    write_identity(root / "pgid", proc.pid)
    shown = 0
    progress = root / "progress.log"

    def terminated(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM while starting: stop what started, like Ctrl-C

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        while True:
            if progress.exists():
                lines = progress.read_text().splitlines()
                for line in lines[shown:]:
                    _say(f"  lab: {line}")
                shown = len(lines)
            if (root / "ready.json").exists():
                break
            if (root / "failed.json").exists() or proc.poll() is not None:
                err = "the lab supervisor exited"
                with contextlib.suppress(OSError, ValueError):
                    err = json.loads((root / "failed.json").read_text())["error"]
                proc.wait(30)
                _teardown(root, quiet=True)
                raise PowercutError(f"lab failed to start: {err}")
            SYSTEM_CLOCK.sleep(0.2)
    except KeyboardInterrupt:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the teardown
        _teardown(root, quiet=True)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    inv = args.inventory_out
    write_inventory(spec, inv)
    print(
        f"lab ready in {time.monotonic() - t0:.1f}s: "
        f"{len(spec.nodes())} nodes in {spec.racks} racks, "
        f"{spec.control_planes} control plane(s), timings {spec.timings}"
    )
    print(f"kubeconfig: {root / 'kubeconfig'}")
    print(f"inventory:  {inv}")
    return 0


def _read_state(root: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        data: dict[str, Any] = json.loads((root / "state.json").read_text())
        return data
    return None


def cmd_status(args: argparse.Namespace) -> int:
    root: Path = (args.state_dir or default_state_dir(attached(args))).resolve()
    pid = _running_pid(root)
    if pid is None:
        print("no lab is running")
        return 3
    spec = LabSpec.load(root)
    state = _read_state(root) or {}
    nodes_ready: dict[str, str] = {}
    from harness.kube.client import KubeClient

    try:
        c = KubeClient.from_kubeconfig(root / "kubeconfig", timeout_s=3)
        items, _ = c.list("/api/v1/nodes")
        for i in items:
            cond = {x["type"]: x["status"] for x in (i.get("status") or {}).get("conditions") or []}
            nodes_ready[i["metadata"]["name"]] = {"True": "Ready", "False": "NotReady"}.get(
                cond.get("Ready", ""), "Unknown"
            )
        c.close()
        api = "serving"
    except PowercutError as exc:
        api = f"unreachable ({exc})"
    if args.json:
        print(json.dumps({"state": state, "nodes": nodes_ready, "api": api}, indent=2))
        return 0
    print(f"lab running (supervisor pid {pid}), timings {spec.timings}, API {api}")
    print(f"kubeconfig: {root / 'kubeconfig'}")
    if spec.prometheus:
        print(f"prometheus: http://127.0.0.1:{spec.ports.prometheus}")
    print("components:")
    for name, c_ in sorted((state.get("components") or {}).items()):
        print(f"  {name:40} {c_['state']}")
    print("nodes:")
    power = state.get("power") or {}
    booting = set(state.get("booting") or [])
    for n in spec.nodes():
        print(
            f"  {n.name:8} {n.role:14} {n.rack:8} power {power.get(n.name, '?'):4} "
            f"{nodes_ready.get(n.name, '-')}"
            + (f" (booting, {spec.boot_s(n.name):g}s)" if n.name in booting else "")
        )
    return 0


#: What ``lab up`` writes into a state directory (any one marks a lab's, even a crashed one's).
_LAB_MARKS = ("lab.json", "pgid", "supervisor.pid", "logs", "pki")


def is_lab_dir(root: Path) -> bool:
    """Whether ``root`` holds a lab's state (or nothing): the only directories ``lab up``
    and ``lab down`` may remove."""
    try:
        return not any(root.iterdir()) or any((root / mark).exists() for mark in _LAB_MARKS)
    except OSError:
        return False


def _not_a_lab(root: Path, flag: str) -> ConfigError:
    return ConfigError(
        f"{root} is not a lab's state directory (it has none of {', '.join(_LAB_MARKS)}) "
        "and is not empty: nothing was removed; give a new or empty directory, or the one "
        "`powercut lab up` was given",
        field=flag,
    )


def _teardown(root: Path, *, quiet: bool = False) -> bool:
    """Stop the supervisor (then its whole process group) and remove the state dir, which
    the caller has checked is a lab's (:func:`is_lab_dir`)."""
    did = False
    pid = _running_pid(root)
    if pid is not None:
        did = True
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while process_alive(pid) and time.monotonic() < deadline:
            SYSTEM_CLOCK.sleep(0.1)
    # Only our own process group: the supervisor started it as a new session, and the
    # recorded identity tells it from a group that merely reuses the number.
    pgid = group_is_ours(root / "pgid")
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
            did = True
    if root.exists():
        shutil.rmtree(root, ignore_errors=True)
    return did


def cmd_down(args: argparse.Namespace) -> int:
    root: Path = (args.state_dir or default_state_dir(attached(args))).resolve()
    if not root.exists():
        print("no lab is running; nothing to do")
        return 0
    if not is_lab_dir(root):
        raise _not_a_lab(root, "--state-dir")
    spec = None
    with contextlib.suppress(OSError, ValueError, TypeError):
        spec = LabSpec.load(root)
    t0 = time.monotonic()
    _teardown(root)
    if spec is not None:
        deadline = time.monotonic() + 10
        busy = busy_ports(spec.all_ports())
        while busy and time.monotonic() < deadline:
            SYSTEM_CLOCK.sleep(0.2)
            busy = busy_ports(spec.all_ports())
        if busy:
            raise PowercutError(f"lab stopped but ports are still held: {', '.join(busy)}")
    print(f"lab stopped in {time.monotonic() - t0:.1f}s; removed {root}")
    return 0
