"""The chaostoolkit probes against the fake cluster: they return what they see (a value a
tolerance can judge) and log why, and raise only for bad input."""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.chaos import actions, probes
from harness.errors import ConfigError
from tests.fakes.api import set_ready, volume_attachment
from tests.fakes.chaos import Cluster, fake_cluster


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with fake_cluster(tmp_path, monkeypatch) as c:
        yield c


def not_ready(cluster: Cluster, namespace: str, name: str) -> None:
    cluster.api.update("pods", namespace, name, lambda p: set_ready(p, False))


def test_node_ready(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    assert probes.node_ready("w1") is True
    cluster.api.update("nodes", "", "w1", lambda n: set_ready(n, "Unknown"))
    with caplog.at_level(logging.WARNING, logger="chaostoolkit"):
        assert probes.node_ready("w1") is False
    assert "node w1: Ready=Unknown" in caplog.text


def test_node_ready_within_waits_for_it(cluster: Cluster) -> None:
    cluster.api.update("nodes", "", "w2", lambda n: set_ready(n, "Unknown"))
    # the extension waits on the real clock (chaostoolkit calls it by name: no clock to give)
    timer = threading.Timer(  # noqa: TID251
        0.2, lambda: cluster.api.update("nodes", "", "w2", lambda n: set_ready(n, "True"))
    )
    timer.start()
    try:
        assert probes.node_ready("w2", within="5s") is True
    finally:
        timer.cancel()


def test_workload_available_checks_every_critical_workload(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    assert probes.workload_available() is True
    not_ready(cluster, "shop", "db-0")  # db is not critical: logged, not counted
    assert probes.workload_available() is True
    not_ready(cluster, "shop", "web-abc-1")
    assert probes.workload_available() is True  # 2 of 3, min_available 2
    not_ready(cluster, "shop", "web-abc-2")
    with caplog.at_level(logging.INFO, logger="chaostoolkit"):
        assert probes.workload_available() is False
    assert "Deployment shop/web: 1 of 2 ready" in caplog.text
    assert "StatefulSet shop/db (not critical)" in caplog.text


def test_workload_available_for_one_workload(cluster: Cluster) -> None:
    assert probes.workload_available(namespace="shop", kind="Deployment", name="web")
    assert not probes.workload_available(
        namespace="shop", kind="Deployment", name="web", min_available=4
    )
    assert probes.workload_available(
        namespace="shop", kind="Deployment", selector="pod-template-hash=abc", min_available=3
    )
    assert not probes.workload_available(namespace="shop", kind="Deployment", name="nope")


def test_workload_available_refuses_half_a_workload(cluster: Cluster) -> None:
    with pytest.raises(ConfigError, match="give name or selector"):
        probes.workload_available(namespace="shop")


def test_pods_on_node(cluster: Cluster) -> None:
    assert probes.pods_on_node("w2") == 2
    assert probes.pods_on_node("w2", include_daemonsets=True) == 3
    assert probes.pods_on_node("w2", namespace="other") == 0
    cluster.api.update(
        "pods",
        "shop",
        "db-0",
        lambda p: p["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z"),
    )
    assert probes.pods_on_node("w2") == 1


def test_volume_attached_to(cluster: Cluster) -> None:
    cluster.api.add(
        "persistentvolumeclaims",
        {"metadata": {"name": "data-db-0", "namespace": "shop"}, "spec": {"volumeName": "pv-1"}},
    )
    cluster.api.add("volumeattachments", volume_attachment("va-1", "w2", "pv-1", attached=True))
    assert probes.volume_attached_to(pvc="data-db-0", namespace="shop") == "w2"
    assert probes.volume_attached_to(pv="pv-1", not_on="w2") == ""
    assert probes.volume_attached_to(pv="pv-2") == ""
    with pytest.raises(ConfigError, match="give pvc"):
        probes.volume_attached_to()


def test_volume_attached_to_within_waits_for_the_attachment(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.api.add("volumeattachments", volume_attachment("va-3", "w1", "pv-3"))
    with caplog.at_level(logging.INFO, logger="chaostoolkit"):
        assert probes.volume_attached_to(pv="pv-3", within="0.2s") == ""
    assert "va-3 node=w1 attached=False" in caplog.text

    def attach(va: dict[str, object]) -> None:
        va["status"] = {"attached": True}

    # the extension waits on the real clock (chaostoolkit calls it by name: no clock to give)
    timer = threading.Timer(  # noqa: TID251
        0.2, lambda: cluster.api.update("volumeattachments", "", "va-3", attach)
    )
    timer.start()
    try:
        assert probes.volume_attached_to(pv="pv-3", within="5s") == "w1"
        assert probes.volume_attached_to(pv="pv-3", not_on="w1", within="0.2s") == ""
    finally:
        timer.cancel()


def test_power_state_and_disruptions_owed(cluster: Cluster) -> None:
    assert probes.power_state("w1") == "on"
    assert probes.disruptions_owed() == 0
    actions.power_off_nodes(nodes="w1")
    assert probes.power_state("w1") == "off"
    assert probes.disruptions_owed() == 1
    actions.partition_node("w2")
    assert probes.power_state("w2") == "on"  # cut off the network, still powered
    actions.recover()
    assert probes.disruptions_owed() == 0


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def health() -> Iterator[tuple[str, type[_Health]]]:
    handler = type("Health", (_Health,), {"status": 200})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/healthz", handler
    finally:
        server.shutdown()
        server.server_close()


def test_service_healthy_once(
    cluster: Cluster, health: tuple[str, type[_Health]], caplog: pytest.LogCaptureFixture
) -> None:
    url, handler = health
    assert probes.service_healthy(url=url) is True
    handler.status = 503
    with caplog.at_level(logging.WARNING, logger="chaostoolkit"):
        assert probes.service_healthy(url=url) is False
    assert "status=503" in caplog.text or "503" in caplog.text


def test_service_healthy_over_a_window(cluster: Cluster, health: tuple[str, type[_Health]]) -> None:
    url, handler = health
    assert probes.service_healthy(url=url, window="0.6s") is True
    handler.status = 500
    assert probes.service_healthy(url=url, window="0.6s", max_outage="0.2s") is False


def test_service_healthy_without_endpoints(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="chaostoolkit"):
        assert probes.service_healthy() is True
    assert "nothing to probe" in caplog.text
    with pytest.raises(ConfigError, match="workload 'web' has no health endpoint"):
        probes.service_healthy(workload="web")
