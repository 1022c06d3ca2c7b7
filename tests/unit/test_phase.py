"""One implementation of each phase: the same transitions, measured live (waiting on the
timeline, as the scenario's checks do) and after the fact (as longevity does), give equal
Measurements."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from harness.checks import (
    CheckFailed,
    Measurement,
    available_throughout,
    node_not_ready,
    node_ready,
    pods_evicted,
)
from harness.checks import phase as P
from harness.checks.replay import PodSnap, availability
from harness.kube.observer import NODE, POD, VOLUME_ATTACHMENT
from harness.kube.timeline import ACTION, FakeClock, Timeline, Transition
from harness.longevity.measure import measure_cycle
from tests.unit.test_longevity_measure import BUDGETS, T0, plan, standard_cycle

UNREACHABLE = "node.kubernetes.io/unreachable:NoExecute"


def _t(at: float, kind: str, name: str, what: str, ns: str = "", **detail: Any) -> Transition:
    return Transition(T0 + at, 1.7e9 + at, kind, ns, name, what, detail)


def live(ts: Sequence[Transition], phase: P.Phase, budget_s: float) -> Measurement:
    """The online path: the transitions arrive on a fake clock while the check waits."""
    clock = FakeClock(start=T0 - 1)
    tl = Timeline(clock)
    for t in ts:
        clock.call_at(t.mono, functools.partial(tl.append, t))
    return P.await_phase(tl, phase, budget_s=budget_s, expected="it", last_seen=lambda: "-")


def recorded(ts: Sequence[Transition], phase: P.Phase, budget_s: float) -> Measurement:
    """The offline path: the same transitions, already recorded."""
    return P.measure(phase, sorted(ts, key=lambda t: t.mono), budget_s=budget_s)


WEB = "Deployment/web"
POD_WA = PodSnap("ns", "web-a", "wa", "w1", "Running", True, False, "Deployment/web", since=T0)

TRACE = [
    _t(0, ACTION, "w1", "power-off acknowledged"),
    _t(2, POD, "other", "terminating", "ns", uid="zz", node="w2"),
    _t(3, NODE, "w2", "not-ready", status="Unknown"),
    _t(8.5, NODE, "w1", "not-ready", status="Unknown", reason="NodeStatusUnknown"),
    _t(9, NODE, "w1", "taint-added", taint="node.kubernetes.io/not-ready:NoExecute"),
    _t(9.5, NODE, "w1", "taint-added", taint=UNREACHABLE),
    _t(20, POD, "web-a", "terminating", "ns", uid="wa", node="w1"),
    _t(21, POD, "web-a", "ready", "ns", uid="wa", node="w1", workload=WEB),
    _t(22, POD, "other", "ready", "ns", uid="zz", node="w2", workload="Deployment/other"),
    _t(24, POD, "web-b", "scheduled", "ns", uid="wb", node="w2", workload=WEB),
    _t(27, POD, "web-b", "ready", "ns", uid="wb", node="w2", workload=WEB),
    _t(31, VOLUME_ATTACHMENT, "va-1", "detached", uid="v1", node="w1", pv="pv-1"),
    _t(33, VOLUME_ATTACHMENT, "va-2", "attached", uid="v2", node="w2", pv="pv-1"),
    _t(40, NODE, "w1", "ready", status="True", reason="KubeletReady"),
    _t(41, POD, "web-a", "deleted", "ns", uid="wa", node="w1"),
]

PHASES = [
    P.node_not_ready("w1", since=T0),
    P.node_ready("w1", since=T0 + 30),
    P.taint_added("w1", UNREACHABLE, since=T0 + 8.5),
    P.pod_evicted(POD_WA, since=T0 + 9.5),
    P.pod_gone(POD_WA, since=T0 + 9.5),
    P.volume_released("pv-1", "w1", since=T0),
    P.volume_attached("pv-1", since=T0 + 31, not_on="w1"),
    P.volume_attached("pv-1", since=T0 + 31),
    # the replacement of web-a, from when web-a stopped blocking it (its Terminating)
    P.pod_ready(since=T0 + 20, namespace="ns", workload=WEB, not_on="w1", not_uids={"wa"}),
]


@pytest.mark.parametrize("phase", PHASES, ids=lambda p: p.name)
def test_live_and_recorded_give_equal_measurements(phase: P.Phase) -> None:
    online = live(TRACE, phase, 60)
    offline = recorded(TRACE, phase, 60)
    assert online == offline
    assert offline.complete and offline.duration_s > 0


def test_each_phase_ends_at_its_own_event() -> None:
    got = [recorded(TRACE, p, 60).duration_s for p in PHASES]
    assert got == pytest.approx([8.5, 10.0, 1.0, 10.5, 31.5, 31.0, 2.0, 2.0, 7.0])
    nr = recorded(TRACE, PHASES[0], 60)
    assert nr.detail == {"node": "w1", "status": "Unknown", "reason": "NodeStatusUnknown"}
    moved = recorded(TRACE, PHASES[6], 60)
    assert moved.detail == {"pv": "pv-1", "from_node": "w1", "to_node": "w2", "attachment": "va-2"}
    ready = recorded(TRACE, PHASES[8], 60)
    assert ready.detail["pod"] == "ns/web-b" and ready.detail["ready_on"] == "w2"


def test_pod_ready_is_this_pod_where_it_was_asked_for() -> None:
    """The old incarnation's Ready, or a pod on the wrong node, never ends the phase."""
    same_uid = P.pod_ready(since=T0 + 20, uid="wa")
    assert recorded(TRACE, same_uid, 60).duration_s == pytest.approx(1.0)
    assert not P.measure(P.pod_ready(since=T0 + 20, uid="wb", node="w1"), TRACE).complete
    by_name = P.pod_ready(since=T0, namespace="ns", name="web-a", not_uids={"wa"})
    assert not P.measure(by_name, TRACE).complete


def test_a_phase_that_never_ends_is_incomplete_offline_and_a_failure_online() -> None:
    phase = P.node_ready("w2", since=T0)
    offline = P.measure(phase, TRACE, until=T0 + 25)
    assert not offline.complete
    assert offline.duration_s == pytest.approx(25.0)
    assert "did not complete" in str(offline)
    assert offline.to_json()["complete"] is False
    with pytest.raises(CheckFailed) as exc:
        live(TRACE, phase, 25)
    assert exc.value.check == "node-ready"
    assert exc.value.waited_s == pytest.approx(25.0)
    assert not exc.value.late


def test_an_end_after_the_budget_is_late_online_and_over_budget_offline() -> None:
    phase = P.node_not_ready("w1", since=T0)
    offline = recorded(TRACE, phase, 5)
    assert offline.complete and not offline.within_budget
    with pytest.raises(CheckFailed) as exc:  # live: the budget ends first
        live(TRACE, phase, 5)
    assert not exc.value.late
    assert exc.value.waited_s == pytest.approx(5.0)
    done = Timeline(FakeClock(start=T0 + 60))
    done.extend(TRACE)
    with pytest.raises(CheckFailed) as exc:  # asked after the fact: it came, too late
        P.await_phase(done, phase, budget_s=5, expected="it", last_seen=lambda: "-")
    assert exc.value.late
    assert exc.value.waited_s == pytest.approx(offline.duration_s)


def test_an_end_outside_the_window_does_not_count() -> None:
    phase = P.node_not_ready("w1", since=T0)
    assert not P.measure(phase, TRACE, until=T0 + 8).complete
    assert P.measure(phase, TRACE, until=T0 + 8.5).complete
    # watched from `after`, counted from `since` (longevity: the cycle's first ack)
    late_ack = P.pod_evicted(POD_WA, since=T0 + 25, after=T0)
    assert recorded(TRACE, late_ack, 60).duration_s == 0.0
    assert not P.measure(P.pod_evicted(POD_WA, since=T0 + 25), TRACE, until=T0 + 40).complete


def test_a_pod_already_terminating_is_evicted_at_once_both_ways() -> None:
    phase = P.pod_evicted(POD_WA, since=T0, already=True)
    assert live([], phase, 1) == recorded([], phase, 1) == phase.at_once(1)
    assert phase.at_once().duration_s == 0.0


def test_slowest_is_the_longest_and_incomplete_if_any_is() -> None:
    a = Measurement("x", T0, 3.0, None)
    b = Measurement("x", T0, 2.0, None, complete=False)
    top = P.slowest("x", [a, b])
    assert top is not None and top.duration_s == 3.0 and not top.complete
    assert P.slowest("x", [a]) == Measurement("x", T0, 3.0, None, {"of": 1})
    assert P.slowest("x", []) is None


# -- a whole longevity cycle against the scenario's checks -----------------------------------


def test_longevity_cycle_and_scenario_checks_measure_the_same_phases() -> None:
    """The cycle's recorded timeline, measured by longevity (offline) and by the checks the
    Gherkin steps call (online, on a clock before any of it happened): equal Measurements."""
    c = standard_cycle()
    ts = c.tl.snapshot()
    m = measure_cycle(ts, plan())
    acks = {t.name: t for t in ts if t.transition == "power-off acknowledged"}
    ons = {t.name: t for t in ts if t.transition == "power-on acknowledged"}

    def replayed(at: Transition) -> Timeline:
        """The timeline as a step calling the check at ``at`` sees it: what came before is
        recorded, the rest arrives while it waits."""
        clock = FakeClock(start=at.mono)
        tl = Timeline(clock)
        tl.extend([t for t in ts if t.mono <= at.mono])
        for t in ts:
            if t.mono > at.mono:
                clock.call_at(t.mono, functools.partial(tl.append, t))
        return tl

    offline_nr = {x.detail["node"]: x for x in m.each["not_ready"]}
    assert set(offline_nr) == {"w-a1", "w-b1"}
    for node, ack in acks.items():
        online = node_not_ready(replayed(ack), node, since=ack, budget_s=BUDGETS.not_ready)
        assert online == offline_nr[node]
        ready = node_ready(replayed(ons[node]), node, since=ons[node], budget_s=60)
        assert m.detail["nodes"][node]["ready_after_on_s"] == round(ready.duration_s, 3)

    evac = {x.detail["pod"]: x for x in m.each["evacuation"]}
    assert set(evac) == {"lab/web-a", "lab/quorum-0"}
    for node, ack in acks.items():
        online = pods_evicted(replayed(ack), node, since=ack, budget_s=BUDGETS.evacuation)
        for pod, took in online.detail["per_pod_s"].items():
            assert round(evac[pod].duration_s, 3) == took
    assert m.phases["evacuation"] == round(max(x.duration_s for x in evac.values()), 3)

    (vol,) = m.each["volume_reattach"]
    release = next(t for t in ts if t.kind == VOLUME_ATTACHMENT and t.transition == "detached")
    online_vol = P.await_phase(
        replayed(release),
        P.volume_attached("vol-0", since=release.mono),
        budget_s=BUDGETS.volume_reattach,
        expected="vol-0 attached again",
        last_seen=lambda: "-",
    )
    assert online_vol == vol
    assert replace(vol, budget_s=None).complete


@pytest.mark.parametrize("survivor_drops", [False, True], ids=["kept", "survivor-drops"])
def test_longevity_and_the_availability_check_count_the_same_pods(survivor_drops: bool) -> None:
    """A workload's availability over the cycle: longevity's lowest and recovery (offline)
    and ``available_throughout`` (online, waiting from the first power-off acknowledgement)
    come from the one replay, :func:`~harness.checks.replay.availability`."""
    c = standard_cycle(survivor_drops=survivor_drops)
    ts = c.tl.snapshot()
    m = measure_cycle(ts, plan())
    t0 = min(t.mono for t in ts if t.transition == "power-off acknowledged")
    t_on = min(t.mono for t in ts if t.transition == "power-on acknowledged")
    cleanup = next(t.mono for t in ts if t.transition == "cleanup done")
    for key, row in m.detail["workloads"].items():
        if not row["affected"] or row["kind"] == "DaemonSet":
            continue
        ns, workload = key.split("/", 1)
        clock = FakeClock(start=t0)
        tl = Timeline(clock)
        tl.extend([t for t in ts if t.mono <= t0])
        for t in ts:
            if t.mono > t0:
                clock.call_at(t.mono, functools.partial(tl.append, t))
        online = available_throughout(tl, ns, workload, min_ready=0, start=t0, end=cleanup)
        assert online.detail["lowest"] == row["lowest"]
        offline = availability(ts, ns, workload, start=t0, until=cleanup)
        assert (offline.initial, offline.lowest()[1]) == (online.detail["initial"], row["lowest"])
        if row["from"] == "power-on":
            back = offline.first_at_least(row["baseline"], since=t_on)
            assert (None if back is None else round(back - t_on, 3)) == row["recovery_s"]
    quorum = m.detail["workloads"]["lab/StatefulSet/quorum"]
    assert quorum["lowest"] == (1 if survivor_drops else 2)
    assert (quorum["recovery_s"] is None) == survivor_drops  # quorum-1 never Ready again
