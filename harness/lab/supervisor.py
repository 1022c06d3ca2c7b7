"""The lab supervisor: one long-lived process that owns everything a lab runs.

``powercut lab up`` starts it in a new session (so the whole lab is one process group that
``lab down`` can always stop) and waits for ``ready.json`` or ``failed.json`` in the state
directory. It runs etcd, the API servers (behind HAProxy when there are several control
planes), controller-managers, schedulers, one kwok process per node, the storage controller,
the service health endpoints and the BMCs (Redfish, IPMI, SSH), and keeps ``state.json``
up to date for ``lab status``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.clock import SYSTEM_CLOCK
from harness.errors import PowercutError
from harness.kube.client import Credentials, KubeClient
from harness.kube.names import TAINT_NOT_READY, TAINT_UNREACHABLE
from harness.lab import controlplane as cpl
from harness.lab import workloads as wl
from harness.lab.boot import Schedule, thread_timer
from harness.lab.expose import Exposer
from harness.lab.informer import Informer
from harness.lab.machines import Boot, LabError, NodeMachines
from harness.lab.procs import Proc, write_identity
from harness.lab.prometheus import LabExporter, PrometheusServer, lab_metrics, lab_prometheus
from harness.lab.resync import Resync
from harness.lab.services import HealthEndpoints
from harness.lab.spec import LAB_NAMESPACE, LabSpec, NodeSpec, node_labels_and_taints
from harness.lab.storage import StorageController

log = logging.getLogger("powercut.lab")
STAGES = Path(__file__).parent / "data" / "kwok-stages.yaml"
REGISTER_THREADS = 8  # Node objects created side by side at `lab up`
KWOK_STARTING = 64  # kwok processes started and not yet Ready, at most, at `lab up`


def _reports_ready(node: dict[str, Any]) -> bool:
    """Its Ready condition is True (its kwok process reported it)."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def _node_ready(node: dict[str, Any]) -> bool:
    """Ready, and the node lifecycle controller has lifted its not-ready taint: until then
    the scheduler treats the node as unusable and spreads workloads badly."""
    return _reports_ready(node) and not any(
        t.get("key") in (TAINT_NOT_READY, TAINT_UNREACHABLE)
        for t in (node.get("spec") or {}).get("taints") or []
    )


def wait_until(what: str, fn: Callable[[], bool], timeout_s: float, every_s: float = 0.25) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            if fn():
                return
        except Exception as exc:  # noqa: BLE001 (any failure means "not yet"; kept as last seen)
            last = f"{type(exc).__name__}: {exc}"
        SYSTEM_CLOCK.sleep(every_s)
    raise LabError(
        f"timed out after {timeout_s:.0f}s waiting for {what}; last seen: {last or 'not ready'}"
    )


class Lab(NodeMachines):
    def __init__(self, spec: LabSpec, schedule: Schedule = thread_timer) -> None:
        self.spec = spec
        #: Arms a node's boot timer (a fake clock in unit tests).
        self._schedule = schedule
        self.root = spec.root
        self.logs = self.root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        b = spec.binaries
        pki = self.root / "pki"
        self.admin_kubeconfig = self.root / "kubeconfig"
        self.nodes = spec.nodes()
        self.cps = [n for n in self.nodes if n.role == "control-plane"]
        self.cp_procs: dict[str, list[Proc]] = {}
        for cp in self.cps:
            assert cp.cp_index is not None
            local_kc = self.root / f"kubeconfig-{cp.name}"
            cpl.write_kubeconfig(
                local_kc,
                f"https://127.0.0.1:{spec.ports.apiserver(cp.cp_index)}",
                pki / "ca.crt",
                pki / "admin.crt",
                pki / "admin.key",
            )
            self.cp_procs[cp.name] = [
                Proc(f"etcd-{cp.name}", cpl.etcd_argv(spec, cp, b["etcd"]), self.logs),
                Proc(
                    f"kube-apiserver-{cp.name}",
                    cpl.apiserver_argv(spec, cp, b["kube-apiserver"]),
                    self.logs,
                ),
                Proc(
                    f"kube-controller-manager-{cp.name}",
                    cpl.controller_manager_argv(spec, cp, b["kube-controller-manager"], local_kc),
                    self.logs,
                ),
                Proc(
                    f"kube-scheduler-{cp.name}",
                    cpl.scheduler_argv(spec, cp, b["kube-scheduler"], local_kc),
                    self.logs,
                ),
            ]
        self.haproxy: Proc | None = None
        if spec.control_planes > 1:
            cfg = self.root / "haproxy.cfg"
            cfg.write_text(cpl.haproxy_config(spec))
            self.haproxy = Proc("haproxy", ["haproxy", "-db", "-f", str(cfg)], self.logs)
        self.kwok: dict[str, Proc] = {
            n.name: Proc(
                f"kwok-{n.name}",
                cpl.kwok_argv(spec, n, b["kwok"], self.admin_kubeconfig, STAGES),
                self.logs,
            )
            for n in self.nodes
        }
        self.power: dict[str, bool] = {n.name: False for n in self.nodes}
        #: Nodes that are on but do not report: "partition" (cut off the network) or
        #: "kubelet" (kubelet stopped), each with the timer that undoes it.
        self.cut: dict[str, tuple[str, threading.Timer]] = {}
        #: Nodes cut off their storage network -> the timer that heals it.
        self.storage_cut: dict[str, threading.Timer] = {}
        #: Guards ``power`` and ``cut`` only: held for a read or a flip, never across a
        #: process's stop or start, so one node's BMC request does not wait for another's
        #: (a rack cut of 10 nodes through one Redfish emulator acknowledged one node
        #: after another while each held it through its kwok process's exit).
        self.power_lock = threading.RLock()
        #: One per node, taken before ``power_lock``: the power changes and cuts of one
        #: node happen one at a time, those of different nodes together.
        self._node_locks = {n.name: threading.RLock() for n in self.nodes}
        self._stopping: set[str] = set()  # powered off, processes not yet exited
        #: Powered on, processes not started yet (POST and boot): node -> its timer's
        #: cancel. Reads On to its BMCs; its kubelet reports nothing.
        self._booting: dict[str, Boot] = {}
        #: What follows a power change once the BMC has its answer: reaping the stopped
        #: processes, the state file, the progress log, the kubelet resync.
        self._after = ThreadPoolExecutor(max_workers=8, thread_name_prefix="power-after")
        self._pending: dict[str, Future[None]] = {}  # node -> its power-off's reaping
        self._restarts: dict[str, list[float]] = {}  # when each process was restarted
        self._state_lock = threading.Lock()
        self.client: KubeClient | None = None
        self.storage: StorageController | None = None
        self.resync: Resync | None = None
        self.health: HealthEndpoints | None = None
        self.bmcs: list[Any] = []
        self.exporter: LabExporter | None = None
        self.exposer: Exposer | None = None
        self.prometheus: PrometheusServer | None = None
        self.started_mono = time.monotonic()

    # -- progress and state files ---------------------------------------------------------

    def progress(self, msg: str) -> None:
        log.info(msg)
        with (self.root / "progress.log").open("a") as fh:
            fh.write(f"{time.monotonic() - self.started_mono:6.1f}s {msg}\n")

    def write_state(self, status: str, **extra: Any) -> None:
        procs = [p for ps in self.cp_procs.values() for p in ps] + list(self.kwok.values())
        if self.haproxy:
            procs.append(self.haproxy)
        if self.prometheus:
            procs.append(self.prometheus.proc)
        # Called from the main loop and from the threads that follow power changes: one at a
        # time, or one thread's rename finds the other's temporary file already gone; and
        # read under the same lock, so a later write never holds an older state.
        with self._state_lock:
            state = {
                "status": status,
                "supervisor_pid": os.getpid(),
                "power": {n: ("on" if on else "off") for n, on in self.power.items()},
                "booting": sorted(self._booting),
                "storage_cut": sorted(self.storage_cut),  # cut off their storage network
                "components": {p.name: {"pid": p.pid, "state": p.exit_info()} for p in procs},
                **extra,
            }
            tmp = self.root / "state.json.tmp"
            tmp.write_text(json.dumps(state, indent=2))
            tmp.replace(self.root / "state.json")

    # -- start ------------------------------------------------------------------------------

    def _client_for(self, server: str) -> KubeClient:
        pki = self.root / "pki"
        return KubeClient(
            Credentials(
                server=server,
                ca_file=str(pki / "ca.crt"),
                cert_file=str(pki / "admin.crt"),
                key_file=str(pki / "admin.key"),
            ),
            timeout_s=5,
        )

    def _check_alive(self, procs: list[Proc]) -> None:
        for p in procs:
            if p.pid is not None and not p.alive():
                raise LabError(f"{p.name} {p.exit_info()}:\n{p.log_tail()}")

    def start(self) -> None:
        spec = self.spec
        p = spec.ports
        self.progress(f"starting etcd ({len(self.cps)} members)")
        for cp in self.cps:
            self.cp_procs[cp.name][0].start()
        for cp in self.cps:
            assert cp.cp_index is not None
            url = f"http://127.0.0.1:{p.etcd_client(cp.cp_index)}/health"
            etcd = self.cp_procs[cp.name][0]

            def etcd_ok(url: str = url, etcd: Proc = etcd) -> bool:
                self._check_alive([etcd])
                with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 (loopback http)
                    return bool(json.load(r).get("health") == "true")

            wait_until(f"etcd {cp.name} healthy", etcd_ok, 60)
        self.progress("starting kube-apiserver on each control-plane node")
        for cp in self.cps:
            self.cp_procs[cp.name][1].start()
        for cp in self.cps:
            assert cp.cp_index is not None
            c = self._client_for(f"https://127.0.0.1:{p.apiserver(cp.cp_index)}")
            api = self.cp_procs[cp.name][1]

            def api_ok(c: KubeClient = c, api: Proc = api) -> bool:
                self._check_alive([api])
                c.request("GET", "/readyz")
                return True

            wait_until(f"kube-apiserver {cp.name} ready", api_ok, 120, 0.5)
            c.close()
        if self.haproxy:
            self.progress("starting HAProxy in front of the API servers")
            self.haproxy.start()
        server = f"https://127.0.0.1:{p.cluster if self.haproxy else p.apiserver(0)}"
        cpl.write_kubeconfig(
            self.admin_kubeconfig,
            server,
            self.root / "pki" / "ca.crt",
            self.root / "pki" / "admin.crt",
            self.root / "pki" / "admin.key",
        )
        self.client = self._client_for(server)
        client = self.client

        def cluster_ok() -> bool:
            if self.haproxy:
                self._check_alive([self.haproxy])
            client.request("GET", "/readyz")
            return True

        wait_until("the cluster endpoint", cluster_ok, 30)
        self.progress("starting controller-managers and schedulers")
        for cp in self.cps:
            for proc in self.cp_procs[cp.name][2:]:
                proc.start()
        with self.power_lock:
            for cp in self.cps:
                self.power[cp.name] = True
        self.progress(f"registering {len(self.nodes)} nodes")
        # Side by side: one POST after another took ~10 ms each, 5 s for 500 nodes.
        with ThreadPoolExecutor(max_workers=REGISTER_THREADS) as pool:
            for done in [pool.submit(self._create_node, n) for n in self.nodes]:
                done.result()
        self.progress(f"starting {len(self.nodes)} kwok node agents")
        self._start_kwoks()
        self.progress("all nodes Ready; starting storage (CSI driver, volumes, attacher)")
        for path, obj in wl.storage_objects():
            self._create(path, obj)
        self._create(
            "/api/v1/namespaces/kube-system/configmaps",
            cpl.cluster_configuration(spec, self.cps[0]),
        )
        # A node cut off the network (or with its kubelet stopped) is on, but its kubelet
        # reports nothing: its volumesInUse stays frozen, as at a power-off.
        self.storage = StorageController(client, self.reporting, self.storage_reachable)
        self.storage.start()
        self.resync = Resync(client, self.is_on)
        if spec.workloads:
            self.progress("deploying workloads: web, quorum, registry, node-agent, Job seed-data")
            for path, obj in wl.workload_objects():
                self._create(path, obj)
            wait_until("workloads ready", self._workloads_ready, 180, 0.5)
            ports = {svc: p.health(i) for i, svc in enumerate(wl.SERVICES)}
            self.health = HealthEndpoints(client, LAB_NAMESPACE, ports)
            self.health.start()
        self.progress("starting BMCs (Redfish, IPMI, SSH)")
        self._start_bmcs()
        if spec.prometheus:
            self.progress("starting Prometheus (API servers, service probes, power)")
            self._start_prometheus()
        if spec.expose:
            tcp, udp = spec.exposed_ports()
            self.progress(f"serving the API servers, BMCs and services on {spec.expose} too")
            self.exposer = Exposer(spec.expose, tcp, udp).start()
        self.write_state("ready")

    def _start_prometheus(self) -> None:
        health = self.health
        self.exporter = LabExporter(
            self.spec.ports.metrics,
            lambda: lab_metrics(
                self.nodes,
                self.is_on,
                health.ready_count if health else None,
                self.spec.services,
            ),
        ).start()
        self.prometheus = lab_prometheus(self.spec, self.logs)
        self.prometheus.start()

    def _create(self, path: str, obj: dict[str, Any]) -> None:
        assert self.client is not None
        client = self.client

        def go() -> bool:
            try:
                client.create(path, obj)
            except PowercutError as exc:
                if getattr(exc, "status", None) == 409:
                    return True
                raise
            return True

        wait_until(f"create {obj['kind']} {obj['metadata']['name']}", go, 60, 0.5)

    def _create_node(self, n: NodeSpec) -> None:
        labels, taints = node_labels_and_taints(n)
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": n.name,
                "labels": labels,
                "annotations": {
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                    "kwok.x-k8s.io/node": "fake",
                },
            },
            "spec": {"podCIDR": n.pod_cidr, "podCIDRs": [n.pod_cidr], "taints": taints},
        }
        self._create("/api/v1/nodes", body)

    def _start_kwoks(self) -> None:
        """Start every node's kwok process, at most ``KWOK_STARTING`` not yet reporting Ready at a
        time, and return once every node is Ready with its not-ready taint lifted.

        All at once, 253 kwok processes starting on 2 busy cores (each connects, lists and
        watches its node and pods) overwhelmed the API servers: requests hit their 60 s
        handler timeout and the lab never got Ready. Readiness is followed with one watch
        of the nodes, not by listing them every half second (1 MB a list at 250 nodes).
        """
        assert self.client is not None
        ready: set[str] = set()  # Ready, the not-ready taint lifted
        reporting: set[str] = set()  # its kwok process has reported it Ready
        changed = threading.Condition()

        def on_node(kind: str, obj: dict[str, Any]) -> None:
            name = str((obj.get("metadata") or {}).get("name"))
            with changed:
                for seen, now in ((ready, _node_ready(obj)), (reporting, _reports_ready(obj))):
                    if kind != "DELETED" and now:
                        seen.add(name)
                    else:
                        seen.discard(name)
                changed.notify_all()

        nodes = Informer(self.client, "/api/v1/nodes", on_node, project=lambda _o: None)
        nodes.start()
        pending = list(self.nodes)
        started: list[str] = []
        # 500 kwok processes starting on 2 cores take their time: 120 s, more past 300 nodes.
        deadline = time.monotonic() + max(120.0, 0.4 * len(self.nodes))
        try:
            with changed:
                while True:
                    self._check_alive([self.kwok[n] for n in started])
                    # Paced on kwok's own report, not on the taint's lifting: the node
                    # lifecycle controller lifts it a monitor period or more later (35 s at
                    # load 45), and waiting for that held 64 nodes back to 1.8 a second.
                    starting = sum(1 for n in started if n not in reporting)
                    while pending and starting < KWOK_STARTING:
                        n = pending.pop(0)
                        self.kwok[n.name].start()
                        self.power[n.name] = True
                        started.append(n.name)
                        starting += 1
                    if not pending and all(n.name in ready for n in self.nodes):
                        return
                    if time.monotonic() > deadline:
                        raise LabError(
                            f"timed out waiting for all nodes Ready: {len(ready)} of "
                            f"{len(self.nodes)} Ready, {len(pending)} kwok processes not "
                            "started yet"
                        )
                    changed.wait(0.5)
        finally:
            nodes.stop()

    def _workloads_ready(self) -> bool:
        assert self.client is not None
        c = self.client
        ns = LAB_NAMESPACE
        for kind, name, want in (
            ("deployments", "web", 3),
            ("statefulsets", "quorum", 3),
            ("deployments", "registry", 1),
        ):
            obj = c.get(f"/apis/apps/v1/namespaces/{ns}/{kind}/{name}")
            if (obj.get("status") or {}).get("readyReplicas", 0) < want:
                return False
        job = c.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{wl.SEED_JOB}")
        if not any(
            x.get("type") == "Complete" and x.get("status") == "True"
            for x in (job.get("status") or {}).get("conditions") or []
        ):
            return False
        ds = c.get(f"/apis/apps/v1/namespaces/{ns}/daemonsets/node-agent")
        st = ds.get("status") or {}
        return bool(st.get("desiredNumberScheduled", 0) > 0) and st.get("numberReady") == st.get(
            "desiredNumberScheduled"
        )

    def _start_bmcs(self) -> None:
        from harness.lab.bmcs import start_bmcs

        self.bmcs = start_bmcs(self)

    #: restarts of one process allowed within RESTART_WINDOW_S before it is left down
    MAX_RESTARTS = 5
    RESTART_WINDOW_S = 600.0

    def keep_alive(self) -> list[str]:
        """Restart what crashed on a powered-on node (and haproxy), as a kubelet restarts a
        crashed static pod and a node agent comes back after a crash. kwok 0.8.0 now and
        then dies at start (``fatal error: concurrent map writes`` in its CEL setup): left
        alone, a node powered on by a BMC would stay NotReady forever, which no real
        machine that powered on does. A process that keeps crashing (more than
        MAX_RESTARTS in RESTART_WINDOW_S) is left down, and ``lab status`` shows it.
        Returns the names of the processes restarted."""
        restarted: list[str] = []
        with self.power_lock:
            procs = [
                proc
                for node, on in self.power.items()
                if on and node not in self._booting
                for proc in [
                    *self.cp_procs.get(node, []),
                    *([] if node in self.cut else [self.kwok[node]]),
                ]
            ]
            if self.haproxy:
                procs.append(self.haproxy)
            if self.prometheus:
                procs.append(self.prometheus.proc)
            now = time.monotonic()
            for proc in procs:
                if proc.pid is None or proc.alive():
                    continue
                recent = [
                    t for t in self._restarts.get(proc.name, []) if now - t < self.RESTART_WINDOW_S
                ]
                self._restarts[proc.name] = recent
                if len(recent) >= self.MAX_RESTARTS:
                    continue
                why = proc.exit_info()
                last = next(
                    (ln for ln in reversed(proc.log_tail(40).splitlines()) if ln.strip()), ""
                )
                log.warning(
                    "%s %s, restarting it (%d of %d); its log ends: %s",
                    proc.name,
                    why,
                    len(recent) + 1,
                    self.MAX_RESTARTS,
                    last[:300],
                )
                proc.stop(force=True, timeout_s=1)
                proc.start()
                recent.append(now)
                restarted.append(proc.name)
        if restarted:
            self.write_state("ready")
        return restarted

    # -- stop -------------------------------------------------------------------------------

    def stop(self) -> None:
        if self.exposer:
            self.exposer.stop()
        with self.power_lock:
            for node in list(self.cut):
                self._forget_cut(node)
            for node in list(self.storage_cut):
                self._forget_storage_cut(node)
            for boot in self._booting.values():
                boot.cancel()
            self._booting.clear()
        for bmc in reversed(self.bmcs):
            try:
                bmc.stop()
            except Exception:
                log.exception("stopping %s", bmc)
        self._after.shutdown(wait=True)  # the power changes' reaping and state writes
        if self.exporter:
            self.exporter.stop()
        if self.health:
            self.health.stop()
        if self.resync:
            self.resync.stop()
        if self.storage:
            self.storage.stop()
        # The lab's data goes away with it: no graceful shutdown is owed, so stop everything
        # at once, in parallel.
        procs = list(self.kwok.values()) + [p for ps in self.cp_procs.values() for p in ps]
        if self.haproxy:
            procs.append(self.haproxy)
        if self.prometheus:
            procs.append(self.prometheus.proc)
        threads = [
            threading.Thread(target=p.stop, kwargs={"force": True, "timeout_s": 5}) for p in procs
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.client:
            self.client.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.lab.supervisor")
    ap.add_argument("--state-dir", required=True, type=Path)
    args = ap.parse_args(argv)
    root: Path = args.state_dir
    logging.basicConfig(
        filename=str(root / "logs" / "supervisor.log"),
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    write_identity(root / "supervisor.pid", os.getpid())
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    lab = Lab(LabSpec.load(root))
    try:
        lab.start()
    except BaseException as exc:  # noqa: BLE001 (any failure, even Ctrl-C, must stop the lab)
        msg = str(exc) if isinstance(exc, PowercutError) else f"{type(exc).__name__}: {exc}"
        log.error("lab start failed: %s\n%s", msg, traceback.format_exc())
        (root / "failed.json").write_text(json.dumps({"error": msg}))
        lab.stop()
        return 1
    (root / "ready.json").write_text(json.dumps({"ready": True}))
    lab.progress("lab ready")
    while not stop.wait(2.0):
        try:
            if not lab.keep_alive():
                lab.write_state("ready")
        except Exception:  # the BMCs live in this process: it must not die
            log.exception("supervisor loop")
    lab.progress("stopping")
    lab.stop()
    lab.write_state("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
