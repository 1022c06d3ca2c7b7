"""SLOs against the lab's real Prometheus: it scrapes the API servers and the lab's
exporter, the lab's inventory names it, its SLOs hold on a quiet cluster, and a stop
condition that breaches aborts a scenario blocked in a wait and puts the node back."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from harness.inventory import load_inventory
from harness.journal import Journal
from harness.kube.timeline import match
from harness.power.base import PowerState
from harness.power.factory import driver_for
from harness.session import Session, StoppedByCondition, journal_path_for
from harness.slo.client import PrometheusClient
from harness.slo.evaluate import evaluate_alert, evaluate_slo
from tests.lab.conftest import LabHandle, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.disruptive, pytest.mark.needs_bmc]
VICTIM = "w-c2"


def power(lab: LabHandle, node: str = VICTIM) -> PowerState:
    d = driver_for(lab.inventory.node(node), "redfish")
    try:
        return d.state()
    finally:
        d.close()


def node_ready(lab: LabHandle, node: str = VICTIM) -> bool:
    conds = lab.client.get(f"/api/v1/nodes/{node}")["status"]["conditions"]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


@pytest.fixture
def prometheus(lab: LabHandle) -> PrometheusClient:
    assert lab.inventory.prometheus is not None, "lab up wrote no prometheus section"
    return PrometheusClient(lab.inventory.prometheus)


def test_the_lab_prometheus_scrapes_api_servers_probes_and_power(
    lab: LabHandle, prometheus: PrometheusClient
) -> None:
    def api_servers_up() -> list[str] | None:
        up = sorted(s.labels["node"] for s in prometheus.query('up{job="apiserver"} == 1'))
        return up if len(up) == 3 else None  # each is scraped every 5 s, at its own offset

    assert wait_for("three API servers scraped", api_servers_up, 60) == ["cp-1", "cp-2", "cp-3"]
    power_on = prometheus.query("powercut_lab_node_power_on")
    assert {s.labels["node"] for s in power_on} == set(lab.inventory.node_names())
    expected = {"web": 1.0, "quorum": 1.0, "registry": 1.0}

    def services() -> dict[str, float]:
        return {
            s.labels["service"]: s.points[-1][1] for s in prometheus.query("powercut_service_up")
        }

    # An earlier lab test may have powered a service's only node off: its probe reads 0 until
    # the service is back, so wait for every probe to be scraped up (the test fails if the
    # exporter or the scrape never shows them).
    wait_for("every service probe scraped up", lambda: services() == expected, 120)
    assert prometheus.query("sum(apiserver_request_total)")[0].points[0][1] > 0
    assert set(prometheus.alert_rules()) == {
        "LabAPIServerDown",
        "LabAPIQuorumLost",
        "LabServiceDown",
    }


def test_the_inventory_slos_hold_on_a_quiet_lab(
    lab: LabHandle, prometheus: PrometheusClient
) -> None:
    wait_for(
        "30 s of data",
        lambda: prometheus.query('count_over_time(up{job="apiserver"}[30s]) >= 5'),
        60,
    )
    end = time.time()
    for slo in lab.inventory.slos:
        result = evaluate_slo(prometheus, slo, end - 30, end)
        assert result.held, result.message()
    for alert in lab.inventory.alerts:
        assert evaluate_alert(prometheus, alert, end - 30, end).held


def test_a_stop_condition_breach_aborts_the_scenario_and_restores_the_node(
    lab: LabHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inventory of the lab, plus a stop condition that breaches the moment the victim
    is powered off. The scenario powers it off and then waits for something that never
    comes: the stop must end that wait, power the node back on and leave nothing owed."""
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    wait_for(f"{VICTIM} Ready", lambda: node_ready(lab), 90)
    doc = yaml.safe_load(lab.inventory_path.read_text())
    doc["slos"].append(
        {
            "name": "victim-powered",
            "expr": f'min(powercut_lab_node_power_on{{node="{VICTIM}"}})',
            "comparison": ">=",
            "threshold": 1,
            "step": "1s",
        }
    )
    doc["stop_conditions"].append({"slo": "victim-powered"})
    path = tmp_path / "lab-with-stop.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    inventory = load_inventory(path)
    said: list[str] = []
    budgets = inventory.timing_budgets()
    with (
        pytest.raises(StoppedByCondition) as info,
        Session(inventory, client=lab.client, keep_on_failure=True, say=said.append) as s,
    ):
        s.power_off([VICTIM])
        assert power(lab) is PowerState.OFF
        # a step waiting for something that never happens, far longer than the stop takes
        deadline = time.monotonic() + budgets.recovery
        s.timeline.wait_for(match(kind="Never"), deadline, "something that never happens")
    assert info.value.condition == "SLO victim-powered"
    assert f'node="{VICTIM}"' in info.value.detail
    assert power(lab) is PowerState.ON, "the stop did not power the node back on"
    assert [e for e in Journal.read(journal_path_for(inventory)) if e.owes_undo] == []
    assert any("STOP: stopped by SLO victim-powered" in line for line in said)
    wait_for(f"{VICTIM} Ready again", lambda: node_ready(lab), budgets.recovery)
