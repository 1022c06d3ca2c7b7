"""The composition rule, for every Then of the grammar (issue 12).

1. For each When, every Then placed after it (a Given having chosen the nodes): the Then
   either has what it needs from the steps before it, or is stopped before it waits or acts
   by a harness error naming the step it needs (never a product failure).
2. Every Then that measures from something the cluster does (not from the harness's own
   action) waits for that start event: shown on a fake timeline where the start arrives
   late (the Then waits, and measures from it); and a start that never comes fails naming
   the start it waited for.
3. Every Then of the grammar is accounted for in one of these kinds, so a new Then must
   say which it is.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from pytest_bdd.steps import step_function_context_registry

import harness.steps.plugin  # noqa: F401 - registers every step module
from harness.budgets import PROFILES
from harness.checks import CheckFailed
from harness.kube.timeline import ACTION, FakeClock, Timeline, Transition
from harness.scenario.errors import MissingStep
from harness.scenario.expectations import phases, start_events, volumes
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage, Targets
from harness.scenario.targets.workloads import PodInfo
from harness.steps import fixtures
from harness.steps.support.limits import parse_limit

UNREACHABLE = "node.kubernetes.io/unreachable:NoExecute"
_FIELD = re.compile(r"\{(\w+)(?::[^}]*)?\}")

# -- 3. every Then, by what it measures from --------------------------------------------------

#: Measures from a start event the cluster produces, which it waits for: the test below
#: that shows it waiting for a late start.
WAITS_FOR_A_CLUSTER_START = {
    "nodes_tainted_unreachable": "test_the_taint_waits_for_a_late_not_ready",
    "pods_terminating": "test_eviction_waits_for_a_late_taint",
    "subject_terminating": "test_eviction_waits_for_a_late_taint",
    "lost_pods_rescheduled": "test_rescheduling_waits_for_a_late_eviction",
    "lost_pods_replaced_ready": "test_rescheduling_waits_for_a_late_eviction",
    "lost_stateless_pods_replaced_ready": "test_rescheduling_waits_for_a_late_eviction",
    "replacements_ready": "test_ready_waits_for_a_late_replacement_and_its_volume",
    "lost_volumes_multi_attach": "test_multi_attach_waits_for_a_late_replacement",
    "node_releases_volumes": "test_release_waits_for_a_late_pod_deletion",
    "lost_volumes_reattached": "test_reattachment_waits_for_a_late_release",
}
#: Measures from the harness's own acknowledged action, which the When that provides its
#: fixture recorded before it returned (the fixture is the start); waits for its end event.
FROM_ITS_WHEN = {
    "nodes_not_ready": "outage: the power-off acknowledgement",
    "daemon_pods_not_ready": "outage: the power-off acknowledgement",
    "nodes_ready_again": "powered_on: the power-on request",
    "daemon_pods_ready_again": "powered_on: the power-on request",
    "member_recreated": "powered_on: the power-on request",
    "api_fully_ready": "powered_on: the power-on request",
    "node_api_ready": "powered_on: the power-on request",
    "lost_pods_deleted": "resolution: the operator action",
    "node_object_gone": "resolution: the delete request",
    "out_of_service_taint_gone": "the removal request (else MissingStep names the When)",
    "pods_lose_io": "outage: the storage cut's acknowledgement",
    "restarted_pods_ready": "restarted: the restart request",
    "job_completes": "rerun: the Job's re-creation",
    "drain_evicted_all": "drained: the drain's result",
    "drain_left_daemon_pods": "drained: the drain's result",
    "drain_respected_pdbs": "drained: the drain's start and end",
    "no_disruption_left": "chaos_run: the experiment's journal",
    "every_cycle_recovered": "longevity_run: the run's records",
    "every_cycle_within_budgets": "longevity_run: the run's records",
    "no_cycle_missed": "longevity_run: the run's records",
    "statistics_attached": "longevity_run: the run's records",
}
#: Judges a window (from the failure, or the scenario's start, until now): no start to wait
#: for; or waits for a state, not an event.
WINDOW = {
    "critical_workloads_kept",
    "api_answered",
    "etcd_kept_quorum",
    "services_available",
    "statefulset_quorum_kept",
    "no_second_member",
    "daemon_pods_not_evicted",
    "member_stays_terminating",
    "node_still_holds_volumes",  # no release of a held volume from the failure until now
    "node_stays_ready",  # no NotReady from the failure for the limit, waited out
    "back_to_steady_state",
    "alerts_quiet",
    "every_slo_held",
    "slo_held",
    "tokens_read_back",  # waits, within its limit, for a pod holding each volume to read it
    "tokens_moved",  # judges where tokens_read_back read each token: no wait
}


def _contexts(kind: str) -> list[Any]:
    return [
        c
        for c in step_function_context_registry.values()
        if c.type == kind and c.step_func.__module__.startswith("harness.steps")
    ]


def test_every_then_of_the_grammar_is_accounted_for() -> None:
    thens = {c.step_func.__name__ for c in _contexts("then")}
    kinds = set(WAITS_FOR_A_CLUSTER_START) | set(FROM_ITS_WHEN) | WINDOW
    assert thens - kinds == set(), "say what these Thens measure from"
    assert kinds - thens == set(), "no such Then any more"
    for test in WAITS_FOR_A_CLUSTER_START.values():
        assert callable(globals().get(test)), test


# -- 1. every Then after every When ---------------------------------------------------------


class _Node:
    def __init__(self, provided: set[str]) -> None:
        self.stash = pytest.Stash()
        self.stash[fixtures.PROVIDED] = set(provided)


class _Request:
    def __init__(self, provided: set[str]) -> None:
        self.node = _Node(provided)

    def getfixturevalue(self, name: str) -> object:
        assert name == "measurements", name  # the only fixture the hook asks for
        return Measurements()


class _Step:
    def __init__(self, keyword: str, name: str) -> None:
        self.keyword, self.name = keyword, name


def _needs(ctx: Any) -> set[str]:
    provided = {c.target_fixture for c in step_function_context_registry.values()}
    fields = {m.group(1) for m in _FIELD.finditer(str(ctx.parser.name))}
    return {
        p for p in inspect.signature(ctx.step_func).parameters if p in provided and p not in fields
    }


def _whens() -> list[Any]:
    return sorted(_contexts("when"), key=lambda c: str(c.parser.name))


def test_each_then_after_each_when_has_what_it_needs_or_names_the_missing_step() -> None:
    """A Given chose the nodes (``targets``); then one When; then the Then. Also after a
    When that provides nothing (e.g. "the nodes are cordoned")."""
    whens = _whens()
    assert any(c.target_fixture is None for c in whens)  # Whens that provide nothing exist
    checked = refused = 0
    for when in whens:
        provided = {"targets"} | ({when.target_fixture} - {None})
        for then in _contexts("then"):
            request = _Request(provided)
            step = _Step("Then", str(then.parser.name))
            missing = _needs(then) - provided
            if not missing:
                fixtures.pytest_bdd_before_step(request, None, None, step, then.step_func)  # type: ignore[arg-type]
                checked += 1
                continue
            with pytest.raises(MissingStep) as err:
                fixtures.pytest_bdd_before_step(request, None, None, step, then.step_func)  # type: ignore[arg-type]
            assert err.value.needs in fixtures.NEEDS.values(), err.value
            assert err.value.steps, "names no step that would provide it"
            for named in err.value.steps:  # each step it names provides what is missing
                assert any(named in fixtures.providers(f) for f in missing), named
            refused += 1
    assert checked > 50 and refused > 500, (checked, refused)


def test_a_then_needing_a_removal_no_step_asked_for_is_a_missing_step() -> None:
    """ "the node no longer has the out-of-service taint" after a power-on but with no
    removal step is a harness error naming it, not a product failure."""
    import harness.steps.node_steps as steps_module
    from harness.scenario.targets.choice import PoweredOn

    tl = _tl()
    sent = _at(tl, 0, ACTION, "w1", "power-on sent")
    with pytest.raises(MissingStep, match="the out-of-service taint is removed"):
        steps_module.out_of_service_taint_gone(
            parse_limit("5 seconds"),
            Targets(("w1",), ()),
            PoweredOn(("w1",), {"w1": sent}, {"w1": sent}, ()),
            tl,
            PROFILES["fast"],
            Measurements(),
        )


# -- 2. late start events on a fake timeline ------------------------------------------------


def _tl() -> Timeline:
    return Timeline(FakeClock(start=1000.0))


def _at(
    tl: Timeline, t: float, kind: str, name: str, what: str, ns: str = "", **d: Any
) -> Transition:
    return tl.record(kind, name, what, namespace=ns, detail=d, mono=1000.0 + t)


def _later(tl: Timeline, t: float, kind: str, name: str, what: str, ns: str = "", **d: Any) -> None:
    """Record the transition when the fake clock reaches ``t`` (while a step waits)."""
    clock = tl.clock
    assert isinstance(clock, FakeClock)
    clock.call_at(1000.0 + t, lambda: _at(tl, t, kind, name, what, ns, **d))


def _pod(name: str, uid: str, workload: str, pvs: tuple[str, ...] = ()) -> PodInfo:
    return PodInfo("lab", name, uid, "w1", workload, pvs)


def _outage(tl: Timeline, pods: tuple[PodInfo, ...] = ()) -> Outage:
    for p in pods:
        _at(tl, -1, "Pod", p.name, "observed", "lab", uid=p.uid, node="w1", workload=p.workload)
    sent = _at(tl, 0.0, ACTION, "w1", "power-off sent")
    ack = _at(tl, 0.5, ACTION, "w1", "power-off acknowledged")
    subjects = pods[:1]
    targets = Targets(("w1",), pods, subjects=subjects, racks={"w1": "a"})
    return Outage(targets, pods, sent, {"w1": ack}, "", False, 0.0)


def _held_volume(tl: Timeline) -> PodInfo:
    _at(tl, -2, "VolumeAttachment", "va-1", "observed", node="w1", pv="pv-0", attached=True)
    return _pod("registry-a", "u1", "Deployment/registry", pvs=("pv-0",))


def test_the_taint_waits_for_a_late_not_ready() -> None:
    tl = _tl()
    outage = _outage(tl)
    _later(tl, 18.0, "Node", "w1", "not-ready", status="Unknown")  # the start, late
    _later(tl, 19.0, "Node", "w1", "taint-added", taint=UNREACHABLE)
    ms = Measurements()
    phases.nodes_tainted(tl, outage, 5.0, ms, PROFILES["fast"])
    assert ms.items[0]["seconds"] == pytest.approx(1.0)  # from NotReady, not from the failure


def test_eviction_waits_for_a_late_taint() -> None:
    tl = _tl()
    web = _pod("web-a", "u1", "Deployment/web")
    outage = _outage(tl, (web,))
    _later(tl, 30.0, "Node", "w1", "taint-added", taint=UNREACHABLE)
    _later(tl, 33.0, "Pod", "web-a", "terminating", "lab", uid="u1", node="w1")
    ms = Measurements()
    phases.subject_terminating(tl, outage, outage.targets.subjects[0], 10.0, ms, PROFILES["fast"])
    assert ms.items[0]["seconds"] == pytest.approx(3.0)


def test_rescheduling_waits_for_a_late_eviction() -> None:
    tl = _tl()
    web = _pod("web-a", "u1", "Deployment/web")
    outage = _outage(tl, (web,))
    # evicted 60 s after the failure: longer than the 30 s limit of the phase itself
    _later(
        tl, 60.0, "Pod", "web-a", "terminating", "lab", uid="u1", node="w1", workload=web.workload
    )
    _later(tl, 62.0, "Pod", "web-b", "scheduled", "lab", uid="n1", node="w2", workload=web.workload)
    start_events.lost_pods_stopped_blocking(tl, [web], 90.0)
    ms = Measurements()
    phases.rescheduled(tl, [web], outage, 30.0, ms)
    assert ms.items[0]["seconds"] == pytest.approx(2.0)


def test_ready_waits_for_a_late_replacement_and_its_volume() -> None:
    tl = _tl()
    pod = _held_volume(tl)
    outage = _outage(tl, (pod,))
    w = pod.workload
    _later(tl, 40.0, "Pod", pod.name, "terminating", "lab", uid="u1", node="w1", workload=w)
    _later(tl, 41.0, "Pod", "registry-b", "scheduled", "lab", uid="n1", node="w2", workload=w)
    _later(tl, 50.0, "VolumeAttachment", "va-2", "attached", node="w2", pv="pv-0")
    _later(tl, 52.0, "Pod", "registry-b", "ready", "lab", uid="n1", node="w2", workload=w)
    start_events.replacement_volumes_attached(tl, [pod], outage, 90.0)
    ms = Measurements()
    phases.replacement_ready(tl, [pod], outage, 5.0, ms)
    assert ms.items[0]["seconds"] == pytest.approx(2.0)  # from its volume's attachment


def test_multi_attach_waits_for_a_late_replacement() -> None:
    tl = _tl()
    pod = _held_volume(tl)
    outage = _outage(tl, (pod,))
    w = pod.workload
    _later(tl, 40.0, "Pod", pod.name, "terminating", "lab", uid="u1", node="w1", workload=w)
    _later(tl, 41.0, "Pod", "registry-b", "scheduled", "lab", uid="n1", node="w2", workload=w)
    _later(
        tl, 43.0, "Pod", "registry-b", "multi-attach", "lab", uid="n1", volume="pv-0", message="x"
    )
    start_events.replacements_scheduled(tl, [pod], outage, 90.0)
    ms = Measurements()
    volumes.multi_attach(tl, [pod], outage, 5.0, ms)
    assert ms.items[0]["seconds"] == pytest.approx(3.0)


def test_release_waits_for_a_late_pod_deletion() -> None:
    tl = _tl()
    pod = _held_volume(tl)
    outage = _outage(tl, (pod,))
    _later(tl, 70.0, "Pod", pod.name, "deleted", "lab", uid="u1", node="w1", workload=pod.workload)
    _later(tl, 72.0, "VolumeAttachment", "va-1", "detached", node="w1", pv="pv-0")
    start_events.held_pods_deleted(tl, [pod], outage, 90.0)
    ms = Measurements()
    volumes.released(tl, [pod], outage, 5.0, ms)
    assert ms.items[0]["seconds"] == pytest.approx(2.0)


def test_reattachment_waits_for_a_late_release() -> None:
    tl = _tl()
    pod = _held_volume(tl)
    outage = _outage(tl, (pod,))
    _later(tl, 70.0, "VolumeAttachment", "va-1", "deleted", node="w1", pv="pv-0")
    _later(tl, 73.0, "VolumeAttachment", "va-2", "attached", node="w2", pv="pv-0")
    start_events.held_volumes_released(tl, [pod], outage, 90.0)
    ms = Measurements()
    volumes.reattached(tl, [pod], outage, 5.0, ms)
    assert ms.items[0]["seconds"] == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("start", "call"),
    [
        (
            "rescheduling starts",
            lambda tl, o, p: start_events.lost_pods_stopped_blocking(tl, p, 9.0),
        ),
        (
            "where its phase starts",
            lambda tl, o, p: start_events.replacements_scheduled(tl, p, o, 9.0),
        ),
        (
            "where it can start",
            lambda tl, o, p: start_events.replacement_volumes_attached(tl, p, o, 9),
        ),
        ("release starts", lambda tl, o, p: start_events.held_pods_deleted(tl, p, o, 9.0)),
        (
            "re-attachment starts",
            lambda tl, o, p: start_events.held_volumes_released(tl, p, o, 9.0),
        ),
    ],
)
def test_a_start_that_never_comes_fails_naming_it(start: str, call: Any) -> None:
    tl = _tl()
    pod = _held_volume(tl)
    outage = _outage(tl, (pod,))
    if "can start" in start:  # its replacement was scheduled; its volume never attached
        _at(
            tl, 5, "Pod", pod.name, "terminating", "lab", uid="u1", node="w1", workload=pod.workload
        )
        _at(
            tl,
            6,
            "Pod",
            "registry-b",
            "scheduled",
            "lab",
            uid="n1",
            node="w2",
            workload=pod.workload,
        )
    with pytest.raises(CheckFailed, match=re.escape(start)) as err:
        call(tl, outage, [pod])
    assert "within 9s" in str(err.value)
