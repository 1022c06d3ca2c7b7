"""A reboot means one span everywhere: the steps' outage (what "NotReady within" measures
from), longevity's measurements and the SLO chart's band all read where a rebooted node went
down and came back through :func:`harness.kube.names.downs`, from what a real Session
records through the fake BMCs. Should one of them read the timeline its own way again (the
chart and longevity once measured a reboot from the cycle's request, the steps from its
power-off), this fails naming which."""

from __future__ import annotations

import pytest

from harness.inventory import Inventory
from harness.kube.client import KubeClient
from harness.kube.names import Act, Stage
from harness.kube.observer import NODE
from harness.kube.timeline import ACTION, Timeline, Transition
from harness.longevity.groups import Group
from harness.longevity.measure import CyclePlan, measure_cycle
from harness.longevity.records import PhaseBudgets
from harness.report import slo_chart
from harness.scenario.acts import disruptions
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Targets
from harness.scenario.targets.workloads import PodInfo
from harness.session import Session
from tests.fakes.api import FakeApiServer

BUDGETS = PhaseBudgets(
    not_ready=20, evacuation=55, recovery=85, service_outage=25, volume_reattach=20, cleanup=90
)


class _NoPods:
    def pods(self) -> list[PodInfo]:
        return []


@pytest.fixture
def client(api: FakeApiServer) -> KubeClient:
    return api.client()


@pytest.mark.parametrize(
    ("nodes", "down_at"),
    [
        # several nodes: one synchronized cycle, down from its power-off's acknowledgement
        (("w1", "w2"), Act.POWER_CYCLE_OFF.at(Stage.ACKNOWLEDGED)),
        # one node: the BMC's own reset, which has no power-off of its own: its request
        (("w1",), Act.POWER_CYCLE.at(Stage.SENT)),
    ],
)
def test_the_steps_longevity_and_the_slo_chart_measure_a_reboot_from_the_same_moment(
    inventory: Inventory, client: KubeClient, nodes: tuple[str, ...], down_at: str
) -> None:
    tl = Timeline()
    with Session(inventory, client=client, timeline=tl, lock=False) as session:
        for n in nodes:  # as a cycle's timeline starts: the nodes seen Ready
            tl.record(NODE, n, "observed", detail={"ready": "True", "taints": []})
        rebooted = disruptions.reboot(
            session,
            Targets(nodes, (), racks=dict.fromkeys(nodes, "rack-a")),
            _NoPods(),  # type: ignore[arg-type]
            Measurements(),
        )
    for n in nodes:  # Kubernetes noticed afterwards
        tl.record(NODE, n, "not-ready", detail={"ready": "Unknown"})
    actions = [t for t in tl.snapshot() if t.kind == ACTION]

    # the steps: what "the node is NotReady within" measures from
    steps: dict[str, Transition] = dict(rebooted.outage.acks)
    assert {n: t.transition for n, t in steps.items()} == dict.fromkeys(nodes, down_at)

    # longevity: each node's not_ready starts where it went down
    measured = measure_cycle(tl.snapshot(), CyclePlan(1, Group("g", nodes), (), (), BUDGETS))
    longevity = {m.detail.get("node", m.name): m.started_mono for m in measured.each["not_ready"]}
    assert len(longevity) == len(nodes), measured.each["not_ready"]
    started = sorted(longevity.values())
    assert started == sorted(steps[n].mono for n in nodes), "longevity reads another start"
    assert measured.detail["power"]["off_at"] == min(t.wall for t in steps.values())

    # the SLO chart: each node's band from where it went down to where it was back
    recorded = [{"wall": t.wall, "name": t.name, "transition": t.transition} for t in actions]
    end = max(t.wall for t in actions) + 100.0
    bands = {n: (since, until) for n, since, until in slo_chart._phases(recorded, end)}
    assert set(bands) == set(nodes)
    for n in nodes:
        since, until = bands[n]
        assert since == steps[n].wall, f"the chart's band of {n} starts elsewhere"
        assert until == rebooted.back.acks[n].wall, f"the chart's band of {n} ends elsewhere"
        assert since <= until
