"""The HA control plane: losing one of three control-plane nodes must not stop the API."""

from __future__ import annotations

import datetime as dt
import functools
import json
import socket
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


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def lease_age_s(lab: LabHandle, name: str) -> float:
    """Seconds since the leader of ``name`` last renewed its lease (server clock = ours)."""
    lease = lab.client.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}")
    renewed = dt.datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))
    return (dt.datetime.now(dt.UTC) - renewed).total_seconds()


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
        # Power off stops every process of the node, not only its heartbeats.
        for what, port in (
            ("kube-apiserver", ports.apiserver(1)),
            ("kube-controller-manager", ports.controller_manager(1)),
            ("kube-scheduler", ports.scheduler(1)),
        ):
            assert not listening(port), f"cp-2's {what} still listens on {port}"
        t_off = time.monotonic()
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
        # Leader election: whichever member led, a leader keeps renewing. A lease lapses
        # after its duration, so a fresh renewal after that proves a survivor leads.
        lease_s = spec.timing.leader_lease_s
        time.sleep(max(0.0, lease_s + 1 - (time.monotonic() - t_off)))
        for lease in ("kube-controller-manager", "kube-scheduler"):
            wait_for(
                f"a live {lease} leader",
                functools.partial(
                    lambda n: lease_age_s(lab, n) < spec.timing.leader_retry_s + 3, lease
                ),
                3 * lease_s,
            )
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
        wait_for("cp-2's kube-apiserver serving", lambda: listening(ports.apiserver(1)), 60)
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
