"""One real kind cluster per test session (1 control plane + 2 workers, with the sample
workloads), on its own ports, state directory and cluster name; removed at the end, and
checked to leave no container behind."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.kube.client import KubeClient
from harness.power.kind import KindDriver
from tests.polling import poll_until

BASE_PORT = int(os.environ.get("POWERCUT_TEST_KIND_PORT", "26000"))
NAME = os.environ.get("POWERCUT_TEST_KIND_NAME", "pctest")
#: The workloads' volumes: csi (default: the attachable storage, whose tests and features
#: run only then, on the cluster every kind test shares) or local-path.
STORAGE = os.environ.get("POWERCUT_TEST_KIND_STORAGE", "csi")
#: The nodes' Docker network (``kind up --network``): one of its own keeps a session apart
#: from other kind clusters on the same engine, whose ``kind down`` removes a shared
#: network once they see it unused, even while this one's ``kind up`` is about to join it.
NETWORK = os.environ.get("POWERCUT_TEST_KIND_NETWORK", "kind")
POWERCUT = [sys.executable, "-m", "harness.cli"]


def powercut(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*POWERCUT, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"powercut {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def docker(*args: str, timeout: float = 60) -> str:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=True
    ).stdout


def wait_for(what: str, fn: Callable[[], Any], timeout_s: float, every_s: float = 1.0) -> Any:
    """Poll ``fn`` until it returns something truthy; fail naming what and the last value."""
    return poll_until(what, fn, timeout_s, every_s)


@dataclass
class KindCluster:
    name: str
    state_dir: Path
    inventory_path: Path
    client: KubeClient
    base_port: int
    up_output: str
    #: Why the cluster could not be put back after a test, if it could not: every test after
    #: it fails at once saying so, instead of each waiting out the restore's timeouts again.
    broken: str | None = None

    def workers(self) -> list[str]:
        return [f"{self.name}-worker", f"{self.name}-worker2"]

    def driver(self, node: str) -> KindDriver:
        return KindDriver(node, timeout_s=120)

    def ready(self, node: str) -> str:
        n = self.client.get(f"/api/v1/nodes/{node}")
        conds = {c["type"]: c["status"] for c in n["status"].get("conditions") or []}
        return str(conds.get("Ready", "?"))

    def pods_on(self, node: str, namespace: str = "shop") -> list[dict[str, Any]]:
        items, _ = self.client.list(
            f"/api/v1/namespaces/{namespace}/pods", fieldSelector=f"spec.nodeName={node}"
        )
        return items

    def in_node(self, node: str, *cmd: str) -> str:
        return docker("exec", node, *cmd)

    def all_ready(self) -> bool:
        items, _ = self.client.list("/api/v1/nodes")
        return all(
            {c["type"]: c["status"] for c in i["status"].get("conditions") or []}.get("Ready")
            == "True"
            for i in items
        )

    def workloads_ready(self) -> bool:
        for kind, name in (
            ("deployments", "web"),
            ("statefulsets", "quorum"),
            ("deployments", "singleton"),
        ):
            st = self.client.get(f"/apis/apps/v1/namespaces/shop/{kind}/{name}")["status"]
            if st.get("readyReplicas", 0) != st.get("replicas", -1):
                return False
        ds = self.client.get("/apis/apps/v1/namespaces/shop/daemonsets/node-agent")["status"]
        return bool(ds.get("numberReady", 0) == ds.get("desiredNumberScheduled", -1))

    def restore(self) -> None:
        """Every node on, connected, kubelet running, Ready; workloads ready."""
        for node in [f"{self.name}-control-plane", *self.workers()]:
            self.driver(node).on()
        wait_for("every node Ready", self.all_ready, 180)
        wait_for("the workloads ready", self.workloads_ready, 240)


@pytest.fixture(scope="session")
def kind_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KindCluster]:
    root = tmp_path_factory.mktemp("kind")
    state = root / "state"
    inv = root / "kind.yaml"
    try:
        out = powercut(
            "kind", "up", "--workloads", "--name", NAME, "--workers", "2", "--storage", STORAGE,
            "--base-port", str(BASE_PORT), "--state-dir", str(state), "--network", NETWORK,
            "--inventory-out", str(inv),
        )  # fmt: skip
        client = KubeClient.from_kubeconfig(state / "kubeconfig", timeout_s=10)
        cluster = KindCluster(NAME, state, inv, client, BASE_PORT, out.stdout + out.stderr)
        yield cluster
        client.close()
    finally:
        powercut("kind", "down", "--state-dir", str(state), timeout=600)
        assert left_containers(NAME) == [], "kind down left containers"
        assert not state.exists()


def left_containers(cluster: str) -> list[str]:
    """The containers of kind cluster ``cluster`` that still exist. ``kind down`` stops the
    dockerd it started, so when no engine answers, read Docker's own records on disk (a
    stopped engine keeps its containers there)."""
    label = f"label=io.x-k8s.kind.cluster={cluster}"
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
    if probe.returncode == 0:
        return docker("ps", "-a", "--filter", label, "--format", "{{.Names}}").split()
    left = []
    for config in Path("/var/lib/docker/containers").glob("*/config.v2.json"):
        data = json.loads(config.read_text())
        if (data.get("Config", {}).get("Labels") or {}).get("io.x-k8s.kind.cluster") == cluster:
            left.append(str(data.get("Name", config.parent.name)))
    return left


@pytest.fixture
def cluster(kind_cluster: KindCluster, request: pytest.FixtureRequest) -> Iterator[KindCluster]:
    """The session's cluster, put back (every node up and Ready) after each test."""
    if kind_cluster.broken:
        pytest.fail(f"the kind cluster is broken: {kind_cluster.broken}")
    yield kind_cluster
    try:
        kind_cluster.restore()
    except (Exception, pytest.fail.Exception) as exc:
        kind_cluster.broken = f"not restored after {request.node.name}: {exc}"
        raise


def serving(pod: dict[str, Any]) -> bool:
    """Running, Ready and not being deleted."""
    if pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") != "Running":
        return False
    conds = {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}
    return conds.get("Ready") == "True"


def node_of(pods: list[dict[str, Any]]) -> set[str]:
    return {p["spec"].get("nodeName", "") for p in pods}


def crictl_running(cluster: KindCluster, node: str, name: str) -> list[str]:
    out = cluster.in_node(node, "crictl", "ps", "--name", name, "--state", "Running", "-o", "json")
    return [c["id"] for c in json.loads(out).get("containers") or []]


def kubelet_inhibitor(cluster: KindCluster, node: str) -> str:
    """The delay inhibitor lock the node's kubelet holds in logind (its graceful node
    shutdown armed: ``systemd-inhibit --list``), or '' when it holds none."""
    out = cluster.in_node(node, "systemd-inhibit", "--list", "--no-pager", "--no-legend")
    held = [line for line in out.splitlines() if line.split()[:1] == ["kubelet"]]
    return next((line.strip() for line in held if line.split()[-1] == "delay"), "")


def kubelet_shutdown_log(cluster: KindCluster, node: str) -> list[str]:
    """The kubelet's journal lines of this boot about its node shutdown manager."""
    out = subprocess.run(
        ["docker", "exec", node, "journalctl", "-b", "-u", "kubelet", "--no-pager", "-o", "cat"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    ).stdout
    return [line for line in out.splitlines() if "shutdown" in line.lower()][-8:]


@contextlib.contextmanager
def pod_statuses(
    cluster: KindCluster, node: str, namespace: str = "shop"
) -> Iterator[dict[str, list[dict[str, Any]]]]:
    """Every status the API server shows for the pods on ``node`` while the block runs, by
    pod name, from a watch opened before it: what a node said of its pods as it went down,
    even for pods deleted before the block ends (a terminal pod is deleted at once when the
    not-ready taint evicts it)."""
    client = cluster.client.clone()
    path = f"/api/v1/namespaces/{namespace}/pods"
    selector = f"spec.nodeName={node}"
    _, rv = client.list(path, fieldSelector=selector)
    seen: dict[str, list[dict[str, Any]]] = {}
    opened, cancels, errors = threading.Event(), [], []

    def on_open(cancel: Callable[[], None]) -> None:
        cancels.append(cancel)
        opened.set()

    def watch() -> None:
        try:
            for ev in client.watch(
                path, resource_version=rv, on_open=on_open, fieldSelector=selector
            ):
                if ev.type in ("ADDED", "MODIFIED", "DELETED"):
                    name = ev.object["metadata"]["name"]
                    seen.setdefault(name, []).append(ev.object.get("status") or {})
        except Exception as exc:  # noqa: BLE001 (reported below unless cancelled)
            errors.append(exc)
        finally:
            opened.set()

    thread = threading.Thread(target=watch, name=f"watch pods on {node}", daemon=True)
    thread.start()
    assert opened.wait(30) and cancels, f"the watch of the pods on {node} did not open: {errors}"
    try:
        yield seen
    finally:
        cancels[0]()
        thread.join(30)
        client.close()
