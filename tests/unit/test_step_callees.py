"""The harness.scenario functions the steps call, without Gherkin (issue 21, item 3).

What used to sit in step bodies (a protocol the node does not offer, the drain's verdicts,
a member that never went Terminating, nothing critical to probe, a control-plane node
without its own API endpoint) is a typed function now; each "nothing to act on" case is a
skip (:class:`NotApplicable`) or a harness error, decided before anything acts or waits.
No cluster, no real time: a timeline on a fake clock.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from harness.checks import CheckFailed
from harness.errors import ConfigError
from harness.kube.actions import DrainResult
from harness.kube.names import Change, Kind
from harness.kube.timeline import ACTION, FakeClock, Timeline
from harness.scenario.acts import role_failures
from harness.scenario.errors import NothingToMeasure, UnsupportedKind
from harness.scenario.expectations import availability, operator_results, statefulset_members
from harness.scenario.expectations.apiprobe import own_api_ready_after
from harness.scenario.report import Measurements
from harness.scenario.targets import subjects
from harness.scenario.targets.choice import Outage, Targets
from harness.scenario.targets.workloads import PodInfo, Workload

WEB = PodInfo("lab", "web-1", "uid-web-1", "w1", "Deployment/web", ())
DB = PodInfo("lab", "quorum-0", "uid-q0", "w1", "StatefulSet/quorum", ("pv-q0",))
AGENT = PodInfo("lab", "agent-x", "uid-agent", "w1", "DaemonSet/agent", ())
WORKLOADS = (
    Workload("lab", "Deployment", "web", 3, {}, False, True, 1, None),
    Workload("lab", "StatefulSet", "quorum", 3, {}, True, True, 2, None),
)


class Untouchable:
    """A session that fails the test if anything acts through it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"acted through the session ({name}) before deciding")


def _outage(tl: Timeline, lost: tuple[PodInfo, ...]) -> Outage:
    sent = tl.record(ACTION, "w1", "power-off sent")
    ack = tl.record(ACTION, "w1", "power-off acknowledged")
    targets = Targets(("w1",), tuple(p for p in lost if p is not AGENT), (AGENT,))
    return Outage(targets, lost, sent, {"w1": ack}, "", False, 0.0)


def test_a_protocol_the_node_does_not_offer_is_a_skip_before_anything_acts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(role_failures, "available_protocols", lambda node: ["redfish", "ssh"])
    inventory = SimpleNamespace(node=lambda name: SimpleNamespace(name=name))
    with pytest.raises(UnsupportedKind, match=r"w1 has no ipmi power control \(redfish, ssh\)"):
        role_failures.power_off_through(
            Untouchable(),  # type: ignore[arg-type]
            inventory,  # type: ignore[arg-type]
            Targets(("w1",), ()),
            Untouchable(),  # type: ignore[arg-type]
            Untouchable(),  # type: ignore[arg-type]
            Measurements(),
            "ipmi",
        )


def test_the_drain_must_have_evicted_every_pod_and_the_observer_seen_each_gone() -> None:
    tl = Timeline(FakeClock())
    targets = Targets(("w1",), (WEB, DB))
    drained = DrainResult("w1", ("lab/web-1",), {}, 1, 0.5)
    with pytest.raises(CheckFailed, match="not evicted: lab/quorum-0"):
        operator_results.evicted_all(drained, targets, tl)
    both = DrainResult("w1", ("lab/web-1", "lab/quorum-0"), {}, 2, 0.5)
    tl.record(Kind.POD, "web-1", Change.DELETED, namespace="lab", detail={"uid": WEB.uid})
    # quorum-0 never seen deleted: the fake clock runs out the observer's lag at once
    with pytest.raises(CheckFailed, match="still there: lab/quorum-0"):
        operator_results.evicted_all(both, targets, tl)
    tl.record(Kind.POD, "quorum-0", Change.DELETED, namespace="lab", detail={"uid": DB.uid})
    operator_results.evicted_all(both, targets, tl)


def test_daemon_pods_the_drain_did_not_skip_fail_and_none_is_a_skip() -> None:
    observer = SimpleNamespace(pod=lambda ns, name: None)
    drained = DrainResult("w1", (), {}, 0, 0.1)
    with pytest.raises(NothingToMeasure, match="no DaemonSet pod ran on w1"):
        operator_results.daemon_pods_left(drained, Targets(("w1",), ()), observer)  # type: ignore[arg-type]
    with pytest.raises(CheckFailed, match="the drain to skip lab/agent-x"):
        operator_results.daemon_pods_left(drained, Targets(("w1",), (), (AGENT,)), observer)  # type: ignore[arg-type]


def test_a_member_that_never_went_terminating_fails_at_once() -> None:
    tl = Timeline(FakeClock())
    clock_before = tl.clock.monotonic()
    with pytest.raises(CheckFailed, match="lab/quorum-0 Terminating first"):
        statefulset_members.stay_terminating(tl, (DB,), 60.0, Measurements())
    assert tl.clock.monotonic() == clock_before  # no wait at all


def test_the_lost_pods_a_step_is_about_and_the_members() -> None:
    tl = Timeline(FakeClock())
    outage = _outage(tl, (WEB, DB, AGENT))
    every = subjects.about(outage, None, WORKLOADS, step="Then x", plural="Then y")
    assert every == (WEB, DB)  # the DaemonSet pod is not replaced elsewhere
    assert subjects.replaced_elsewhere(outage, stateless_only=True) == (WEB,)
    assert subjects.members(outage, WORKLOADS) == (DB,)
    with pytest.raises(
        NothingToMeasure, match=r"no StatefulSet member ran on the lost nodes \(w1\)"
    ):
        subjects.members(_outage(tl, (WEB,)), WORKLOADS)


def test_no_critical_workload_with_a_health_endpoint_is_nothing_to_judge() -> None:
    tl = Timeline(FakeClock())
    baseline = SimpleNamespace(workloads=WORKLOADS, at_mono=0.0)
    with pytest.raises(NothingToMeasure, match=r"workloads\[\]\.health"):
        availability.services_available(tl, baseline, 10.0, Measurements())  # type: ignore[arg-type]


def test_a_node_api_check_needs_a_control_plane_node_with_its_own_endpoint() -> None:
    tl = Timeline(FakeClock())
    since = tl.record(ACTION, "cp-1", "power-on sent")
    nodes = {
        "w1": SimpleNamespace(name="w1", role="worker", api_endpoint=None),
        "cp-1": SimpleNamespace(name="cp-1", role="control-plane", api_endpoint=None),
    }
    inventory = SimpleNamespace(node=nodes.__getitem__, source="lab.yaml")
    kube: Any = Untouchable()
    with pytest.raises(ConfigError, match="no control-plane node was powered on"):
        own_api_ready_after(kube, inventory, ["w1"], tl, since, 5.0, Measurements())  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as err:
        own_api_ready_after(kube, inventory, ["w1", "cp-1"], tl, since, 5.0, Measurements())  # type: ignore[arg-type]
    assert err.value.field == "nodes[cp-1].api_endpoint"
