"""The HA control plane: losing one of three control-plane nodes must not stop the API."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from harness.errors import PowercutError
from harness.lab.spec import LabSpec
from harness.power.base import PowerState
from harness.power.factory import driver_for
from tests.lab.conftest import LabHandle, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.disruptive, pytest.mark.needs_bmc, pytest.mark.slow]


def etcd_healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return bool(json.load(r).get("health") == "true")
    except OSError:
        return False


def test_losing_one_control_plane_keeps_the_api(lab: LabHandle) -> None:
    spec = LabSpec.load(lab.state_dir)
    assert spec.control_planes == 3
    ports = spec.ports
    cp = lab.inventory.node("cp-2")
    driver = driver_for(cp, None, timeout_s=30)
    try:
        assert all(etcd_healthy(ports.etcd_client(i)) for i in range(3))
        driver.off(graceful=False)
        assert driver.state() is PowerState.OFF
        assert not etcd_healthy(ports.etcd_client(1)), "cp-2's etcd member still answers"
        # Through the load balancer, every request during the outage must succeed, writes too.
        failures: list[str] = []
        deadline = time.monotonic() + 15
        i = 0
        while time.monotonic() < deadline:
            try:
                lab.client.list("/api/v1/nodes")
                lab.client.create(
                    "/api/v1/namespaces/default/configmaps",
                    {"metadata": {"name": f"ha-probe-{i}"}, "data": {"i": str(i)}},
                )
            except PowercutError as exc:
                failures.append(str(exc))
            i += 1
            time.sleep(0.1)
        assert not failures, f"{len(failures)} of {i} API calls failed: {failures[:3]}"
        assert etcd_healthy(ports.etcd_client(0)) and etcd_healthy(ports.etcd_client(2))
        wait_for(
            "cp-2 NotReady",
            lambda: any(
                c["type"] == "Ready" and c["status"] == "Unknown"
                for c in lab.client.get("/api/v1/nodes/cp-2")["status"]["conditions"]
            ),
            spec.timing.node_monitor_grace_s + 15,
        )
        driver.on()
        wait_for("cp-2's etcd member rejoined", lambda: etcd_healthy(ports.etcd_client(1)), 60)
        wait_for(
            "cp-2 Ready",
            lambda: any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in lab.client.get("/api/v1/nodes/cp-2")["status"]["conditions"]
            ),
            60,
        )
    finally:
        if driver.state() is not PowerState.ON:
            driver.on()
        driver.close()
        for j in range(400):
            try:
                lab.client.delete(f"/api/v1/namespaces/default/configmaps/ha-probe-{j}")
            except PowercutError:
                break
