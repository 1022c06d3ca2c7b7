"""Observer benchmark: initial sync time and memory at 10,000-30,000 pods, and transition stamps.

Run: `.venv/bin/python bench/observer_bench.py` (sizes 10,000 and 30,000 pods, 500 nodes; about
15 minutes on 2 quiet cores) or `--quick` (2,000 pods, 100 nodes; about 3 minutes).
`--kubeconfig` uses an existing cluster instead of starting a lab; `--help` lists the knobs.
Exits 1 when a target is missed. bench/README.md explains every column.

1. Starts its own lab (1 control plane, no workers) unless `--kubeconfig` is given, and stops
   it again on success, failure, Ctrl-C or SIGTERM.
2. Creates M fake Node objects and, per size, a namespace of ~6 KB synthetic pods bound to
   them (parallel POSTs over a few connections). Sizes are cumulative: the 30,000 run lists
   the 10,000 namespace plus a 20,000 one, so every list is cluster-wide.
3. Measures, each run in a fresh subprocess so peak RSS (VmHWM) is per method: the official
   `kubernetes` client with model objects, the Observer's initial sync (pods + nodes; with
   `--baseline DIR` also another checkout's), the API server's raw list time (the same
   paginated requests, bodies read and not decoded), the raw client's list, and a
   reference (raw pages projected per page, GC paused).
4. While an Observer runs (in its own process), flips the Ready condition of probe nodes and
   pods at known times, idle, under background pod churn, under churn with forced full
   collections, and while generator processes flip the fake nodes and pods at
   `--flip-rate` (1,000/s); compares each probe's stamp with the PATCH's return and with
   independent raw watches, and every Ready transition an independent raw watch client
   (bench/observer_streams.py: its own process, plain HTTP) saw with the Observer's stamp of
   the same event (p99 within 20 ms at 1,000/s, none lost).
5. When the Observer misses a sync target, profiles its initial sync (time breakdown,
   tracemalloc when the pod list returns, cProfile of the watcher threads).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench.observer_streams

from bench.observer_streams import (
    flipper_main,
    match_raw,
    observer_event_rvs,
    rawwatch_main,
)
from harness.errors import TemporaryError
from harness.kube.client import ApiError, Buffer, Conflict, KubeClient, NotFound, list_meta

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
# The virtualenv's own interpreter: .venv is a link that `make venv` may re-point mid-run.
_VENV_PY = Path(os.path.realpath(sys.prefix)) / "bin" / "python"
PYTHON = str(_VENV_PY) if _VENV_PY.exists() else sys.executable
PREFIX = "obsbench"
GROUP = "obsbench.powercut.io"
PROBE_LABEL = f"{GROUP}/probe"
BENCH_LABEL = f"{GROUP}/bench"
CRD_PLURAL = "workloads"
PODS_PER_WORKLOAD = 25
TARGET_RSS_MB = 64.0  # issue #26 (the first target was 100 MB)
TARGET_SPEEDUP = 10.0
TARGET_STAMP_MS = 100.0
TARGET_RAW_P99_MS = 20.0  # issue #26: behind an independent raw watch at 1,000 flips/s
TARGET_RAW_LIST_RATIO = 1.25  # issue #26: the initial sync vs the API server's raw list
JSON = dict[str, Any]


def retried(fn: Callable[[], Any], attempts: int = 5) -> Any:
    """Call ``fn``, retrying a busy or briefly unreachable API server with backoff."""
    for i in range(attempts):
        try:
            return fn()
        except TemporaryError:
            if i == attempts - 1:
                raise
            time.sleep(0.5 * 2**i)
    return None


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def proc_status_mb(field_name: str, pid: int | str = "self") -> float:
    """VmHWM (peak RSS) or VmRSS of a process from /proc, in MB."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


# -- synthetic objects ---------------------------------------------------------------------

IMAGES = [
    ("registry.example.com/storefront/api", "2.14.3"),
    ("registry.example.com/payments/worker", "1.9.0"),
    ("registry.example.com/search/indexer", "5.2.11"),
    ("registry.example.com/platform/gateway", "0.31.4"),
]


def _digest(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


def node_name(i: int) -> str:
    return f"{PREFIX}-n{i:04d}"


def probe_node_name(i: int) -> str:
    return f"{PREFIX}-probe-{i:02d}"


def node_body(name: str, i: int, probe: bool) -> JSON:
    zone = f"{PREFIX}-zone-{'abcde'[i % 5]}"
    ip = f"10.{100 + i // 65000}.{(i // 250) % 250}.{i % 250 + 1}"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": f"{PREFIX}-region",
        "node.kubernetes.io/instance-type": "bm.standard3.64",
        "node-role.kubernetes.io/worker": "",
        BENCH_LABEL: "true",
    }
    if probe:
        labels[PROBE_LABEL] = "true"
    images = [
        {"names": [f"{img}@sha256:{_digest(img + tag)}", f"{img}:{tag}"], "sizeBytes": 187_000_000}
        for img, tag in IMAGES
    ] + [
        {
            "names": [
                f"registry.k8s.io/pause@sha256:{_digest('pause')}",
                "registry.k8s.io/pause:3.10",
            ],
            "sizeBytes": 320_368,
        }
    ]
    conds = [
        {
            "type": t,
            "status": "False",
            "reason": f"KubeletHasSufficient{t.removesuffix('Pressure')}",
            "message": f"kubelet has sufficient {t.removesuffix('Pressure').lower()} available",
            "lastHeartbeatTime": now_rfc3339(),
            "lastTransitionTime": now_rfc3339(),
        }
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    # Not Ready at birth: nothing heartbeats these nodes, and a node that was never Ready
    # going Unknown does not make the node lifecycle controller rewrite its pods' status.
    conds.append(
        {
            "type": "Ready",
            "status": "False",
            "reason": "KubeletNotReady",
            "message": "container runtime status check may not have completed yet",
            "lastHeartbeatTime": now_rfc3339(),
            "lastTransitionTime": now_rfc3339(),
        }
    )
    cidr = f"10.{128 + i // 256}.{i % 256}.0/24"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": json.dumps({"csi.example.com": name}),
            },
        },
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr], "providerID": f"baremetal://{name}"},
        "status": {
            "capacity": {
                "cpu": "64",
                "memory": "527990508Ki",
                "pods": "250",
                "ephemeral-storage": "1844518400Ki",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
            },
            "allocatable": {
                "cpu": "63500m",
                "memory": "526839532Ki",
                "pods": "250",
                "ephemeral-storage": "1699893228812",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
            },
            "conditions": conds,
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": _digest(name)[:32],
                "systemUUID": _digest(name + "uuid")[:32],
                "bootID": _digest(name + "boot")[:32],
                "kernelVersion": "6.1.0-27-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": "v1.36.3",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        },
    }


def pod_body(ns: str, name: str, node: str, owner: tuple[str, str], probe: bool) -> JSON:
    """A pod as a Deployment-like controller would create it (status comes later).

    With the status patch and the server's managedFields it is about 6 KB of JSON.
    """
    app, owner_uid = owner
    img, tag = IMAGES[int(_digest(app)[:8], 16) % len(IMAGES)]
    pth = _digest(app)[:10]
    labels = {
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/instance": f"{app}-prod",
        "app.kubernetes.io/version": tag,
        "app.kubernetes.io/part-of": "storefront",
        "pod-template-hash": pth,
        "team": "payments",
        BENCH_LABEL: "true",
    }
    if probe:
        labels[PROBE_LABEL] = "true"
    probe_http = {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}}
    app_container = {
        "name": "app",
        "image": f"{img}:{tag}",
        "imagePullPolicy": "IfNotPresent",
        "args": ["--config=/etc/app/config.yaml", "--listen=:8080"],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "LOG_LEVEL", "value": "info"},
            {
                "name": "DB_PASSWORD",
                "valueFrom": {"secretKeyRef": {"name": f"{app}-db", "key": "password"}},
            },
        ],
        "resources": {
            "requests": {"cpu": "250m", "memory": "512Mi"},
            "limits": {"cpu": "2", "memory": "1Gi"},
        },
        "livenessProbe": {**probe_http, "periodSeconds": 10},
        "readinessProbe": {**probe_http, "periodSeconds": 5},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    sidecar = {
        "name": "log-shipper",
        "image": "registry.example.com/platform/fluent-bit:3.2.4",
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": "20m", "memory": "32Mi"}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "generateName": f"{app}-{pth}-",
            "labels": labels,
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "8080",
                "checksum/config": _digest(app + "config"),
            },
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "Workload",
                    "name": app,
                    "uid": owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [app_container, sidecar],
            "volumes": [
                {"name": "config", "configMap": {"name": f"{app}-config", "defaultMode": 420}},
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "enableServiceLinks": False,
            # No tolerationSeconds: the fake nodes go Unknown (nothing heartbeats them) and
            # the taint manager must not evict the benchmark's pods meanwhile.
            "tolerations": [
                {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": "NoExecute"}
                for key in ("not-ready", "unreachable")
            ],
        },
    }


def pod_status(body: JSON, ip: str, host_ip: str) -> JSON:
    """The status a kubelet would post for a running, Ready pod."""
    t = now_rfc3339()
    cid = _digest(body["metadata"]["name"])
    conds = [
        {"type": c, "status": "True", "lastProbeTime": None, "lastTransitionTime": t}
        for c in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    ]
    conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": t})
    statuses = [
        {
            "name": c["name"],
            "image": c["image"],
            "imageID": f"{c['image'].split(':')[0]}@sha256:{_digest(c['image'])}",
            "containerID": f"containerd://{cid[: 60 - n]}{n:04d}",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": t}},
        }
        for n, c in enumerate(body["spec"]["containers"])
    ]
    return {
        "status": {
            "phase": "Running",
            "conditions": conds,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": t,
            "containerStatuses": statuses,
        }
    }


# -- cluster setup -------------------------------------------------------------------------


@dataclass
class Setup:
    client: KubeClient
    threads: int
    pod_status: bool  # give every pod a kubelet-like status (else only the probe pods)
    created: dict[str, float] = field(default_factory=dict)  # what -> objects/s

    def _ensure(self, path: str, body: JSON) -> JSON:
        try:
            return self.client.create(path, body)
        except Conflict:
            return self.client.get(f"{path}/{body['metadata']['name']}")

    def crd(self) -> None:
        body = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{CRD_PLURAL}.{GROUP}"},
            "spec": {
                "group": GROUP,
                "scope": "Namespaced",
                "names": {"plural": CRD_PLURAL, "singular": "workload", "kind": "Workload"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        self._ensure(path, body)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            crd = self.client.get(f"{path}/{CRD_PLURAL}.{GROUP}")
            conds = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                return
            time.sleep(0.2)
        raise RuntimeError("CRD not Established within 60 s")

    def namespace(self, ns: str) -> None:
        meta = {"name": ns, "labels": {BENCH_LABEL: "true"}}
        body: JSON = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
        self._ensure("/api/v1/namespaces", body)
        deadline = time.monotonic() + 60
        while self.client.get_or_none(f"/api/v1/namespaces/{ns}/serviceaccounts/default") is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no default ServiceAccount in {ns} after 60 s")
            time.sleep(0.2)

    def _parallel(self, what: str, fn: Callable[[int], None], n: int) -> float:
        if n <= 0:
            return 0.0
        t0 = time.monotonic()
        done = [0]
        lock = threading.Lock()

        def one(i: int) -> None:
            fn(i)
            with lock:
                done[0] += 1
                if done[0] % 5000 == 0:
                    el = time.monotonic() - t0
                    say(f"  {what}: {done[0]}/{n} ({done[0] / el:.0f}/s)")

        ex = ThreadPoolExecutor(self.threads, thread_name_prefix="create")
        try:
            for f in [ex.submit(one, i) for i in range(n)]:
                f.result()
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
        rate = n / (time.monotonic() - t0)
        self.created[what] = rate
        return rate

    def nodes(self, m: int, probes: int) -> None:
        have = {
            o["metadata"]["name"]
            for o in self.client.list("/api/v1/nodes", labelSelector=BENCH_LABEL)[0]
        }
        want = [(node_name(i), i, False) for i in range(m)]
        want += [(probe_node_name(i), m + i, True) for i in range(probes)]
        todo = [w for w in want if w[0] not in have]

        def make(k: int) -> None:
            name, i, probe = todo[k]
            with contextlib.suppress(Conflict):
                retried(lambda: self.client.create("/api/v1/nodes", node_body(name, i, probe)))

        rate = self._parallel("nodes", make, len(todo))
        say(f"nodes: {len(want)} ({len(todo)} created, {rate:.0f}/s)")

    def pods(self, ns: str, n: int, m: int, probes: int, offset: int) -> tuple[list[str], int]:
        """``n`` pods in ``ns`` on nodes 0..m-1; returns (probe pod names, bytes per pod)."""
        self.namespace(ns)
        wl_path = f"/apis/{GROUP}/v1/namespaces/{ns}/{CRD_PLURAL}"
        n_wl = max(1, math.ceil(n / PODS_PER_WORKLOAD))
        owners: list[tuple[str, str]] = [("", "")] * n_wl

        def make_wl(k: int) -> None:
            name = f"svc{offset // PODS_PER_WORKLOAD + k:04d}"
            body = {"apiVersion": f"{GROUP}/v1", "kind": "Workload", "metadata": {"name": name}}
            owners[k] = (name, self._ensure(wl_path, body)["metadata"]["uid"])

        self._parallel("workloads", make_wl, n_wl)
        stride = max(1, n // max(1, probes))
        probe_idx = {k * stride for k in range(probes)}
        names = [f"{owners[k // PODS_PER_WORKLOAD][0]}-{_digest(str(offset + k))[:5]}-{k:05d}"
                 for k in range(n)]  # fmt: skip
        existing = {
            o["metadata"]["name"]
            for o in self.client.list(f"/api/v1/namespaces/{ns}/pods", page_size=5000)[0]
        }
        todo = [k for k in range(n) if names[k] not in existing]

        def make(j: int) -> None:
            k = todo[j]
            g = offset + k
            node = node_name(g % m)
            body = pod_body(ns, names[k], node, owners[k // PODS_PER_WORKLOAD], k in probe_idx)
            path = f"/api/v1/namespaces/{ns}/pods"
            with contextlib.suppress(Conflict):
                retried(lambda: self.client.create(path, body))
            if self.pod_status or k in probe_idx:
                ip = f"10.{128 + (g % m) // 256}.{(g % m) % 256}.{g // m % 250 + 2}"
                host = f"10.{100 + (g % m) // 65000}.{((g % m) // 250) % 250}.{(g % m) % 250 + 1}"
                status = pod_status(body, ip, host)
                retried(lambda: self.client.patch(f"{path}/{names[k]}/status", status, "strategic"))

        rate = self._parallel(f"pods@{ns}", make, len(todo))
        say(f"pods in {ns}: {n} ({len(todo)} created, {rate:.0f} pods/s)")
        plain = next(k for k in range(n - 1, -1, -1) if k not in probe_idx or k == 0)
        sample = self.client.get(f"/api/v1/namespaces/{ns}/pods/{names[plain]}")
        size = len(json.dumps(sample, separators=(",", ":")))
        return [names[k] for k in sorted(probe_idx)], size


def cleanup_cluster(client: KubeClient) -> None:
    """Remove what the benchmark created in a cluster it did not start."""
    nss = client.list("/api/v1/namespaces", labelSelector=BENCH_LABEL)[0]
    for ns in nss:
        name = ns["metadata"]["name"]
        # Nothing runs these pods: without grace 0 they would hang Terminating.
        with contextlib.suppress(ApiError):
            client.request(
                "DELETE", f"/api/v1/namespaces/{name}/pods", body={"gracePeriodSeconds": 0}
            )
        with contextlib.suppress(NotFound):
            client.delete(f"/api/v1/namespaces/{name}")
    with contextlib.suppress(ApiError):
        client.request("DELETE", "/api/v1/nodes", params={"labelSelector": BENCH_LABEL})
    with contextlib.suppress(NotFound):
        client.delete(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_PLURAL}.{GROUP}"
        )


# -- the lab -------------------------------------------------------------------------------


class Lab:
    def __init__(self, state_dir: Path, base_port: int) -> None:
        self.state_dir = state_dir
        self.base_port = base_port
        self.started = False

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    def _cli(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PYTHON, "-m", "harness.cli", "lab", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def up(self) -> float:
        t0 = time.monotonic()
        self.started = True  # from here on, `down` is owed even if `up` fails half-way
        res = self._cli(
            "up",
            "--control-planes",
            "1",
            "--racks",
            "1",
            "--workers-per-rack",
            "0",
            "--base-port",
            str(self.base_port),
            "--state-dir",
            str(self.state_dir),
            "--inventory-out",
            str(self.state_dir.with_suffix(".yaml")),
            timeout=300,
        )
        if res.returncode != 0:
            raise RuntimeError(f"lab up failed ({res.returncode}):\n{res.stderr[-3000:]}")
        return time.monotonic() - t0

    def supervisor_rss_mb(self) -> float:
        with contextlib.suppress(OSError, ValueError, KeyError):
            state = json.loads((self.state_dir / "state.json").read_text())
            return proc_status_mb("VmRSS", int(state["supervisor_pid"]))
        return 0.0

    def down(self) -> None:
        if not self.started:
            return
        res = self._cli("down", "--state-dir", str(self.state_dir), timeout=120)
        if res.returncode != 0:
            say(f"lab down failed ({res.returncode}): {res.stderr[-2000:]}")
        else:
            self.started = False
            self.state_dir.with_suffix(".yaml").unlink(missing_ok=True)


# -- children: one measurement per process -------------------------------------------------


class GcMeter:
    """Time spent in the garbage collector (all threads), via gc.callbacks."""

    def __init__(self) -> None:
        self.total_s = 0.0
        self.max_pause_s = 0.0
        self.collections = [0, 0, 0]
        self.cpu0 = time.process_time()
        self._t0 = 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
            return
        d = time.perf_counter() - self._t0
        self.total_s += d
        self.max_pause_s = max(self.max_pause_s, d)
        self.collections[info["generation"]] += 1

    def reset(self) -> None:
        self.total_s, self.max_pause_s, self.collections = 0.0, 0.0, [0, 0, 0]
        self.cpu0 = time.process_time()  # this process's CPU (every thread) from here

    def as_dict(self) -> JSON:
        return {
            "gc_s": round(self.total_s, 3),
            "gc_max_pause_ms": round(self.max_pause_s * 1000, 1),
            "gc_collections": self.collections,
        }


def finish(out: JSON, meter: GcMeter) -> JSON:
    """Add GC and memory figures; call while the listed objects are still referenced.

    ``held_rss_mb``: RSS while holding the result; ``full_gc_ms``: how long one full
    collection takes now. Python runs one by itself from time to time, and it stops every
    thread (so every watch) for that long.
    """
    out["cpu_s"] = time.process_time() - meter.cpu0
    out.update(meter.as_dict(), peak_rss_mb=proc_status_mb("VmHWM"))
    out["held_rss_mb"] = proc_status_mb("VmRSS")
    t = time.perf_counter()
    gc.collect()
    out["full_gc_ms"] = (time.perf_counter() - t) * 1000
    return out


def child_official(kubeconfig: str, meter: GcMeter) -> JSON:
    from kubernetes import client as kclient
    from kubernetes import config as kconfig

    kconfig.load_kube_config(config_file=str(kubeconfig))
    api = kclient.CoreV1Api()
    base = proc_status_mb("VmRSS")
    meter.reset()
    t0 = time.perf_counter()
    pods: list[Any] = []
    cont = None
    while True:
        page = api.list_pod_for_all_namespaces(limit=500, _continue=cont)
        pods.extend(page.items)
        cont = page.metadata._continue if page.metadata else None
        if not cont:
            break
    nodes: list[Any] = []
    cont = None
    while True:
        npage = api.list_node(limit=500, _continue=cont)
        nodes.extend(npage.items)
        cont = npage.metadata._continue if npage.metadata else None
        if not cont:
            break
    secs = time.perf_counter() - t0
    out = {"pods": len(pods), "nodes": len(nodes), "seconds": secs, "base_rss_mb": base}
    return finish(out, meter)


def child_raw(kubeconfig: str, meter: GcMeter) -> JSON:
    client = KubeClient.from_kubeconfig(kubeconfig)
    base = proc_status_mb("VmRSS")
    meter.reset()
    t0 = time.perf_counter()
    pods, _ = client.list("/api/v1/pods", page_size=500)
    nodes, _ = client.list("/api/v1/nodes", page_size=500)
    secs = time.perf_counter() - t0
    out = {"pods": len(pods), "nodes": len(nodes), "seconds": secs, "base_rss_mb": base}
    return finish(out, meter)


#: how each listed item starts as the API server writes it (name first in its metadata)
_ITEM_START = b'{"metadata":{"name":"'


def child_raw_list(kubeconfig: str, meter: GcMeter, pipelined: bool) -> JSON:
    """The floor: the API server's own list time. The same paginated LIST requests as the
    Observer's sync (pods and nodes side by side, pages of 500, `continue`), each body read
    to its end and not decoded: only the list metadata at its head is read, for the
    continue token. ``pipelined``: asked for as the Observer asks (``KubeClient.pages`` with
    prefetch), else each page once the previous one has been read.
    """
    client = KubeClient.from_kubeconfig(kubeconfig)
    base = proc_status_mb("VmRSS")
    counts: dict[str, int] = {}
    pages: dict[str, int] = {}
    sizes: dict[str, int] = {}
    errors: list[BaseException] = []

    def read(path: str) -> None:
        c = client.clone(maxsize=2)
        first: JSON | None = None

        def head_only(raw: Buffer) -> JSON:
            nonlocal first
            md = list_meta(raw)
            pages[path] = pages.get(path, 0) + 1
            sizes[path] = sizes.get(path, 0) + len(raw)
            if first is None:
                first = md
                # a single page: count its items by their first bytes (no decoding)
                counts[path] = (
                    int(md["remainingItemCount"]) + 500
                    if md.get("continue") and ("remainingItemCount" in md)
                    else bytes(raw).count(_ITEM_START)
                )
            return {"metadata": md}

        try:
            if pipelined:
                for _ in c.pages(path, page_size=500, prefetch=True, decode=head_only):
                    pass
            else:
                cont = None
                while True:
                    raw = c.request_raw("GET", path, params={"limit": 500, "continue": cont})
                    cont = head_only(raw)["metadata"].get("continue")
                    del raw
                    if not cont:
                        break
        except BaseException as exc:  # noqa: BLE001 -- raised in the main thread
            errors.append(exc)
        finally:
            c.close()

    meter.reset()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=read, args=(p,)) for p in ("/api/v1/pods", "/api/v1/nodes")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.perf_counter() - t0
    if errors:
        raise errors[0]
    out = {
        "pods": counts.get("/api/v1/pods", 0),
        "nodes": counts.get("/api/v1/nodes", 0),
        "seconds": secs,
        "base_rss_mb": base,
        "pages": pages,
        "mb": {k: round(v / 2**20, 1) for k, v in sizes.items()},
    }
    return finish(out, meter)


def child_reference(kubeconfig: str, meter: GcMeter) -> JSON:
    """What the targets need: each page projected to slim tuples, then dropped; GC paused."""
    from harness.kube.observer.handlers import _NodeHandler, _PodHandler

    client = KubeClient.from_kubeconfig(kubeconfig)
    base = proc_status_mb("VmRSS")
    meter.reset()
    t0 = time.perf_counter()
    caches: list[dict[tuple[str, str], Any]] = []
    gc.disable()
    try:
        for path, handler in (("/api/v1/pods", _PodHandler()), ("/api/v1/nodes", _NodeHandler())):
            cache: dict[tuple[str, str], Any] = {}
            cont = None
            while True:
                page = client.get(path, limit=500, **{"continue": cont})
                for obj in page.get("items") or []:
                    s = handler.project(obj)
                    md = obj["metadata"]
                    cache[(md.get("namespace", ""), md["name"])] = s
                del obj
                cont = (page.get("metadata") or {}).get("continue")
                del page
                if not cont:
                    break
            caches.append(cache)
        gc.freeze()  # the cache is long-lived: keep it out of future collections
    finally:
        gc.enable()
    secs = time.perf_counter() - t0
    out = {"pods": len(caches[0]), "nodes": len(caches[1]), "seconds": secs, "base_rss_mb": base}
    return finish(out, meter)


class _StampedTimeline:
    """Builds a Timeline subclass that notes when each transition became visible."""

    @staticmethod
    def make() -> Any:
        from harness.kube.timeline import Timeline, Transition

        class StampedTimeline(Timeline):
            def __init__(self) -> None:
                super().__init__()
                self.stamping = False
                self.visible: dict[int, float] = {}

            def extend(self, ts: list[Transition]) -> None:
                super().extend(ts)
                if self.stamping:
                    now = time.monotonic()
                    for t in ts:
                        self.visible[id(t)] = now

            def append(self, t: Transition) -> Transition:
                super().append(t)
                if self.stamping:
                    self.visible[id(t)] = time.monotonic()
                return t

        return StampedTimeline()


def child_observer(
    kubeconfig: str,
    meter: GcMeter,
    interactive: bool,
    prefetch: bool = True,
    slim_decode: bool = True,
) -> JSON:
    from harness.kube.observer import Observer

    # The resourceVersion of each event, to match transitions with the raw watch's: one
    # dict store per event, in the watcher thread (interactive runs only).
    rvs: dict[tuple[str, str, float], str] = {}
    if interactive:
        rvs, _ = observer_event_rvs()
    client = KubeClient.from_kubeconfig(kubeconfig)
    timeline = _StampedTimeline.make()
    obs = Observer(
        client,
        resources=("nodes", "pods"),
        timeline=timeline,
        sync_timeout_s=600,
        prefetch=prefetch,
        slim_decode=slim_decode,
    )
    base = proc_status_mb("VmRSS")
    meter.reset()
    t0 = time.perf_counter()
    obs.start()
    secs = time.perf_counter() - t0
    timeline.stamping = True
    out: JSON = {
        "pods": len(obs._states("pods")),
        "nodes": len(obs._states("nodes")),
        "seconds": secs,
        "base_rss_mb": base,
        "timeline": len(timeline),
    }
    finish(out, meter)
    if not interactive:
        obs.stop()
        stopped = obs.failure()
        if stopped and stopped != "observer stopped":
            out["stop_failure"] = stopped  # a watcher died while being stopped
        return out
    print(json.dumps(out), flush=True)
    meter.reset()
    gc_stop = threading.Event()
    gc_pauses: list[float] = []

    def gc_loop() -> None:
        # What Python does by itself once enough long-lived objects have piled up.
        while not gc_stop.wait(1.0):
            t = time.perf_counter()
            gc.collect()
            gc_pauses.append((time.perf_counter() - t) * 1000)

    # Stay up for the transition test: commands on stdin, until EOF or "quit".
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "gc-start":
            watch_gc = meter.as_dict()  # what the collector did by itself while watching
            gc_stop.clear()
            threading.Thread(target=gc_loop, daemon=True).start()
            print(json.dumps({"watch_gc": watch_gc}), flush=True)
        elif cmd == "gc-stop":
            gc_stop.set()
            print(json.dumps({"full_gc_ms": gc_pauses}), flush=True)
        elif cmd == "gc-read":  # what the collector did by itself since the last read
            print(json.dumps({"gc": meter.as_dict()}), flush=True)
            meter.reset()
        elif cmd == "dump":
            rows = [
                {
                    "mono": t.mono,
                    "kind": t.kind,
                    "namespace": t.namespace,
                    "name": t.name,
                    "transition": t.transition,
                    "detail": dict(t.detail),
                    "visible": timeline.visible.get(id(t)),
                    "rv": rvs.get((t.namespace, t.name, t.mono)),
                }
                for t in timeline.snapshot()
                if t.kind in ("Node", "Pod") and t.transition != "observed"
            ]
            Path(arg).write_text(json.dumps(rows))
            print(json.dumps({"dumped": len(rows), "failure": obs.failure()}), flush=True)
        elif cmd == "quit":
            break
    obs.stop()
    res: JSON = {"peak_rss_mb_end": proc_status_mb("VmHWM")}
    stopped = obs.failure()
    if stopped and stopped != "observer stopped":
        res["stop_failure"] = stopped
    return res


def child_profile(kubeconfig: str, meter: GcMeter, what: str, out_path: str) -> JSON:
    """Where the Observer's initial sync spends time and memory.

    ``breakdown``: wall time of the pod list (waiting for the server, JSON decoding) and of
    what follows it, by light wrappers around the client; ``tracemalloc``: what is held when
    the pod list returns; ``cprofile``: the watcher threads under cProfile.
    """
    import cProfile
    import io
    import pstats
    import tracemalloc

    from harness.kube import fields as fields_mod
    from harness.kube import observer as observer_mod
    from harness.kube.observer import watch as watch_mod

    report: list[str] = []
    profiles: list[cProfile.Profile] = []
    acc: dict[str, dict[str, float]] = {}

    def bump(key: str, what_: str, v: float) -> None:
        d = acc.setdefault(key, {})
        d[what_] = d.get(what_, 0.0) + v

    def timed(key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                bump(threading.current_thread().name, key, time.perf_counter() - t)

        return wrapper

    if what == "breakdown":
        # decoding (in the watcher thread), the whole list, then _resync (project, timeline)
        make_decoder = fields_mod.list_decoder

        def timed_decoder(schema: Any, label: str) -> Any:
            decode = make_decoder(schema, label)

            def decode_page(raw: bytes) -> Any:
                bump(threading.current_thread().name, "bytes", len(raw))
                bump(threading.current_thread().name, "pages", 1)
                return timed("decode_s", decode)(raw)

            return decode_page

        fields_mod.list_decoder = timed_decoder  # type: ignore[assignment]
        watch_mod._Watcher._list = timed("list_s", watch_mod._Watcher._list)  # type: ignore[method-assign]
        watch_mod._Watcher._resync = timed("resync_s", watch_mod._Watcher._resync)  # type: ignore[method-assign]
    if what == "tracemalloc":
        original_list = watch_mod._Watcher._list

        def traced_list(self: Any, client: Any) -> Any:
            res = original_list(self, client)
            if self.handler.resource == "pods":
                cur, peak = tracemalloc.get_traced_memory()
                snap = tracemalloc.take_snapshot()
                n = max(1, len(res[0]))
                report.append(
                    f"when the pod list returns ({n} pods projected): {cur / 2**20:.0f} MB "
                    f"held ({cur / n / 1024:.1f} KB per pod), {peak / 2**20:.0f} MB peak so "
                    "far; largest allocation sites:"
                )
                for stat in snap.statistics("lineno")[:5]:
                    fr = stat.traceback[0]
                    fname = fr.filename.replace(str(REPO) + "/", "")
                    report.append(
                        f"  {stat.size / 2**20:8.1f} MB {stat.count:>9} blocks  {fname}:{fr.lineno}"
                    )
            return res

        watch_mod._Watcher._list = traced_list  # type: ignore[method-assign,assignment]
    if what == "cprofile":
        original = watch_mod._Watcher._run

        def profiled_run(self: Any) -> None:
            prof = cProfile.Profile()
            profiles.append(prof)
            prof.enable()
            try:
                original(self)
            finally:
                prof.disable()

        watch_mod._Watcher._run = profiled_run  # type: ignore[method-assign]
    client = KubeClient.from_kubeconfig(kubeconfig)
    obs = observer_mod.Observer(client, resources=("nodes", "pods"), sync_timeout_s=900)
    if what == "tracemalloc":
        tracemalloc.start(1)
    meter.reset()
    t0 = time.perf_counter()
    obs.start()
    secs = time.perf_counter() - t0
    if what == "tracemalloc":
        cur, peak = tracemalloc.get_traced_memory()
        report.append(
            f"after Observer.start(): {cur / 2**20:.0f} MB held (slim state + timeline), "
            f"peak {peak / 2**20:.0f} MB"
        )
        tracemalloc.stop()
    obs.stop()
    stopped = obs.failure()
    if stopped and stopped != "observer stopped":
        report.append(f"a watcher died while Observer.stop() ran: {stopped}")
    if what == "breakdown":
        report.append(
            f"Observer.start() {secs:.2f}s, per watcher thread (nodes and pods in parallel):"
        )
        for name, d in sorted(acc.items()):
            if "list_s" not in d:
                continue
            report.append(
                f"  {name}: {d.get('bytes', 0) / 2**20:.0f} MB JSON in {int(d.get('pages', 0))} "
                f"pages; list {d['list_s']:.2f}s, of which decoding {d.get('decode_s', 0.0):.2f}s "
                f"(the rest: waiting for pages, projecting); then _resync (timeline) "
                f"{d.get('resync_s', 0.0):.2f}s"
            )
    if what == "cprofile":
        buf = io.StringIO()
        stats = pstats.Stats(profiles[0], stream=buf)
        for p in profiles[1:]:
            stats.add(p)
        stats.strip_dirs().sort_stats("tottime").print_stats(12)
        lines = [
            ln
            for ln in buf.getvalue().splitlines()
            if ln.strip() and not ln.strip().startswith("List reduced")
        ]
        report.append(f"cProfile of the watcher threads (start() took {secs:.1f}s), by tottime:")
        report.extend("  " + ln for ln in lines[-13:])
    report.append(
        f"garbage collector: {meter.total_s:.2f}s of {secs:.2f}s, longest pause "
        f"{meter.max_pause_s * 1000:.0f} ms, collections per generation {meter.collections}"
    )
    Path(out_path).write_text("\n".join(report) + "\n")
    return {"seconds": secs}


def child_churn(kubeconfig: str, ns: str, rate: float) -> JSON:
    """Patch an annotation on random non-probe pods of ``ns`` at ``rate``/s until told to stop.

    Every patch is a MODIFIED event of a whole pod for the observer to read and project.
    """
    client = KubeClient.from_kubeconfig(kubeconfig, maxsize=4)
    page = client.get(f"/api/v1/namespaces/{ns}/pods", limit=2000)["items"]
    names = [o["metadata"]["name"] for o in page if PROBE_LABEL not in o["metadata"]["labels"]]
    del page
    stop = threading.Event()
    count = [0]
    lock = threading.Lock()
    workers = 4

    def run() -> None:
        period = workers / rate
        nxt = time.monotonic()
        while not stop.is_set():
            with contextlib.suppress(ApiError, TemporaryError):
                client.patch(
                    f"/api/v1/namespaces/{ns}/pods/{random.choice(names)}",
                    {"metadata": {"annotations": {f"{GROUP}/churn": str(time.time())}}},
                )
                with lock:
                    count[0] += 1
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                stop.wait(delay)
            else:
                nxt = time.monotonic()  # behind: do not burst to catch up

    threads = [threading.Thread(target=run, daemon=True) for _ in range(workers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    print(json.dumps({"started": len(names)}), flush=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
    stop.set()
    for t in threads:
        t.join(10)
    return {"patches": count[0], "seconds": time.monotonic() - t0}


def child_main(args: argparse.Namespace) -> int:
    if args.child == "rawwatch":
        print(json.dumps(rawwatch_main(args.kubeconfig)), flush=True)
        return 0
    if args.child == "flipper":
        res = flipper_main(args.kubeconfig, args.targets, args.rate, args.flip_threads)
        print(json.dumps(res), flush=True)
        return 0
    if args.child == "churn":
        print(json.dumps(child_churn(args.kubeconfig, args.ns, args.rate)), flush=True)
        return 0
    meter = GcMeter()
    if args.child == "official":
        res = child_official(args.kubeconfig, meter)
    elif args.child == "raw":
        res = child_raw(args.kubeconfig, meter)
    elif args.child == "reference":
        res = child_reference(args.kubeconfig, meter)
    elif args.child in ("raw-list", "raw-list-pipelined"):
        res = child_raw_list(args.kubeconfig, meter, pipelined=args.child != "raw-list")
    elif args.child == "observer":
        res = child_observer(args.kubeconfig, meter, args.interactive)
        if args.interactive:
            print(json.dumps(res), flush=True)
            return 0
    elif args.child == "sequential":
        res = child_observer(args.kubeconfig, meter, False, prefetch=False)
    elif args.child == "full-decode":
        res = child_observer(args.kubeconfig, meter, False, slim_decode=False)
    elif args.child in PROFILES:
        res = child_profile(args.kubeconfig, meter, args.child, args.profile_out)
    else:
        raise SystemExit(f"unknown child {args.child!r}")
    print(json.dumps(res), flush=True)
    return 0


# -- the parent ----------------------------------------------------------------------------

CHILDREN: set[subprocess.Popen[str]] = set()
CHILD_NAMES: dict[int, str] = {}
PROFILES = ("breakdown", "tracemalloc", "cprofile")


def spawn(
    method: str, kubeconfig: Path, *extra: str, tree: Path | None = None
) -> subprocess.Popen[str]:
    """A child process running ``method``; with ``tree``, that checkout's benchmark and
    harness (`--baseline`: the same measurement of another version of the code)."""
    env = None
    script = HERE
    if tree is not None:
        script = tree / "bench" / HERE.name
        env = {**os.environ, "PYTHONPATH": str(tree)}
    p = subprocess.Popen(
        [PYTHON, str(script), "--child", method, "--kubeconfig", str(kubeconfig), *extra],
        cwd=tree or REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    CHILDREN.add(p)
    CHILD_NAMES[p.pid] = method
    return p


def reap(p: subprocess.Popen[str]) -> None:
    if p.poll() is None:
        p.kill()
        p.wait(10)
    CHILDREN.discard(p)


def read_json_line(p: subprocess.Popen[str], timeout_s: float) -> JSON:
    assert p.stdout is not None
    out = p.stdout
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(out.readline()), daemon=True)
    t.start()
    t.join(timeout_s)
    if not box or not box[0]:
        reap(p)
        raise RuntimeError(f"child {CHILD_NAMES.get(p.pid, '?')} gave no result (exit {p.poll()})")
    res: JSON = json.loads(box[0])
    return res


def run_child(
    method: str, kubeconfig: Path, timeout_s: float, *extra: str, tree: Path | None = None
) -> JSON:
    p = spawn(method, kubeconfig, *extra, tree=tree)
    try:
        res = read_json_line(p, timeout_s)
        p.wait(30)
        return res
    finally:
        reap(p)


@dataclass
class Patch:
    kind: str
    namespace: str
    name: str
    expect: str  # transition name: ready / not-ready
    status: str  # the Ready status sent
    round: str
    sent: float
    returned: float
    rv: str


class Witness:
    """A raw watch of ``paths`` that only notes when each resourceVersion was read."""

    def __init__(self, client: KubeClient, paths: list[str], selector: str | None) -> None:
        self.client = client
        self.seen: dict[str, float] = {}
        self._cancels: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(p, selector), daemon=True) for p in paths
        ]
        self._ready = threading.Barrier(len(paths) + 1)

    def start(self) -> None:
        for t in self._threads:
            t.start()
        self._ready.wait(60)

    def _run(self, path: str, selector: str | None) -> None:
        c = self.client.clone(maxsize=1)
        # Only the current resourceVersion is needed, not the objects.
        rv = str(c.get(path, limit=1, labelSelector=selector)["metadata"]["resourceVersion"])
        self._ready.wait(60)
        while not self._stop.is_set():
            # ValueError: KubeClient.watch can hand undecodable bytes over once cancelled.
            with contextlib.suppress(ApiError, TemporaryError, ValueError):
                for ev in c.watch(
                    path,
                    resource_version=rv,
                    timeout_s=600,
                    on_open=self._cancels.append,
                    labelSelector=selector,
                ):
                    new_rv = str((ev.object.get("metadata") or {}).get("resourceVersion") or "")
                    if ev.type != "BOOKMARK":
                        self.seen.setdefault(new_rv, ev.mono)
                    if new_rv:
                        rv = new_rv

    def stop(self) -> None:
        self._stop.set()
        for cancel in list(self._cancels):
            cancel()


ROUNDS = ("idle", "churn", "churn+gc", "flips")


def flip_targets(client: KubeClient, ns: str, nodes: int, pods: int) -> list[tuple[str, str, str]]:
    """The fake nodes (not the probes) and ``pods`` pods of ``ns`` (not the probes), mixed."""
    targets: list[tuple[str, str, str]] = [("Node", "", node_name(i)) for i in range(nodes)]
    page = client.get(f"/api/v1/namespaces/{ns}/pods", limit=pods, labelSelector=f"!{PROBE_LABEL}")
    targets += [("Pod", ns, o["metadata"]["name"]) for o in page.get("items") or []]
    del page
    random.shuffle(targets)
    return targets


class Flippers:
    """The generator processes of the `flips` round (bench/observer_streams.py)."""

    def __init__(
        self,
        kubeconfig: Path,
        targets: list[tuple[str, str, str]],
        args: argparse.Namespace,
        workdir: Path,
    ) -> None:
        procs = max(1, args.flip_procs)
        self.children: list[subprocess.Popen[str]] = []
        for i in range(procs):
            share = workdir / f"flip-targets-{i}.json"
            share.write_text(json.dumps(targets[i::procs]))
            self.children.append(
                spawn(
                    "flipper",
                    kubeconfig,
                    "--targets",
                    str(share),
                    "--rate",
                    str(args.flip_rate / procs),
                    "--flip-threads",
                    str(args.flip_threads),
                )
            )
        for c in self.children:
            read_json_line(c, 120)  # ready

    def _tell(self, cmd: str) -> None:
        for c in self.children:
            assert c.stdin is not None
            c.stdin.write(cmd + "\n")
            c.stdin.flush()

    def go(self) -> None:
        self._tell("go")

    def stop(self) -> JSON:
        self._tell("stop")
        results = [read_json_line(c, 180) for c in self.children]
        for c in self.children:
            reap(c)
        secs = statistics.median(r["seconds"] for r in results)
        patches = sum(r["patches"] for r in results)
        rtts = [v for r in results for v in r["rtt_ms"]]
        return {
            "patches": patches,
            "reset_patches": sum(r["reset_patches"] for r in results),
            "seconds": secs,
            "rate": patches / secs if secs > 0 else 0.0,
            "errors": [e for r in results for e in r["errors"]][:5],
            "error_count": sum(len(r["errors"]) for r in results),
            "rtt_ms": (pct(rtts, 50), pct(rtts, 99)),
            "done": max(r["done"] for r in results),
        }


def transition_test(
    client: KubeClient,
    kubeconfig: Path,
    child: subprocess.Popen[str],
    ns: str,
    probe_nodes: list[str],
    probe_pods: list[str],
    args: argparse.Namespace,
    workdir: Path,
) -> JSON:
    """Flip probes' Ready at known times while ``child`` (an interactive observer) watches;
    in the last round, generators flip the fake nodes and pods at ``--flip-rate`` besides."""
    assert child.stdin is not None
    witness = Witness(
        client, ["/api/v1/nodes", f"/api/v1/namespaces/{ns}/pods"], f"{PROBE_LABEL}=true"
    )
    witness.start()
    control = spawn("rawwatch", kubeconfig)  # the independent raw watch, all nodes and pods
    # a second one, the same: how far two identical raw clients disagree on this machine
    control2 = spawn("rawwatch", kubeconfig)
    read_json_line(control, 300)
    read_json_line(control2, 300)
    # Current Ready state of every probe, so each patch is a real change.
    state: dict[tuple[str, str], bool] = {}
    for n in probe_nodes:
        conds = client.get(f"/api/v1/nodes/{n}")["status"]["conditions"]
        cond = [c for c in conds if c["type"] == "Ready"]
        state[("Node", n)] = bool(cond and cond[0]["status"] == "True")
    for p in probe_pods:
        obj = client.get(f"/api/v1/namespaces/{ns}/pods/{p}")
        cond = [c for c in obj["status"].get("conditions", []) if c["type"] == "Ready"]
        state[("Pod", p)] = bool(cond and cond[0]["status"] == "True")
    targets = [("Node", n) for n in probe_nodes] + [("Pod", p) for p in probe_pods]
    random.shuffle(targets)
    patches: list[Patch] = []
    churned: dict[str, float] = {}
    gc_pauses: dict[str, list[float]] = {}
    watch_gc: JSON = {}
    round_gc: dict[str, JSON] = {}
    windows: dict[str, tuple[float, float]] = {}
    flips: JSON = {}
    rounds = [r for r in ROUNDS if r != "flips" or args.flip_rate > 0]

    def tell(cmd: str) -> JSON:
        assert child.stdin is not None
        child.stdin.write(cmd + "\n")
        child.stdin.flush()
        return read_json_line(child, 120)

    for rnd in rounds:
        round_start = time.monotonic()
        if windows:
            last = next(reversed(windows))
            windows[last] = (windows[last][0], round_start)
        windows[rnd] = (round_start, math.inf)
        churner = None
        flippers = None
        if rnd.startswith("churn"):
            # In its own process, so it takes no GIL from this one's independent watch.
            churner = spawn("churn", kubeconfig, "--ns", ns, "--rate", str(args.churn_rate))
            read_json_line(churner, 60)  # started
            time.sleep(1.0)  # let the churn reach its rate before measuring
        if rnd.endswith("+gc"):
            watch_gc = tell("gc-start")["watch_gc"]
        if rnd == "flips":
            say(f"  flips: {args.flip_rate:.0f}/s for {args.flip_seconds:.0f}s")
            pods = args.flip_pods if args.flip_pods is not None else 3 * args.nodes
            flippers = Flippers(
                kubeconfig, flip_targets(client, ns, args.nodes, pods), args, workdir
            )
            tell("gc-read")  # from here on
            flippers.go()
            round_start = time.monotonic()  # the flips' own time (the generators are up)
        for i in range(args.transitions):
            kind, name = targets[i % len(targets)]
            ready = not state[(kind, name)]
            status = "True" if ready else "False"
            t = now_rfc3339()
            ready_cond = {"type": "Ready", "status": status, "lastTransitionTime": t}
            if kind == "Node":
                path = f"/api/v1/nodes/{name}/status"
                reason = "KubeletReady" if ready else "KubeletNotReady"
                node_cond = {**ready_cond, "reason": reason, "lastHeartbeatTime": t}
                body: JSON = {"status": {"conditions": [node_cond]}}
            else:
                path = f"/api/v1/namespaces/{ns}/pods/{name}/status"
                both = [ready_cond, {**ready_cond, "type": "ContainersReady"}]
                body = {"status": {"conditions": both}}
            sent = time.monotonic()
            resp = client.patch(path, body, "strategic")
            returned = time.monotonic()
            state[(kind, name)] = ready
            patches.append(
                Patch(
                    kind,
                    ns if kind == "Pod" else "",
                    name,
                    "ready" if ready else "not-ready",
                    status,
                    rnd,
                    sent,
                    returned,
                    str(resp["metadata"]["resourceVersion"]),
                )
            )
            time.sleep(args.interval * random.uniform(0.5, 1.5))
        if flippers is not None:
            time.sleep(max(0.0, round_start + args.flip_seconds - time.monotonic()))
            flips = flippers.stop()
            round_gc[rnd] = tell("gc-read")["gc"]
        if rnd.endswith("+gc"):
            gc_pauses[rnd] = tell("gc-stop")["full_gc_ms"]
        if churner is not None:
            assert churner.stdin is not None
            churner.stdin.write("quit\n")
            churner.stdin.flush()
            done = read_json_line(churner, 60)
            reap(churner)
            churned[rnd] = done["patches"] / done["seconds"]
    time.sleep(1.5)  # let the last events arrive everywhere
    last = next(reversed(windows))
    windows[last] = (windows[last][0], time.monotonic())
    witness.stop()
    raws: list[JSON] = []
    for i, ctl in enumerate((control, control2)):
        assert ctl.stdin is not None
        raw_dump = workdir / f"rawwatch{i}.json"
        ctl.stdin.write(f"dump {raw_dump}\n")
        ctl.stdin.flush()
        read_json_line(ctl, 120)
        ctl.stdin.write("quit\n")
        ctl.stdin.flush()
        read_json_line(ctl, 60)
        reap(ctl)
        raws.append(json.loads(raw_dump.read_text()))
    raw, raw2 = raws
    dump = workdir / "transitions.json"
    ack = tell(f"dump {dump}")
    seen = json.loads(dump.read_text())
    res = match_transitions(patches, seen, witness.seen, raw["seen"])
    observed = {
        (t["kind"], t["namespace"], t["name"], t["rv"]): t["mono"]
        for t in seen
        if t["transition"] in ("ready", "not-ready") and t.get("rv")
    }
    raw_transitions = [
        (str(k), str(ns), str(n), str(rv), float(m), str(v))
        for k, ns, n, rv, m, v in raw["transitions"]
    ]
    vs_raw = match_raw(raw_transitions, observed, windows)
    second = {
        (str(k), str(ns), str(n), str(rv)): float(m) for k, ns, n, rv, m, _ in raw2["transitions"]
    }
    raw_vs_raw = match_raw(raw_transitions, second, windows)
    per_tenth = {int(k): v for k, v in raw["per_tenth"].items()}
    for rnd, (lo, hi) in windows.items():
        vs_raw[rnd]["seconds"] = hi - lo
        # every event on the raw watch's streams (nodes and pods) in the round's window
        vs_raw[rnd]["events"] = sum(v for k, v in per_tenth.items() if lo * 10 <= k < hi * 10)
    res.update(
        churn_rate=churned,
        gc_pauses=gc_pauses,
        observer_failure=ack.get("failure"),
        watch_gc=watch_gc,
        round_gc=round_gc,
        vs_raw=vs_raw,
        raw_vs_raw=raw_vs_raw,
        flips=flips,
        raw_events=raw["events"],
        raw_problems=raw["problems"] + raw2["problems"],
    )
    return res


def match_transitions(
    patches: list[Patch], seen: list[JSON], witness: dict[str, float], control: dict[str, float]
) -> JSON:
    by_obj: dict[tuple[str, str, str], list[JSON]] = {}
    for t in sorted(seen, key=lambda t: t["mono"]):
        by_obj.setdefault((t["kind"], t["namespace"], t["name"]), []).append(t)
    used: set[int] = set()
    rows: dict[str, dict[str, list[float]]] = {}
    missed: list[str] = []
    for p in patches:
        cands = by_obj.get((p.kind, p.namespace, p.name), [])
        hit = next(
            (
                t
                for t in cands
                if id(t) not in used
                and t["transition"] == p.expect
                and t["mono"] >= p.sent - 0.001
                and (p.kind != "Node" or t["detail"].get("status") == p.status)
            ),
            None,
        )
        if hit is None:
            missed.append(f"{p.kind} {p.name} {p.expect} ({p.round})")
            continue
        used.add(id(hit))
        r = rows.setdefault(
            p.round,
            {k: [] for k in ("vs_return", "vs_witness", "vs_control", "control", "visible", "rtt")},
        )
        r["vs_return"].append((hit["mono"] - p.returned) * 1000)
        r["rtt"].append((p.returned - p.sent) * 1000)
        if p.rv in witness:
            r["vs_witness"].append((hit["mono"] - witness[p.rv]) * 1000)
        if p.rv in control:
            r["vs_control"].append((hit["mono"] - control[p.rv]) * 1000)
            if p.rv in witness:
                r["control"].append((control[p.rv] - witness[p.rv]) * 1000)
        if hit.get("visible") is not None:
            r["visible"].append((hit["visible"] - hit["mono"]) * 1000)
    return {"rounds": rows, "patches": len(patches), "missed": missed}


def fmt_stats(values: list[float]) -> str:
    """p50 / p95 / max."""
    if not values:
        return "n/a"
    return f"{pct(values, 50):6.1f} {pct(values, 95):6.1f} {max(values):7.1f}"


def lateness(values: list[float]) -> list[float]:
    """How much later than the reference; a stamp before it counts as 0 (not late)."""
    return [max(0.0, v) for v in values]


def fmt_err(values: list[float]) -> str:
    """p50 / p95 / max of the lateness, then the earliest signed difference."""
    if not values:
        return "n/a"
    return f"{fmt_stats(lateness(values))} {min(values):+7.1f}"


@dataclass
class Row:
    method: str
    runs: int
    pods: int
    nodes: int
    seconds: float
    peak_mb: float
    held_mb: float
    base_mb: float
    gc_s: float
    gc_pause_ms: float
    full_gc_ms: float
    cpu_s: float  # the process's CPU time (all threads) during the list


METHODS = {
    "official": "kubernetes 37 client, model objects",
    "observer": "harness Observer initial sync",
    "baseline": "  the same, --baseline's code",
    "sequential": "  the same, pages not pipelined",
    "full-decode": "  the same, objects decoded in full",
    "raw-list": "raw LIST: bodies read, not decoded",
    "raw-list-pipelined": "  the same, pipelined as the Observer",
    "raw": "harness KubeClient.list (dicts)",
    "reference": "raw pages -> slim tuples, GC paused",
}


def stop_failures(results: list[JSON]) -> list[str]:
    return [str(r["stop_failure"]) for r in results if r.get("stop_failure")]


def median_row(method: str, results: list[JSON]) -> Row:
    def med(key: str) -> float:
        return float(statistics.median(float(r[key]) for r in results))

    return Row(
        method,
        len(results),
        int(results[0]["pods"]),
        int(results[0]["nodes"]),
        med("seconds"),
        med("peak_rss_mb"),
        med("held_rss_mb"),
        med("base_rss_mb"),
        med("gc_s"),
        med("gc_max_pause_ms"),
        med("full_gc_ms"),
        med("cpu_s") if all("cpu_s" in r for r in results) else math.nan,
    )


def print_table(size: int, rows: list[Row]) -> bool:
    """Print the comparison; True when the observer met both sync targets."""
    print(
        f"\n== {size:,} pods: cluster-wide list of pods + nodes, a fresh process per run, "
        "median of the runs"
    )
    print(
        f"{'method':<37} {'runs':>4} {'pods':>7} {'nodes':>5} {'seconds':>8} {'peak RSS MB':>11} "
        f"{'held MB':>8} {'start MB':>8} {'GC s':>6} {'GC max ms':>9} {'full GC ms':>10} "
        f"{'CPU s':>6}"
    )
    for r in rows:
        print(
            f"{METHODS[r.method]:<37} {r.runs:>4} {r.pods:>7,} {r.nodes:>5,} {r.seconds:>8.2f} "
            f"{r.peak_mb:>11.1f} {r.held_mb:>8.1f} {r.base_mb:>8.1f} {r.gc_s:>6.2f} "
            f"{r.gc_pause_ms:>9.0f} {r.full_gc_ms:>10.0f} {r.cpu_s:>6.2f}"
        )
    by = {r.method: r for r in rows}
    ok = True
    if "official" in by and "observer" in by:
        o, b = by["official"], by["observer"]
        speedup = o.seconds / b.seconds
        verdict = "met" if speedup >= TARGET_SPEEDUP else "MISSED"
        ok = ok and speedup >= TARGET_SPEEDUP
        print(
            f"official/observer: time x{speedup:.1f} (target >= x{TARGET_SPEEDUP:.0f}: "
            f"{verdict}), peak RSS x{o.peak_mb / b.peak_mb:.1f}"
        )
    floors = [by[m] for m in ("raw-list", "raw-list-pipelined") if m in by]
    for name in ("observer", "baseline"):
        if name not in by or not floors:
            continue
        b = by[name]
        floor = min(floors, key=lambda r: r.seconds)
        ratios = ", ".join(f"{b.seconds / r.seconds:.2f}x {r.method}" for r in floors)
        met = b.seconds <= TARGET_RAW_LIST_RATIO * floor.seconds
        if name == "observer":
            ok = ok and met
        print(
            f"{name} / raw list time: {ratios} (target <= {TARGET_RAW_LIST_RATIO}x the faster: "
            f"{'met' if met else 'MISSED'})"
        )
    if "baseline" in by:
        b = by["baseline"]
        print(
            f"baseline peak RSS {b.peak_mb:.1f} MB, {b.peak_mb - b.base_mb:.1f} MB over its start"
        )
    if "observer" in by:
        b = by["observer"]
        verdict = "met" if b.peak_mb <= TARGET_RSS_MB else "MISSED"
        ok = ok and b.peak_mb <= TARGET_RSS_MB
        print(
            f"observer peak RSS {b.peak_mb:.0f} MB, {b.peak_mb - b.base_mb:.0f} MB over its "
            f"{b.base_mb:.0f} MB at the start (target <= {TARGET_RSS_MB:.0f} MB: {verdict})"
        )
    return ok


def print_transitions(size: int, res: JSON) -> bool:
    print(
        f"\n== transition stamps at {size:,} pods ({res['patches']} Ready flips of probe nodes "
        "and pods), ms.\n   late by: p50 / p95 / max of max(0, stamp - reference), then the "
        "earliest (most negative) stamp - reference"
    )
    print(
        f"{'round':<28} {'n':>3} {'late vs PATCH returned':>30} {'late vs probe-only watch':>30} "
        f"{'late vs raw same streams':>30} {'visible - stamp':>21}"
    )
    ok = True
    for rnd, r in res["rounds"].items():
        label = rnd
        if rnd in res["churn_rate"]:
            label = f"{rnd} ({res['churn_rate'][rnd]:.0f} patches/s)"
        print(
            f"{label:<28} {len(r['vs_return']):>3} {fmt_err(r['vs_return']):>30} "
            f"{fmt_err(r['vs_witness']):>30} {fmt_err(r['vs_control']):>30} "
            f"{fmt_stats(r['visible']):>21}"
        )
        print(
            f"{'':<33}PATCH RTT {fmt_stats(r['rtt']).strip()}; raw same streams late vs "
            f"probe-only watch {fmt_err(r['control']).strip()}"
        )
        neg = sum(1 for v in r["vs_return"] if v < 0)
        if neg:
            print(f"{'':<33}{neg} of {len(r['vs_return'])} stamped before the PATCH returned")
        if rnd in res["gc_pauses"]:
            pauses = res["gc_pauses"][rnd]
            print(
                f"{'':<33}{len(pauses)} forced full collections of "
                f"{min(pauses or [0]):.0f}-{max(pauses or [0]):.0f} ms (not in the verdict)"
            )
            continue
        if rnd == "flips":
            continue  # its own target, below
        worst = max(lateness(r["vs_return"] + r["vs_witness"]) or [0.0])
        ok = ok and worst < TARGET_STAMP_MS
    wg = res.get("watch_gc") or {}
    if wg:
        print(
            f"observer's own GC while watching (rounds before the forced one): {wg['gc_s']:.2f}s, "
            f"longest pause {wg['gc_max_pause_ms']:.0f} ms, per generation {wg['gc_collections']}"
        )
    if res["missed"]:
        ok = False
        print(f"MISSED {len(res['missed'])} transitions: {', '.join(res['missed'][:10])}")
    if res.get("observer_failure"):
        ok = False
        print(f"observer failure: {res['observer_failure']}")
    verdict = "met" if ok else "MISSED"
    print(f"stamped no more than {TARGET_STAMP_MS:.0f} ms late (idle and churn rounds): {verdict}")
    return print_vs_raw(res) and ok


def fmt_signed(values: list[float]) -> str:
    """p50 / p95 / p99 / max, then min, of signed differences."""
    if not values:
        return f"{'n/a':>38}"
    return (
        f"{pct(values, 50):6.1f} {pct(values, 95):6.1f} {pct(values, 99):6.1f} "
        f"{max(values):7.1f} {min(values):+7.1f}"
    )


def print_vs_raw(res: JSON) -> bool:
    """Every Ready transition the independent raw watch saw, per round; True when the
    flips round meets its targets (p99 within TARGET_RAW_P99_MS, none lost) and no round
    lost one."""
    vs = res.get("vs_raw") or {}
    if not vs:
        return True
    print(
        "\n== every Ready transition the independent raw watch saw (own process, plain HTTP, "
        "all nodes and pods, stamped when each line was read),\n   matched with the "
        "Observer's by object and resourceVersion. Observer stamp - raw stamp, ms: "
        "p50 / p95 / p99 / max, then the most negative.\n   Below each round: a second "
        "raw watch, the same as the first, against it (its misses, then the same figures): "
        "how far two identical clients disagree on this machine"
    )
    print(
        f"{'round':<10} {'s':>5} {'events/s':>9} {'trans/s':>8} {'raw saw':>8} {'Observer':>8} "
        f"{'lost':>5} {'p50':>6} {'p95':>6} {'p99':>6} {'max':>7} {'min':>7}"
    )
    ok = True
    for rnd, r in vs.items():
        secs = max(r["seconds"], 1e-9)
        print(
            f"{rnd:<10} {secs:>5.1f} {r['events'] / secs:>9.0f} {r['raw'] / secs:>8.0f} "
            f"{r['raw']:>8} {r['raw'] - r['lost']:>8} {r['lost']:>5} {fmt_signed(r['late_ms'])}"
        )
        r2 = (res.get("raw_vs_raw") or {}).get(rnd)
        if r2:
            print(
                f"{'':<11}{'2nd raw watch - 1st:':>47} {r2['lost']:>5} {fmt_signed(r2['late_ms'])}"
            )
        if r["lost"]:
            ok = False
            print(f"{'':<11}lost: {'; '.join(r['lost_examples'])}")
    f = res.get("flips") or {}
    if f:
        rtt50, rtt99 = f["rtt_ms"]
        print(
            f"flips: generators reached {f['rate']:.0f} status patches/s "
            f"({f['patches']} in {f['seconds']:.1f}s, then {f['reset_patches']} to leave "
            f"nothing Ready), PATCH RTT p50 {rtt50:.0f} ms p99 {rtt99:.0f} ms, "
            f"{f['error_count']} errors{': ' + f['errors'][0] if f['errors'] else ''}"
        )
        gcd = (res.get("round_gc") or {}).get("flips")
        if gcd:
            print(
                f"observer's own GC in the flips round: {gcd['gc_s']:.2f}s, longest pause "
                f"{gcd['gc_max_pause_ms']:.0f} ms, per generation {gcd['gc_collections']}"
            )
        r = vs.get("flips") or {}
        p99 = pct(r.get("late_ms") or [], 99)
        met = bool(r.get("late_ms")) and p99 <= TARGET_RAW_P99_MS and not r.get("lost")
        ok = ok and met
        print(
            f"flips: p99 {p99:.1f} ms behind the raw watch (target <= {TARGET_RAW_P99_MS:.0f}), "
            f"{r.get('lost', 0)} lost of {r.get('raw', 0)} (target none): "
            f"{'met' if met else 'MISSED'}"
        )
    for p in res.get("raw_problems") or []:
        print(f"raw watch: {p}")
    return ok


def measure_size(
    args: argparse.Namespace,
    kubeconfig: Path,
    client: KubeClient,
    ns: str,
    probe_pods: list[str],
    workdir: Path,
) -> tuple[list[Row], JSON | None, list[str]]:
    results: dict[str, list[JSON]] = {}

    def add(method: str, res: JSON) -> None:
        results.setdefault(method, []).append(res)
        say(
            f"  {method}: {res['pods']} pods in {res['seconds']:.2f}s, "
            f"peak RSS {res['peak_rss_mb']:.0f} MB"
        )

    trans = None
    if "observer" in args.methods:
        # The first observer stays up for the transition test, in its own process.
        p = spawn("observer", kubeconfig, "--interactive")
        try:
            add("observer", read_json_line(p, args.child_timeout))
            if args.transitions > 0:
                probe_nodes = [probe_node_name(i) for i in range(args.probe_nodes)]
                trans = transition_test(
                    client, kubeconfig, p, ns, probe_nodes, probe_pods, args, workdir
                )
            assert p.stdin is not None
            p.stdin.write("quit\n")
            p.stdin.flush()
            quit_res = read_json_line(p, 30)
            if quit_res.get("stop_failure"):
                results["observer"][0]["stop_failure"] = quit_res["stop_failure"]
        finally:
            reap(p)
    for rep in range(args.repeat):
        for m in METHODS:
            if m not in args.methods or (m == "observer" and rep == 0):
                continue
            if m == "official" and rep >= args.official_repeat:
                continue
            if m == "baseline":
                if args.baseline is not None:
                    add(
                        m, run_child("observer", kubeconfig, args.child_timeout, tree=args.baseline)
                    )
                continue
            add(m, run_child(m, kubeconfig, args.child_timeout))
    rows = [median_row(m, results[m]) for m in METHODS if m in results]
    notes = []
    failed = stop_failures(results.get("observer", []))
    if failed:
        notes.append(
            f"observer: a watcher died while Observer.stop() ran in {len(failed)} of "
            f"{len(results['observer'])} runs: {failed[0]}"
        )
    return rows, trans, notes


def profile_observer(kubeconfig: Path, workdir: Path, timeout_s: float, size: int) -> None:
    for what in PROFILES:
        out = workdir / f"profile-{what}.txt"
        say(f"  profiling the observer's initial sync ({what})")
        try:
            run_child(what, kubeconfig, timeout_s, "--profile-out", str(out))
        except RuntimeError as exc:
            print(f"profile {what} failed: {exc}")
            continue
        print(f"\n-- {what}: Observer initial sync at {size:,} pods --")
        print(out.read_text(), end="")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C, so the cleanup in `finally` runs for both."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="2,000 pods and 100 nodes")
    ap.add_argument("--sizes", default=None, help="pod counts, comma-separated (10000,30000)")
    ap.add_argument("--nodes", type=int, default=None, help="Node objects (500; quick 100)")
    ap.add_argument("--kubeconfig", type=Path, default=None, help="use this cluster, no lab")
    ap.add_argument("--state-dir", type=Path, default=Path("/tmp/obsbench-lab"))
    ap.add_argument("--base-port", type=int, default=26500, help="lab's first port (26500)")
    ap.add_argument("--threads", type=int, default=8, help="parallel creators (8)")
    ap.add_argument(
        "--pod-status",
        action="store_true",
        help="patch a kubelet-like status onto every pod (8.4 KB instead of 5.9; half the rate)",
    )
    ap.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"which of {','.join(METHODS)} to measure",
    )
    ap.add_argument("--transitions", type=int, default=None, help="Ready flips per round (60)")
    ap.add_argument("--interval", type=float, default=0.1, help="mean seconds between flips")
    ap.add_argument("--churn-rate", type=float, default=100.0, help="pod patches/s (100)")
    ap.add_argument(
        "--flip-rate",
        type=float,
        default=1000.0,
        help="Ready flips/s in the flips round (1000; 0: no round)",
    )
    ap.add_argument(
        "--flip-seconds", type=float, default=None, help="flips round length (30; quick 10)"
    )
    ap.add_argument("--flip-procs", type=int, default=4, help="generator processes (4)")
    ap.add_argument("--flip-threads", type=int, default=12, help="threads per generator (12)")
    ap.add_argument(
        "--flip-pods", type=int, default=None, help="pods flipped besides the nodes (3 x nodes)"
    )
    ap.add_argument("--probe-nodes", type=int, default=10)
    ap.add_argument("--probe-pods", type=int, default=10)
    ap.add_argument(
        "--profile",
        choices=("auto", "always", "never"),
        default="auto",
        help="profile the observer's sync: once where it first misses a target (auto), "
        "at every size (always), never",
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs per method, median (3)")
    ap.add_argument(
        "--official-repeat", type=int, default=1, help="runs of the slow official client (1)"
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of other code (git worktree add --detach DIR main): its Observer's "
        "sync measured beside this one's",
    )
    ap.add_argument("--keep", action="store_true", help="leave the objects (and lab) in place")
    ap.add_argument("--child-timeout", type=float, default=600.0)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--interactive", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile-out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ns", default="", help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--targets", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.sizes is None:
        args.sizes = "2000" if args.quick else "10000,30000"
    args.sizes = sorted({int(s) for s in str(args.sizes).split(",") if s.strip()})
    if args.nodes is None:
        args.nodes = 100 if args.quick else 500
    if args.transitions is None:
        args.transitions = 30 if args.quick else 60
    if args.flip_seconds is None:
        args.flip_seconds = 10.0 if args.quick else 30.0
    args.methods = [m.strip() for m in str(args.methods).split(",") if m.strip()]
    unknown = set(args.methods) - set(METHODS)
    if unknown:
        ap.error(f"unknown methods {sorted(unknown)}; valid: {', '.join(METHODS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    t_start = time.monotonic()
    lab: Lab | None = None
    client: KubeClient | None = None
    ok = True
    with terminate_as_interrupt(), tempfile.TemporaryDirectory(prefix="obsbench-") as tmp:
        workdir = Path(tmp)
        try:
            if args.kubeconfig is None:
                lab = Lab(args.state_dir, args.base_port)
                say(f"starting a lab in {args.state_dir} (base port {args.base_port})")
                say(f"lab up in {lab.up():.1f}s")
                kubeconfig = lab.kubeconfig
            else:
                kubeconfig = args.kubeconfig
            client = KubeClient.from_kubeconfig(kubeconfig, timeout_s=60, maxsize=args.threads)
            setup = Setup(client, args.threads, args.pod_status)
            setup.crd()
            setup.nodes(args.nodes, args.probe_nodes)
            prev = 0
            summary: list[str] = []
            profiled = False
            for size in args.sizes:
                ns = f"{PREFIX}-pods-{size}"
                say(f"size {size:,}: {size - prev:,} more pods in namespace {ns}")
                probes, pod_bytes = setup.pods(ns, size - prev, args.nodes, args.probe_pods, prev)
                say(f"measuring at {size:,} pods ({pod_bytes} bytes of JSON per pod)")
                rows, trans, notes = measure_size(args, kubeconfig, client, ns, probes, workdir)
                rate = setup.created.get(f"pods@{ns}")
                how = "POST + status PATCH" if args.pod_status else "POST; status on probes only"
                print(
                    f"\npods: {pod_bytes:,} bytes of JSON each; created at "
                    f"{rate or 0:.0f} pods/s ({how}, {args.threads} threads); "
                    f"nodes at {setup.created.get('nodes', 0):.0f}/s"
                )
                sync_ok = print_table(size, rows)
                for note in notes:
                    print(note)
                stamps_ok = print_transitions(size, trans) if trans is not None else True
                ok = ok and sync_ok and stamps_ok
                if lab is not None:
                    print(
                        f"lab supervisor RSS now: {lab.supervisor_rss_mb():.0f} MB "
                        "(its informers keep every pod)"
                    )
                sys.stdout.flush()
                if args.profile == "always" or (
                    args.profile == "auto" and not sync_ok and not profiled
                ):
                    profile_observer(kubeconfig, workdir, args.child_timeout, size)
                    profiled = True
                summary.append(
                    f"{size:,} pods: sync {'ok' if sync_ok else 'MISSED'}, "
                    f"stamps {'ok' if stamps_ok else 'MISSED'}"
                )
                prev = size
            print(f"\ntotal {time.monotonic() - t_start:.0f}s; " + "; ".join(summary))
        except RuntimeError as exc:
            print(f"benchmark failed: {exc}")
            ok = False
        except KeyboardInterrupt:
            say("interrupted: cleaning up")
            ok = False
        finally:
            for p in list(CHILDREN):
                reap(p)
            if not args.keep:
                if lab is not None:
                    say("stopping the lab")
                    lab.down()
                elif client is not None:
                    say("removing the benchmark's objects")
                    try:
                        cleanup_cluster(client)
                    except (ApiError, TemporaryError) as exc:
                        say(f"cleanup incomplete: {exc}")
            if client is not None:
                client.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
