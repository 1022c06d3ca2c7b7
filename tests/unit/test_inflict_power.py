"""The power disruptions as a step inflicts them (harness.scenario.acts.disruptions), through a real
Session and the fake BMCs: what each records, and what the expectations measure from."""

from __future__ import annotations

import pytest

from harness.budgets import PROFILES
from harness.checks import CheckFailed
from harness.inventory import Inventory
from harness.kube.client import KubeClient
from harness.kube.names import Act, Stage
from harness.kube.timeline import Timeline
from harness.scenario.acts import disruptions
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Targets
from harness.scenario.targets.workloads import PodInfo
from harness.session import Session
from tests.fakes.api import FakeApiServer


class _NoPods:
    def pods(self) -> list[PodInfo]:
        return []


@pytest.fixture
def client(api: FakeApiServer) -> KubeClient:
    return api.client()


def _targets(*nodes: str) -> Targets:
    return Targets(nodes, (), racks=dict.fromkeys(nodes, "rack-a"))


def test_power_off_then_on_records_each_bmc_confirmation_and_returns_where_to_measure_from(
    inventory: Inventory, client: KubeClient
) -> None:
    tl = Timeline()
    ms = Measurements()
    budgets = PROFILES["fast"]
    with Session(inventory, client=client, timeline=tl, lock=False) as session:
        outage = disruptions.power_off(session, _targets("w1", "w2"), _NoPods(), budgets, ms)  # type: ignore[arg-type]
        back = disruptions.power_on(session, _targets("w1", "w2"), budgets, ms)
    names = [m["phase"] for m in ms.items]
    assert names == [
        "w1 power-off confirmed",
        "w2 power-off confirmed",
        "power-off acknowledgement skew",
        "w1 power-on confirmed",
        "w2 power-on confirmed",
    ]
    assert {n: t.transition for n, t in outage.acks.items()} == dict.fromkeys(
        ("w1", "w2"), Act.POWER_OFF.at(Stage.ACKNOWLEDGED)
    )
    assert outage.sent.transition == Act.POWER_OFF.at(Stage.SENT)
    assert {n: t.transition for n, t in back.sent.items()} == dict.fromkeys(
        ("w1", "w2"), Act.POWER_ON.at(Stage.SENT)
    )
    assert back.restored == ()  # the Node objects were never deleted


def test_a_bmc_slower_than_its_budget_is_a_budget_overrun_naming_the_node(
    inventory: Inventory, client: KubeClient
) -> None:
    budgets = PROFILES["fast"]
    ms = Measurements()
    with Session(inventory, client=client, timeline=Timeline(), lock=False) as session:
        disruptions.power_off(session, _targets("w1"), _NoPods(), budgets, ms)  # type: ignore[arg-type]
        result = session.last_power
        assert result is not None
        result.acknowledged["w1"] = result.sent["w1"] + 1000.0  # as if it answered that late
        with pytest.raises(CheckFailed, match=r"power-on: over budget: .*w1 after") as failed:
            disruptions._confirmed(result, ["w1"], "power-on", budgets, ms)
        assert failed.value.late
        disruptions.power_on(session, _targets("w1"), budgets, Measurements())
