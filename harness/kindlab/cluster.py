"""``powercut kind up|status|down``: a real kind cluster from the locally built node image.

``up`` installs what is missing (docker.io, the privileged-container adaptation where
privileged containers fail, the kind CLI from the Go module proxy), builds or reuses the
node image (``images.node_image``), runs the real ``kind create cluster`` with a generated
config, waits for every node Ready, with ``--storage csi`` installs the attachable storage
(``kindlab/csi.py``: a CSI driver with ``attachRequired`` on a host directory every node
has) and, with ``--workloads``, deploys the sample workloads.
``down`` deletes the cluster and everything ``up`` left: containers, the ``kind`` Docker
network when nothing else uses it, the dockerd it started, the state directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.clock import SYSTEM_CLOCK
from harness.errors import ConfigError, PowercutError
from harness.kindlab import binaries, engine, images
from harness.kindlab.spec import NODE_PORTS, KindSpec
from harness.kube.names import LABEL_CONTROL_PLANE, LABEL_ZONE
from harness.lab.build import Say
from harness.lab.spec import busy_ports

CLUSTER_LABEL = "io.x-k8s.kind.cluster"


class KindError(PowercutError):
    """kind or the cluster it made failed; the message says which step and why."""


def _kind_bin(say: Say) -> str:
    return str(binaries.obtain(say)["kind"])


def _run_kind(
    kind: str, args: list[str], say: Say, *, timeout: float = 900, network: str = "kind"
) -> None:
    """Run kind, passing its progress lines through; ``network`` is the nodes' Docker network."""
    env = {**os.environ, "KIND_EXPERIMENTAL_DOCKER_NETWORK": network}
    proc = subprocess.Popen(
        [kind, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    tail: list[str] = []
    assert proc.stdout is not None
    t0 = time.monotonic()
    for line in proc.stdout:
        line = line.rstrip()
        if line:
            say(f"  kind: {line}")
            tail.append(line)
            del tail[:-30]
    try:
        rc = proc.wait(timeout=max(1.0, timeout - (time.monotonic() - t0)))
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.wait()
        raise KindError(f"kind {args[0]} {args[1]}: no end in {timeout:.0f}s") from exc
    if rc != 0:
        raise KindError(f"kind {' '.join(args[:2])} failed (exit {rc}):\n" + "\n".join(tail))


def containers(name: str) -> list[str]:
    """Every container of the kind cluster ``name`` (any state)."""
    out = engine.run(
        ["ps", "-a", "--filter", f"label={CLUSTER_LABEL}={name}", "--format", "{{.Names}}"]
    )
    return sorted(out.split())


def node_states(name: str) -> dict[str, str]:
    out = {}
    for c in containers(name):
        st = engine.run(["inspect", "--format", "{{.State.Status}}", c]).strip()
        out[c] = st
    return out


def api_nodes(kubeconfig: Path) -> dict[str, dict[str, Any]]:
    """Node name -> {ready, zone, role} from the API server; raises when unreachable."""
    from harness.kube.client import KubeClient

    c = KubeClient.from_kubeconfig(kubeconfig, timeout_s=5)
    try:
        items, _ = c.list("/api/v1/nodes")
    finally:
        c.close()
    out: dict[str, dict[str, Any]] = {}
    for i in items:
        meta = i["metadata"]
        conds = {x["type"]: x["status"] for x in (i.get("status") or {}).get("conditions") or []}
        labels = meta.get("labels") or {}
        out[meta["name"]] = {
            "ready": {"True": "Ready", "False": "NotReady"}.get(conds.get("Ready", ""), "Unknown"),
            "zone": labels.get(LABEL_ZONE, ""),
            "role": "control-plane" if LABEL_CONTROL_PLANE in labels else "worker",
        }
    return out


def wait_ready(spec: KindSpec, say: Say, *, timeout_s: float = 300) -> float:
    """Wait (listing every 2 s, printing changes) until every node of the spec is Ready."""
    t0 = time.monotonic()
    want = {n.name for n in spec.nodes()}
    last = ""
    seen: dict[str, dict[str, Any]] = {}
    while time.monotonic() - t0 < timeout_s:
        with contextlib.suppress(PowercutError, OSError):
            seen = api_nodes(spec.kubeconfig)
        ready = sorted(n for n, s in seen.items() if s["ready"] == "Ready")
        line = f"{len(ready)}/{len(want)} nodes Ready"
        if line != last:
            say(f"  {line} ({time.monotonic() - t0:.0f}s)")
            last = line
        if want <= set(ready):
            return time.monotonic() - t0
        SYSTEM_CLOCK.sleep(2)
    raise KindError(
        f"nodes not Ready after {timeout_s:.0f}s: "
        + ", ".join(f"{n}={seen.get(n, {}).get('ready', 'absent')}" for n in sorted(want))
    )


def up(spec: KindSpec, say: Say, *, rebuild_image: bool = False) -> dict[str, float]:
    """Create the cluster; returns timings (seconds) of the phases."""
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    if engine.answers() and containers(spec.name):
        raise KindError(
            f"a kind cluster named {spec.name} already exists "
            f"({', '.join(containers(spec.name))}); "
            "`powercut kind status` shows it, `powercut kind down` removes it"
        )
    ports = {spec.api_port: "API server"} | {
        spec.http_port(svc): f"{svc} NodePort" for svc in NODE_PORTS
    }
    busy = busy_ports(ports)
    if busy:
        raise ConfigError(
            f"port(s) already in use on 127.0.0.1: {', '.join(busy)}; stop what holds them "
            "or choose another --base-port",
            field="--base-port",
        )
    root = spec.root
    check_state_dir(root)
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    engine.ensure(root, None, say)
    kind = _kind_bin(say)
    image = images.node_image(say, rebuild=rebuild_image)
    engine.ensure(root, image, say)  # privileged containers: the adaptation where they fail
    if spec.control_planes > 1:  # kind's load balancer in front of them, built here too
        from harness.kindlab import lb

        lb.ensure_image(say)
        _warn_inotify(len(spec.nodes()), say)
    timings["image"] = time.monotonic() - t0
    spec.save()
    if spec.storage == "csi":
        from harness.kindlab import csi

        csi.ensure_image(say)
        spec.shared_storage.mkdir(exist_ok=True)  # bind-mounted into every node
    cfg = root / "cluster.yaml"
    cfg.write_text(spec.kind_config())
    t1 = time.monotonic()
    say(
        f"kind create cluster {spec.name}: {spec.control_planes} control plane(s), "
        f"{spec.workers} worker(s), {spec.racks} racks"
    )
    try:
        _run_kind(
            kind,
            [
                "create",
                "cluster",
                "--name",
                spec.name,
                "--config",
                str(cfg),
                "--kubeconfig",
                str(spec.kubeconfig),
                "--retain",  # on failure keep the nodes for the logs below; down removes them
            ],
            say,
            network=spec.network,
        )
        timings["create"] = time.monotonic() - t1
        timings["ready"] = wait_ready(spec, say)
        if spec.storage == "csi":
            from harness.kindlab import csi

            timings["storage"] = csi.install(spec, say)
        if spec.workloads:
            from harness.kindlab import workloads

            t2 = time.monotonic()
            workloads.deploy(spec, say)
            timings["workloads"] = time.monotonic() - t2
    except BaseException:
        say("kind up failed: removing what it created (logs kept in the message above)")
        with contextlib.suppress(PowercutError, OSError):
            _export_logs(kind, spec)
        with contextlib.suppress(PowercutError, OSError):
            down(spec.root, say, keep_state=True)
        raise
    timings["total"] = time.monotonic() - t0
    (root / "timings.json").write_text(json.dumps(timings, indent=2) + "\n")
    return timings


INOTIFY = Path("/proc/sys/fs/inotify/max_user_instances")


def _warn_inotify(nodes: int, say: Say) -> None:
    """kind's known issue: every node's kubelet, containerd and pods take inotify instances
    from the host's per-user limit; past it, kube-proxy fails with "too many open files"
    (seen here with 5 nodes and 128). Said, not changed: it is the host's setting."""
    try:
        limit = int(INOTIFY.read_text())
    except (OSError, ValueError):
        return
    if nodes > 3 and limit < 512:
        say(
            f"warning: fs.inotify.max_user_instances is {limit}; with {nodes} nodes kind's "
            "pods may fail with 'too many open files' (kind's known issue): "
            "`sysctl fs.inotify.max_user_instances=512` raises it"
        )


def _export_logs(kind: str, spec: KindSpec) -> None:
    dest = Path(str(spec.root) + "-logs")
    subprocess.run(
        [kind, "export", "logs", str(dest), "--name", spec.name],
        capture_output=True,
        timeout=120,
        check=False,
    )


def status(root: Path) -> dict[str, Any]:
    spec = KindSpec.load(root)
    out: dict[str, Any] = {"name": spec.name, "kubeconfig": str(spec.kubeconfig)}
    out["containers"] = node_states(spec.name)
    try:
        out["nodes"] = api_nodes(spec.kubeconfig)
        out["api"] = "serving"
    except (PowercutError, OSError) as exc:
        out["nodes"] = {}
        out["api"] = f"unreachable ({exc})"
    return out


#: What ``kind up`` writes into its state directory (any one marks a cluster's).
STATE_MARKS = (
    "spec.json", "cluster.yaml", "kubeconfig", "timings.json", "dockerd.pid", "dockerd.log",
    "shared-storage",
)  # fmt: skip


def check_state_dir(root: Path) -> None:
    """Refuse a state directory that is neither new, empty nor a kind cluster's: ``down``
    removes it (and deletes the cluster its spec names, else the default one), so a typo or
    a parent directory must fail before anything is touched."""
    try:
        if not root.exists() or not any(root.iterdir()):
            return
    except OSError:
        pass
    if any((root / mark).exists() for mark in STATE_MARKS):
        return
    raise ConfigError(
        f"{root} is not a kind cluster's state directory (it has none of "
        f"{', '.join(STATE_MARKS)}) and is not empty: nothing was touched; give a new or "
        "empty directory, or the one `powercut kind up` was given",
        field="--state-dir",
    )


def down(root: Path, say: Say, *, keep_state: bool = False) -> list[str]:
    """Delete the cluster and what up left behind; idempotent. Returns what it removed."""
    check_state_dir(root)
    removed: list[str] = []
    name, network = "powercut", "kind"
    with contextlib.suppress(OSError, ValueError, TypeError):
        spec = KindSpec.load(root)
        name, network = spec.name, spec.network
    if engine.answers():
        left = containers(name)
        if left:
            kind = _kind_bin(say)
            _run_kind(kind, ["delete", "cluster", "--name", name], say, timeout=300)
            removed += left
        left = containers(name)
        if left:  # kind leaves nothing; be sure
            engine.run(["rm", "-f", "-v", *left])
        from harness.kindlab import netstorage

        removed += netstorage.remove(name)
        with contextlib.suppress(engine.EngineError):
            users = engine.run(["network", "inspect", network, "--format", "{{len .Containers}}"])
            if users.strip() == "0":
                engine.run(["network", "rm", network])
                removed.append(f"network {network}")
    if engine.stop_dockerd(root):
        removed.append("dockerd (started by powercut)")
    if not keep_state and root.exists():
        shutil.rmtree(root, ignore_errors=True)
        removed.append(str(root))
    logs = Path(str(root) + "-logs")
    if not keep_state and logs.exists():
        shutil.rmtree(logs, ignore_errors=True)
    return removed


def say_stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
