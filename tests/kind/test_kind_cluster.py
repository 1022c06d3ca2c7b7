"""A real kind cluster from the node image built here with no registry (tests/kind)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from harness.kindlab import versions as v
from tests.kind.conftest import KindCluster

pytestmark = [pytest.mark.kind, pytest.mark.slow]


def test_nodes_ready_in_their_racks(kind_cluster: KindCluster) -> None:
    items, _ = kind_cluster.client.list("/api/v1/nodes")
    zones = {
        i["metadata"]["name"]: i["metadata"]["labels"].get("topology.kubernetes.io/zone")
        for i in items
    }
    assert zones == {
        f"{kind_cluster.name}-control-plane": "rack-a",
        f"{kind_cluster.name}-worker": "rack-a",
        f"{kind_cluster.name}-worker2": "rack-b",
    }
    assert kind_cluster.all_ready()
    versions = {i["status"]["nodeInfo"]["kubeletVersion"] for i in items}
    assert versions == {v.KUBERNETES}


def test_every_image_the_nodes_run_was_built_here(kind_cluster: KindCluster) -> None:
    """No pod of any namespace runs an image from a registry: all are powercut.local's,
    imported into the node image; and none was pulled."""
    pods, _ = kind_cluster.client.list("/api/v1/pods")
    images = {c["image"] for p in pods for c in p["spec"]["containers"]}
    assert images and all(i.startswith(f"{v.REPO}/") for i in images), images
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    assert len(running) == len(pods), [
        (p["metadata"]["name"], p["status"].get("phase")) for p in pods
    ]
    events, _ = kind_cluster.client.list("/api/v1/events", fieldSelector="reason=Pulling")
    assert events == []
    node = f"{kind_cluster.name}-worker"
    out = json.loads(kind_cluster.in_node(node, "crictl", "images", "-o", "json"))
    tags = {t for img in out["images"] for t in img.get("repoTags") or []}
    assert tags and all(t.startswith(f"{v.REPO}/") for t in tags), tags


def test_workloads_answer_http_from_the_host(kind_cluster: KindCluster) -> None:
    for offset, app in ((80, "web"), (81, "quorum"), (82, "singleton")):
        url = f"http://127.0.0.1:{kind_cluster.base_port + offset}/readyz"
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200, (app, resp.status)
        with urllib.request.urlopen(url.replace("/readyz", "/"), timeout=10) as resp:  # noqa: S310
            assert resp.read().decode().startswith(app + "-"), app


def test_status_and_inventory(kind_cluster: KindCluster) -> None:
    from harness.inventory import load_inventory
    from tests.kind.conftest import powercut

    out = powercut("kind", "status", "--json", "--state-dir", str(kind_cluster.state_dir))
    st = json.loads(out.stdout)
    assert st["api"] == "serving"
    assert set(st["containers"].values()) == {"running"}
    inv = load_inventory(kind_cluster.inventory_path)
    assert [n.power.driver for n in inv.nodes] == ["kind"] * 3
    assert {w.name for w in inv.workloads} == {"web", "quorum", "singleton", "node-agent"}
