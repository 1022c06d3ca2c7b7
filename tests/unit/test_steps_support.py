"""The step glue's own logic on synthetic timelines: no cluster, a fake clock."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from harness.budgets import PROFILES
from harness.checks import CheckFailed
from harness.errors import ConfigError
from harness.kube.timeline import ACTION, FakeClock, Timeline, Transition
from harness.scenario import lost_pods
from harness.scenario.acts import disruptions
from harness.scenario.errors import NothingToMeasure
from harness.scenario.expectations import phases, volumes
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage, PoweredOn, Targets
from harness.scenario.targets.workloads import PodInfo, selector_matches
from harness.steps.support.limits import parse_limit

UNREACHABLE = "node.kubernetes.io/unreachable:NoExecute"


def _tl() -> Timeline:
    return Timeline(FakeClock(start=1000.0))


def _at(
    tl: Timeline, t: float, kind: str, name: str, what: str, ns: str = "", **d: Any
) -> Transition:
    return tl.record(kind, name, what, namespace=ns, detail=d, mono=1000.0 + t)


def _outage(tl: Timeline, nodes: tuple[str, ...], pods: tuple[PodInfo, ...] = ()) -> Outage:
    sent = _at(tl, 0.0, ACTION, nodes[0], "power-off sent")
    acks = {n: _at(tl, 0.5, ACTION, n, "power-off acknowledged") for n in nodes}
    targets = Targets(nodes, pods, racks=dict.fromkeys(nodes, "rack-a"))
    return Outage(targets, pods, sent, acks, "", False, 0.0)


def _about(outage: Outage, subject: PodInfo) -> Outage:
    """``outage`` with ``subject`` as the pod the scenario is about."""
    targets = Targets(outage.nodes, outage.lost, subjects=(subject,), racks=outage.targets.racks)
    return Outage(targets, outage.lost, outage.sent, outage.acks, "", False, 0.0)


def test_limit_is_a_named_budget_or_literal_seconds() -> None:
    fast = PROFILES["fast"]
    assert parse_limit("the node-not-ready budget").seconds(fast) == fast.node_not_ready
    assert parse_limit("90 seconds").seconds(fast) == 90.0
    assert parse_limit("1 second").seconds(fast) == 1.0
    with pytest.raises(ConfigError, match="did you mean 'node-not-ready'"):
        parse_limit("the node-not-redy budget").seconds(fast)


def test_label_selector_semantics() -> None:
    labels = {"app": "web", "tier": "frontend"}
    assert selector_matches({}, labels)  # an empty selector selects everything
    assert not selector_matches(None, labels)
    assert selector_matches({"matchLabels": {"app": "web"}}, labels)
    assert not selector_matches({"matchLabels": {"app": "db"}}, labels)
    expr = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend"]}]}
    assert selector_matches(expr, labels)
    gone = {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}
    assert not selector_matches(gone, labels)


def _pod(
    name: str, uid: str, workload: str, node: str = "w1", pvs: tuple[str, ...] = ()
) -> PodInfo:
    return PodInfo("lab", name, uid, node, workload, pvs)


def test_replacements_follow_the_controllers_rules() -> None:
    tl = _tl()
    web1, web2 = _pod("web-a", "u1", "Deployment/web"), _pod("web-b", "u2", "Deployment/web")
    member = _pod("db-0", "u3", "StatefulSet/db", pvs=("pv-0",))
    for p in (web1, web2, member):
        _at(tl, -1, "Pod", p.name, "observed", "lab", uid=p.uid, node="w1", workload=p.workload)
    outage = _outage(tl, ("w1",), (web1, web2, member))
    _at(tl, 20, "Pod", "web-b", "terminating", "lab", uid="u2", node="w1", workload=web2.workload)
    _at(tl, 21, "Pod", "web-a", "terminating", "lab", uid="u1", node="w1", workload=web1.workload)
    # a new web pod on the lost node does not count; two elsewhere do, in scheduling order
    _at(tl, 22, "Pod", "web-x", "scheduled", "lab", uid="n0", node="w1", workload="Deployment/web")
    _at(tl, 23, "Pod", "web-y", "scheduled", "lab", uid="n1", node="w2", workload="Deployment/web")
    _at(tl, 24, "Pod", "web-z", "scheduled", "lab", uid="n2", node="w3", workload="Deployment/web")
    # the StatefulSet member is replaced only once it is gone, by a pod with its name
    _at(tl, 25, "Pod", "db-0", "terminating", "lab", uid="u3", node="w1", workload=member.workload)
    found = lost_pods.replacements(tl, outage.lost, outage.nodes, outage.sent.mono)
    assert {u: r.name for u, r in found.items()} == {"u2": "web-y", "u1": "web-z"}
    _at(tl, 60, "Pod", "db-0", "deleted", "lab", uid="u3", node="w1", workload=member.workload)
    _at(tl, 60.1, "Pod", "db-0", "scheduled", "lab", uid="n3", node="w2", workload=member.workload)
    found = lost_pods.replacements(tl, outage.lost, outage.nodes, outage.sent.mono)
    assert found["u3"].node == "w2" and found["u3"].ref.transition == "deleted"


def test_a_pod_ended_by_a_graceful_node_shutdown_is_replaced_from_its_failed_phase() -> None:
    """A kubelet's graceful node shutdown ends its pods as Failed, with no deletionTimestamp;
    the ReplicaSet replaces them at once, so that is when they stopped blocking. A
    StatefulSet member still blocks until it is deleted."""
    tl = _tl()
    web = _pod("web-a", "u1", "Deployment/web")
    member = _pod("db-0", "u3", "StatefulSet/db")
    for p in (web, member):
        _at(tl, -1, "Pod", p.name, "observed", "lab", uid=p.uid, node="w1", workload=p.workload)
    outage = _outage(tl, ("w1",), (web, member))
    assert lost_pods.stopped_blocking(tl, web) is None
    _at(tl, 2, "Pod", "web-a", "phase", "lab", uid="u1", phase="Running", previous="Pending")
    assert lost_pods.stopped_blocking(tl, web) is None  # not a terminal phase
    _at(tl, 3, "Pod", "web-a", "phase", "lab", uid="u1", phase="Failed", previous="Running")
    _at(tl, 3, "Pod", "db-0", "phase", "lab", uid="u3", phase="Failed", previous="Running")
    _at(tl, 4, "Pod", "web-n", "scheduled", "lab", uid="n1", node="w2", workload="Deployment/web")
    _at(tl, 30, "Pod", "web-a", "terminating", "lab", uid="u1", node="w1", workload=web.workload)
    ref = lost_pods.stopped_blocking(tl, web)
    assert ref is not None and ref.mono == 1003.0 and ref.transition == "phase"
    assert lost_pods.stopped_blocking(tl, member) is None
    found = lost_pods.replacements(tl, outage.lost, outage.nodes, outage.sent.mono)
    assert {u: r.name for u, r in found.items()} == {"u1": "web-n"}


def test_taint_budget_grows_with_the_zones_rate_limit() -> None:
    tl = _tl()
    nodes = ("w1", "w2", "w3")
    outage = _outage(tl, nodes)
    for i, n in enumerate(nodes):
        _at(tl, 8, "Node", n, "not-ready", status="Unknown")
        # tainted 0.2 s, 10.2 s and 20.2 s after NotReady: the rate limiter's pace
        _at(tl, 8.2 + 10 * i, "Node", n, "taint-added", taint=UNREACHABLE)
    ms = Measurements()
    phases.nodes_tainted(tl, outage, 10.0, ms, PROFILES["fast"])
    assert [m["budget_s"] for m in ms.items] == [10.0, 20.0, 30.0]


def test_a_late_first_taint_fails_even_in_a_big_rack() -> None:
    tl = _tl()
    outage = _outage(tl, ("w1", "w2"))
    for n in ("w1", "w2"):
        _at(tl, 8, "Node", n, "not-ready", status="Unknown")
    _at(tl, 19, "Node", "w1", "taint-added", taint=UNREACHABLE)  # 11 s: over 10 s for k=1
    _at(tl, 20, "Node", "w2", "taint-added", taint=UNREACHABLE)
    with pytest.raises(CheckFailed, match=re.escape("w1 (tainted 1. in its rack) after 11.0s")):
        phases.nodes_tainted(tl, outage, 10.0, Measurements(), PROFILES["fast"])


def test_eviction_right_after_not_ready_waits_for_the_taint_and_measures_from_it() -> None:
    """Issue 12: "the singleton is Terminating" placed right after "the node is NotReady"
    found no taint yet and failed as a product failure; it waits for its own start."""
    tl = _tl()
    single = _pod("registry-0", "u9", "Deployment/registry")
    _at(tl, -1, "Pod", single.name, "observed", "lab", uid="u9", node="w1")
    outage = _about(_outage(tl, ("w1",), (single,)), single)
    _at(tl, 8, "Node", "w1", "not-ready", status="Unknown")  # where the earlier step stopped
    clock = tl.clock
    assert isinstance(clock, FakeClock)
    clock.call_at(
        1000.0 + 8.5, lambda: _at(tl, 8.5, "Node", "w1", "taint-added", taint=UNREACHABLE)
    )
    clock.call_at(
        1000.0 + 19.0,
        lambda: _at(tl, 19.0, "Pod", single.name, "terminating", "lab", uid="u9", node="w1"),
    )
    ms = Measurements()
    phases.subject_terminating(tl, outage, outage.subjects[0], 15.0, ms, PROFILES["fast"])
    assert ms.items[0]["seconds"] == pytest.approx(10.5)  # from the taint, not the NotReady


def test_a_taint_that_never_comes_fails_naming_the_start_it_waited_for() -> None:
    tl = _tl()
    single = _pod("registry-0", "u9", "Deployment/registry")
    outage = _about(_outage(tl, ("w1",), (single,)), single)
    with pytest.raises(
        CheckFailed, match=re.escape("node w1 tainted unreachable (where eviction starts) within")
    ):
        phases.subject_terminating(
            tl, outage, outage.subjects[0], 15.0, Measurements(), PROFILES["fast"]
        )


def test_no_pod_on_the_lost_nodes_is_nothing_to_measure_not_a_failure() -> None:
    tl = _tl()
    outage = _outage(tl, ("w1",))
    with pytest.raises(NothingToMeasure, match="no pod of an inventory workload"):
        phases.pods_terminating(tl, outage, 15.0, Measurements(), PROFILES["fast"])
    assert not issubclass(NothingToMeasure, AssertionError)


def test_a_volume_released_before_its_pod_deletion_is_read_counts_as_at_once() -> None:
    # The VolumeAttachment and pod watches race: the detach can be read a few milliseconds
    # before the deletion of the pod that held the volume.
    tl = _tl()
    member = _pod("db-0", "u3", "StatefulSet/db", pvs=("pv-0",))
    _at(tl, -1, "VolumeAttachment", "va-1", "observed", node="w1", pv="pv-0", attached=True)
    _at(tl, -1, "Pod", "db-0", "observed", "lab", uid="u3", node="w1", workload=member.workload)
    outage = _outage(tl, ("w1",), (member,))
    _at(tl, 29.640, "VolumeAttachment", "va-1", "deleted", node="w1", pv="pv-0")
    _at(tl, 29.660, "Pod", "db-0", "deleted", "lab", uid="u3", node="w1", workload=member.workload)
    ms = Measurements()
    volumes.released(tl, [member], outage, 15.0, ms)
    assert ms.items[0]["phase"] == "pv-0 released by w1"
    assert ms.items[0]["seconds"] == 0.0


def test_a_volume_never_released_fails_naming_it() -> None:
    tl = _tl()
    member = _pod("db-0", "u3", "StatefulSet/db", pvs=("pv-0",))
    _at(tl, -1, "VolumeAttachment", "va-1", "observed", node="w1", pv="pv-0", attached=True)
    outage = _outage(tl, ("w1",), (member,))
    _at(tl, 30, "Pod", "db-0", "deleted", "lab", uid="u3", node="w1", workload=member.workload)
    with pytest.raises(CheckFailed, match="pv-0 still attached to w1"):
        volumes.released(tl, [member], outage, 15.0, Measurements())


def _held_volume(tl: Timeline) -> tuple[PodInfo, Outage]:
    member = _pod("db-0", "u3", "StatefulSet/db", pvs=("pv-0",))
    _at(tl, -1, "VolumeAttachment", "va-1", "observed", node="w1", pv="pv-0", attached=True)
    _at(tl, -1, "Pod", "db-0", "observed", "lab", uid="u3", node="w1", workload=member.workload)
    return member, _outage(tl, ("w1",), (member,))


def test_a_volume_still_attached_to_the_lost_node_is_held_for_as_long_as_it_has_been() -> None:
    clock = FakeClock(start=1000.0)
    tl = Timeline(clock)
    member, outage = _held_volume(tl)
    # The pod is deleted (force-deleted): the volume stays until the controller's 6 minutes.
    _at(tl, 20, "Pod", "db-0", "deleted", "lab", uid="u3", node="w1", workload=member.workload)
    clock.advance(25.0)
    ms = Measurements()
    volumes.still_held(tl, [member], outage, ms)
    assert ms.items[0]["phase"] == "pv-0 still attached to w1"
    assert ms.items[0]["seconds"] == 25.0


def test_a_volume_released_by_the_lost_node_is_not_held_and_fails_naming_it() -> None:
    clock = FakeClock(start=1000.0)
    tl = Timeline(clock)
    member, outage = _held_volume(tl)
    _at(tl, 18.5, "VolumeAttachment", "va-1", "deleted", node="w1", pv="pv-0")
    clock.advance(25.0)
    with pytest.raises(CheckFailed, match=r"pv-0 released by w1 18\.5s after the failure"):
        volumes.still_held(tl, [member], outage, Measurements())


def test_no_volume_held_by_the_lost_node_is_nothing_to_judge() -> None:
    tl = _tl()
    member = _pod("db-0", "u3", "StatefulSet/db", pvs=("pv-0",))
    _at(tl, -1, "VolumeAttachment", "va-1", "observed", node="w2", pv="pv-0", attached=True)
    outage = _outage(tl, ("w1",), (member,))
    with pytest.raises(NothingToMeasure, match="none of the lost pods had a ReadWriteOnce"):
        volumes.still_held(tl, [member], outage, Measurements())


def test_third_of_workers_prefers_a_set_that_loses_replaceable_stateless_pods() -> None:
    """CI once got w-a1, w-b1, w-c2: the busiest-first choice lost only pods with volumes, so
    "every lost stateless pod is replaced" had nothing to check and failed."""
    from types import SimpleNamespace

    from harness.scenario.targets.choice import third_of_workers
    from harness.scenario.targets.workloads import Workload

    workers = [
        SimpleNamespace(name=f"w-{r}{i}", rack=f"rack-{r}", role="worker")
        for r in "abc"
        for i in (1, 2, 3)
    ]
    inventory = SimpleNamespace(
        nodes=workers,
        nodes_by_role=lambda role: list(workers),
        node=lambda name: next(w for w in workers if w.name == name),
    )
    ready = SimpleNamespace(is_ready=True, unschedulable=False)
    observer = SimpleNamespace(node=lambda name: ready)

    def p(name: str, node: str, workload: str, pv: bool = False) -> PodInfo:
        return PodInfo("lab", name, name, node, workload, (f"pv-{name}",) if pv else ())

    pods = [
        p("quorum-0", "w-a1", "StatefulSet/quorum", pv=True),
        p("registry", "w-a1", "Deployment/registry", pv=True),
        p("web-0", "w-a3", "Deployment/web"),
        p("quorum-1", "w-b1", "StatefulSet/quorum", pv=True),
        p("web-1", "w-b1", "Deployment/web"),
        p("batch-1", "w-b2", "StatefulSet/batch", pv=True),
        p("quorum-2", "w-c1", "StatefulSet/quorum", pv=True),
        p("batch-2", "w-c2", "StatefulSet/batch", pv=True),
        p("web-2", "w-c3", "Deployment/web"),
    ]

    def wl(kind: str, name: str, replicas: int, keep: int, critical: bool = True) -> Workload:
        return Workload("lab", kind, name, replicas, {}, False, critical, keep, None)

    workloads = [
        wl("StatefulSet", "quorum", 3, 2),
        wl("Deployment", "web", 3, 2),
        wl("Deployment", "registry", 1, 0, critical=False),
        wl("StatefulSet", "batch", 2, 0, critical=False),
    ]
    t = third_of_workers(inventory, observer, pods, workloads)  # type: ignore[arg-type]
    assert len(t.nodes) == 3 and {n[2] for n in t.nodes} == {"a", "b", "c"}
    lost = [x for x in pods if x.node in t.nodes]
    assert sum(1 for x in lost if x.workload == "Deployment/web") == 1  # min_available 2 of 3
    assert sum(1 for x in lost if x.workload == "StatefulSet/quorum") <= 1
    assert any(x.stateless and x.replaced_elsewhere for x in lost)


def test_a_reboot_the_node_monitor_never_noticed_is_ready_at_once() -> None:
    tl = _tl()
    _at(tl, -5, "Node", "w1", "observed", ready="True", unschedulable=False, taints=[])
    sent = _at(tl, 0, ACTION, "w1", "power-cycle sent")
    ack = _at(tl, 2, ACTION, "w1", "power-cycle acknowledged")
    ms = Measurements()
    phases.nodes_ready(tl, PoweredOn(("w1",), {"w1": sent}, {"w1": ack}, ()), 30.0, ms)
    assert ms.items[0]["seconds"] == 0.0


def test_a_power_on_after_a_power_off_waits_for_ready() -> None:
    tl = _tl()
    _at(tl, -5, "Node", "w1", "observed", ready="True", unschedulable=False, taints=[])
    _at(tl, -3, "Node", "w1", "not-ready", status="Unknown")
    sent = _at(tl, 0, ACTION, "w1", "power-on sent")
    ack = _at(tl, 2, ACTION, "w1", "power-on acknowledged")
    _at(tl, 1.5, "Node", "w1", "ready", status="True")  # up before the BMC's acknowledgement
    ms = Measurements()
    phases.nodes_ready(tl, PoweredOn(("w1",), {"w1": sent}, {"w1": ack}, ()), 30.0, ms)
    assert ms.items[0]["seconds"] == pytest.approx(1.5)


class _CyclingSession:
    """Stands in for a Session's power cycle: writes the actions a cycle writes, at the
    times given, on a fake-clock timeline, and returns them as the session does
    (synchronized: off and on phases; else one reset)."""

    def __init__(self, tl: Timeline, held: bool) -> None:
        self.timeline = tl
        self.held = held
        self.off_s: list[float] = []

    def power_cycle(
        self, nodes: Sequence[str], *, protocol: str | None = None, off_s: float = 0.0
    ) -> Any:
        from harness.session import PowerResult

        self.off_s.append(off_s)
        result = PowerResult(list(nodes))
        for n in nodes:
            at = [(0.0, "power-cycle sent")]
            if self.held:
                at += [
                    (0.0, "power-cycle off sent"),
                    (0.1, "power-cycle off acknowledged"),
                    (10.2, "power-cycle on sent"),
                    (10.3, "power-cycle acknowledged"),
                ]
            else:
                at.append((0.2, "power-cycle acknowledged"))
            result.transitions += [_at(self.timeline, t, ACTION, n, what) for t, what in at]
            result.sent[n] = result.transitions[-len(at)].mono
            result.acknowledged[n] = result.transitions[-1].mono
        return result


class _NoPods:
    def pods(self) -> list[PodInfo]:
        return []


@pytest.mark.parametrize("held", [True, False])
def test_a_reboot_is_measured_from_the_power_going_off_and_the_power_on_request(
    held: bool,
) -> None:
    """A reboot held off 10 s (power-cycle off at 0.1 s, on requested at 10.2 s) and a BMC
    reset (one cycle, requested at 0, read back on at 0.2 s); the node then boots 15 s:
    NotReady measured from the power going off (the reset has no off acknowledgement: from
    its request), Ready after its boot, measured from the power-on request."""
    tl = _tl()
    _at(tl, -5, "Node", "w1", "observed", ready="True", unschedulable=False, taints=[])
    session = _CyclingSession(tl, held)
    targets = Targets(("w1",), (), racks={"w1": "rack-a"})
    rebooted = disruptions.reboot(
        session,  # type: ignore[arg-type]
        targets,
        _NoPods(),  # type: ignore[arg-type]
        Measurements(),
        off_s=10.0 if held else 0.0,
    )
    assert session.off_s == [10.0 if held else 0.0]
    start = 10.2 if held else 0.0
    _at(tl, 12.1, "Node", "w1", "not-ready", status="Unknown")
    _at(tl, start + 16.0, "Node", "w1", "ready", status="True")
    ms = Measurements()
    phases.nodes_not_ready(tl, rebooted.outage, 30.0, ms)
    phases.nodes_ready(tl, rebooted.back, 60.0, ms)
    not_ready, ready = ms.items
    assert not_ready["seconds"] == pytest.approx(12.1 - (0.1 if held else 0.0))
    assert ready["seconds"] == pytest.approx(16.0)
    assert rebooted.outage.kind.value == "reboot"
