"""Checks over synthetic timelines on a fake clock (live and after the fact)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.checks import (
    CheckFailed,
    Measurement,
    available_throughout,
    multi_attach_absent,
    multi_attach_seen,
    node_not_ready,
    node_ready,
    pods_evicted,
    quorum_kept,
    replacement_ready,
    spread_over_racks,
    still_terminating,
    taint_present,
    volume_moved,
)
from harness.checks.replay import AttachmentSnap, attachments_at, node_at, pods_at
from harness.errors import ConfigError
from harness.kube.timeline import FakeClock, Timeline, Transition

T0 = 1000.0
UNREACHABLE = "node.kubernetes.io/unreachable:NoExecute"


class Sim:
    """Records what the observer would, at chosen times on a fake clock."""

    def __init__(self) -> None:
        self.clock = FakeClock(start=T0 - 100)
        self.tl = Timeline(self.clock)

    def at(self, t: float, fn: Callable[[], object]) -> None:
        """Run ``fn`` when the fake clock reaches T0 + t (while a check waits)."""
        self.clock.call_at(T0 + t, fn)

    def now(self, t: float) -> None:
        """Move the clock to T0 + t (for transitions recorded "in the past")."""
        self.clock.advance(T0 + t - self.clock.monotonic())

    def rec(self, kind: str, name: str, what: str, ns: str = "", **detail: Any) -> Transition:
        return self.tl.record(kind, name, what, namespace=ns, detail=detail)

    def power_off(self, node: str = "w1", t: float = 0.0) -> Transition:
        self.now(t)
        return self.tl.action(node, "power-off acknowledged")

    def node(self, name: str, ready: str = "True", taints: tuple[str, ...] = ()) -> None:
        self.rec(
            "Node",
            name,
            "observed",
            uid=name,
            ready=ready,
            unschedulable=False,
            taints=list(taints),
            zone="",
        )

    def pod(
        self,
        name: str,
        node: str,
        *,
        uid: str | None = None,
        ready: bool = True,
        workload: str = "Deployment/web",
        ns: str = "ns",
        what: str = "observed",
    ) -> None:
        self.rec(
            "Pod",
            name,
            what,
            ns,
            uid=uid or name,
            node=node,
            phase="Running",
            ready=ready,
            terminating=False,
            workload=workload,
        )

    def pod_event(
        self,
        name: str,
        what: str,
        node: str,
        *,
        uid: str | None = None,
        workload: str = "Deployment/web",
        ns: str = "ns",
        **extra: Any,
    ) -> Transition:
        return self.rec(
            "Pod", name, what, ns, uid=uid or name, node=node, workload=workload, **extra
        )


@pytest.fixture
def sim() -> Sim:
    return Sim()


# -- nodes ---------------------------------------------------------------------------------


def test_node_not_ready_live_measures_from_the_reference(sim: Sim) -> None:
    sim.node("w1")
    off = sim.power_off()
    sim.at(
        42.0,
        lambda: sim.rec("Node", "w1", "not-ready", status="Unknown", reason="NodeStatusUnknown"),
    )
    m = node_not_ready(sim.tl, "w1", since=off, budget_s=60)
    assert isinstance(m, Measurement)
    assert m.name == "node-not-ready" and m.duration_s == pytest.approx(42.0)
    assert m.budget_s == 60 and m.within_budget
    assert m.started_mono == off.mono
    assert m.detail["status"] == "Unknown"
    assert sim.clock.monotonic() == pytest.approx(T0 + 42)  # returned as soon as it came
    assert str(m) == "node-not-ready: 42.000s (budget 60s)"


def test_node_not_ready_fails_at_the_deadline_with_what_was_seen(sim: Sim) -> None:
    sim.node("w1")
    off = sim.power_off()
    sim.rec("Node", "w1", "not-ready", status="False")  # same instant as the reference: before
    with pytest.raises(CheckFailed) as err:
        node_not_ready(sim.tl, "w1", since=T0 + 1, budget_s=60)
    e = err.value
    assert isinstance(e, AssertionError)  # reported as a test failure, not an error
    assert e.expected == "node w1 NotReady within 60s of t=+101.000s"
    assert "node w1: Ready=False" in e.seen
    assert e.waited_s == pytest.approx(60.0)
    assert sim.clock.monotonic() == pytest.approx(T0 + 61)
    assert off.transition in sim.tl.describe(off)


def test_a_transition_after_the_budget_fails_when_checked_later(sim: Sim) -> None:
    sim.node("w1")
    off = sim.power_off()
    sim.now(75.0)
    sim.rec("Node", "w1", "not-ready", status="Unknown")
    sim.now(200.0)
    with pytest.raises(CheckFailed, match=r"75\.0s after power-off acknowledged of w1"):
        node_not_ready(sim.tl, "w1", since=off, budget_s=60)
    assert node_not_ready(sim.tl, "w1", since=off, budget_s=90).duration_s == pytest.approx(75)


def test_node_ready_again_and_relist_uncertainty(sim: Sim) -> None:
    sim.node("w1", ready="Unknown")
    on = sim.power_off(t=10)
    sim.now(40.0)
    sim.rec("Node", "w1", "ready", status="True", relist=True, uncertain_s=3.5)
    m = node_ready(sim.tl, "w1", since=on, budget_s=60)
    assert m.duration_s == pytest.approx(30.0)
    assert m.detail["relist"] is True and m.detail["uncertain_s"] == 3.5


def test_taint_present_already_or_added(sim: Sim) -> None:
    sim.node("w1", taints=("other:NoSchedule",))
    off = sim.power_off()
    sim.at(46.0, lambda: sim.rec("Node", "w1", "taint-added", taint=UNREACHABLE))
    m = taint_present(sim.tl, "w1", since=off, budget_s=60)
    assert m.duration_s == pytest.approx(46.0) and m.detail["already"] is False
    again = taint_present(sim.tl, "w1", since=sim.clock.monotonic(), budget_s=60)
    assert again.duration_s == 0 and again.detail["already"] is True
    assert node_at(sim.tl, "w1", sim.clock.monotonic()).taints == {  # type: ignore[union-attr]
        "other:NoSchedule",
        UNREACHABLE,
    }
    with pytest.raises(CheckFailed, match="taint x:NoExecute on node w1"):
        taint_present(sim.tl, "w1", "x:NoExecute", since=off, budget_s=10)


# -- pods ----------------------------------------------------------------------------------


def test_pods_evicted_counts_the_pods_on_the_node_at_the_reference(sim: Sim) -> None:
    sim.pod("web-a", "w1")
    sim.pod("db-0", "w1", workload="StatefulSet/db")
    sim.pod("agent-x", "w1", workload="DaemonSet/agent")
    sim.pod("etcd-w1", "w1", workload="Node/w1")
    sim.pod("web-b", "w2")
    off = sim.power_off()
    sim.at(300.0, lambda: sim.pod_event("web-a", "terminating", "w1", grace_s=30))
    sim.at(300.5, lambda: sim.pod_event("web-b", "terminating", "w2"))  # other node
    sim.at(310.0, lambda: sim.pod_event("db-0", "terminating", "w1", workload="StatefulSet/db"))
    m = pods_evicted(sim.tl, "w1", since=off, budget_s=360)
    assert m.duration_s == pytest.approx(310.0)
    assert m.detail["pods"] == 2
    assert m.detail["first_s"] == pytest.approx(300.0)
    assert m.detail["per_pod_s"] == {"ns/web-a": 300.0, "ns/db-0": 310.0}


def test_pods_evicted_names_the_pods_left_and_refuses_an_empty_node(sim: Sim) -> None:
    sim.pod("web-a", "w1")
    sim.pod("web-c", "w1")
    off = sim.power_off()
    sim.at(300.0, lambda: sim.pod_event("web-a", "deleted", "w1"))
    with pytest.raises(CheckFailed) as err:
        pods_evicted(sim.tl, "w1", since=off, budget_s=360)
    assert err.value.seen == "1 of 2 evicted; still not Terminating: ns/web-c"
    assert err.value.waited_s == pytest.approx(360)
    with pytest.raises(CheckFailed, match="at least 1 pod"):
        pods_evicted(sim.tl, "w9", since=off, budget_s=1)
    assert pods_evicted(sim.tl, "w9", since=off, budget_s=1, min_pods=0).detail["pods"] == 0


def test_replacement_ready_needs_a_new_pod_off_the_dead_node(sim: Sim) -> None:
    sim.pod("web-a", "w1")
    sim.pod("web-b", "w2")  # already there: not a replacement
    off = sim.power_off()
    sim.at(5.0, lambda: sim.pod_event("web-b", "not-ready", "w2"))
    sim.at(6.0, lambda: sim.pod_event("web-b", "ready", "w2"))
    sim.at(300.0, lambda: sim.pod("web-x", "w1", ready=False, what="created"))
    sim.at(301.0, lambda: sim.pod_event("web-x", "ready", "w1"))  # on the dead node
    sim.at(320.0, lambda: sim.pod("web-c", "", ready=False, what="created"))
    sim.at(321.0, lambda: sim.pod_event("web-c", "scheduled", "w3"))
    sim.at(330.0, lambda: sim.pod_event("web-c", "ready", "w3"))
    m = replacement_ready(sim.tl, "ns", "Deployment/web", not_on="w1", since=off, budget_s=400)
    assert m.duration_s == pytest.approx(330.0)
    assert m.detail["pods"] == [{"name": "web-c", "node": "w3", "ready_s": 330.0}]


def test_replacement_of_a_statefulset_member_has_the_same_name(sim: Sim) -> None:
    sim.pod("db-0", "w1", uid="u1", workload="StatefulSet/db")
    off = sim.power_off()
    sim.now(400.0)
    sim.pod_event("db-0", "deleted", "w1", uid="u1", workload="StatefulSet/db")
    sim.pod("db-0", "w2", uid="u2", workload="StatefulSet/db", ready=False, what="created")
    sim.now(420.0)
    sim.pod_event("db-0", "ready", "w2", uid="u2", workload="StatefulSet/db")
    m = replacement_ready(sim.tl, "ns", "StatefulSet/db", not_on="w1", since=off, budget_s=600)
    assert m.duration_s == pytest.approx(420.0)
    with pytest.raises(CheckFailed) as err:
        replacement_ready(
            sim.tl, "ns", "StatefulSet/db", not_on="w1", since=off, budget_s=600, count=2
        )
    assert "1 of 2 ready" in err.value.seen


def test_still_terminating_waits_out_the_hold_time(sim: Sim) -> None:
    sim.pod("db-0", "w1", uid="u1", workload="StatefulSet/db")
    off = sim.power_off()
    sim.at(
        305.0,
        lambda: sim.pod_event("db-0", "terminating", "w1", uid="u1", workload="StatefulSet/db"),
    )
    m = still_terminating(sim.tl, "ns", "db-0", since=off, hold_s=600)
    assert sim.clock.monotonic() == pytest.approx(T0 + 600)
    assert m.duration_s == pytest.approx(295.0)
    assert m.detail["terminating_from_s"] == pytest.approx(305.0)


def test_still_terminating_fails_at_once_when_the_pod_goes(sim: Sim) -> None:
    sim.pod("db-0", "w1", uid="u1", workload="StatefulSet/db")
    off = sim.power_off()
    sim.at(305.0, lambda: sim.pod_event("db-0", "terminating", "w1", uid="u1"))
    sim.at(400.0, lambda: sim.pod_event("db-0", "deleted", "w1", uid="u1"))
    with pytest.raises(CheckFailed, match=r"deleted 400\.0s after"):
        still_terminating(sim.tl, "ns", "db-0", since=off, hold_s=600)
    assert sim.clock.monotonic() == pytest.approx(T0 + 400)
    sim.pod("web-z", "w2")
    with pytest.raises(CheckFailed, match="not Terminating"):
        still_terminating(sim.tl, "ns", "web-z", since=sim.clock.monotonic(), hold_s=10)
    with pytest.raises(CheckFailed, match="did not exist"):
        still_terminating(sim.tl, "ns", "nope", since=off, hold_s=10)


def test_available_throughout_tracks_the_lowest_count(sim: Sim) -> None:
    for name, node in (("a", "w1"), ("b", "w2"), ("c", "w3")):
        sim.pod(name, node)
    start = sim.power_off()
    sim.at(10.0, lambda: sim.pod_event("a", "not-ready", "w1"))
    sim.at(50.0, lambda: sim.pod("d", "w2", ready=False, what="created"))
    sim.at(55.0, lambda: sim.pod_event("d", "ready", "w2"))
    m = available_throughout(sim.tl, "ns", "Deployment/web", min_ready=2, start=start, end=T0 + 120)
    assert sim.clock.monotonic() == pytest.approx(T0 + 120)
    assert m.duration_s == pytest.approx(120)
    assert m.detail["initial"] == 3 and m.detail["lowest"] == 2
    assert m.detail["lowest_at_s"] == pytest.approx(10.0)
    assert m.detail["changes"] == 2


def test_available_throughout_fails_as_soon_as_it_drops(sim: Sim) -> None:
    for name, node in (("a", "w1"), ("b", "w1"), ("c", "w3")):
        sim.pod(name, node)
    start = sim.power_off()
    sim.at(40.0, lambda: sim.pod_event("a", "not-ready", "w1"))
    sim.at(41.0, lambda: sim.pod_event("b", "terminating", "w1"))
    sim.at(90.0, lambda: sim.pod_event("b", "ready", "w1"))
    with pytest.raises(CheckFailed) as err:
        available_throughout(sim.tl, "ns", "Deployment/web", min_ready=2, start=start, end=T0 + 600)
    assert sim.clock.monotonic() == pytest.approx(T0 + 41)  # not the end of the window
    assert err.value.seen.startswith("1 Ready at 41.0s into the window")
    assert err.value.detail["lowest"] == 1


def test_a_relist_replacing_a_pod_at_one_instant_is_not_a_dip(sim: Sim) -> None:
    sim.pod("a", "w1")
    sim.pod("b", "w2")
    start = sim.power_off()
    sim.now(30.0)
    sim.tl.extend(
        [
            Transition(
                T0 + 30,
                0.0,
                "Pod",
                "ns",
                "a",
                "deleted",
                {"uid": "a", "node": "w1", "workload": "Deployment/web", "relist": True},
            ),
            Transition(
                T0 + 30,
                0.0,
                "Pod",
                "ns",
                "c",
                "created",
                {
                    "uid": "c",
                    "node": "w3",
                    "phase": "Running",
                    "ready": False,
                    "terminating": False,
                    "workload": "Deployment/web",
                },
            ),
            Transition(
                T0 + 30,
                0.0,
                "Pod",
                "ns",
                "c",
                "ready",
                {"uid": "c", "node": "w3", "workload": "Deployment/web"},
            ),
        ]
    )
    sim.now(60.0)
    m = available_throughout(sim.tl, "ns", "Deployment/web", min_ready=2, start=start, end=T0 + 60)
    assert m.detail["lowest"] == 2
    assert sorted(p.name for p in pods_at(sim.tl, T0 + 60).values()) == ["b", "c"]


def test_quorum_kept_needs_a_majority(sim: Sim) -> None:
    for i in range(3):
        sim.pod(f"db-{i}", f"w{i}", workload="StatefulSet/db")
    start = sim.power_off()
    sim.at(20.0, lambda: sim.pod_event("db-0", "not-ready", "w0", workload="StatefulSet/db"))
    m = quorum_kept(sim.tl, "ns", "db", replicas=3, start=start, end=T0 + 100)
    assert m.name == "quorum-kept" and m.detail["min_ready"] == 2
    sim.at(120.0, lambda: sim.pod_event("db-1", "not-ready", "w1", workload="StatefulSet/db"))
    with pytest.raises(CheckFailed, match="quorum-kept"):
        quorum_kept(sim.tl, "ns", "db", replicas=3, start=start, end=T0 + 200)


def test_spread_over_racks(sim: Sim) -> None:
    sim.pod("a", "w1")
    sim.pod("b", "w2")
    sim.pod("c", "w3", ready=False)
    racks = {"w1": "rack-a", "w2": "rack-b", "w3": "rack-c"}
    m = spread_over_racks(sim.tl, "ns", "Deployment/web", racks=racks, min_racks=2)
    assert m.detail["racks"] == {"rack-a": ["a"], "rack-b": ["b"]}
    with pytest.raises(CheckFailed, match=r"2 Ready pod.* in 2 rack"):
        spread_over_racks(sim.tl, "ns", "Deployment/web", racks=racks, min_racks=3)
    with pytest.raises(ConfigError, match="w2 are not in the rack map"):
        spread_over_racks(sim.tl, "ns", "Deployment/web", racks={"w1": "rack-a"}, min_racks=1)


def test_a_spread_precondition_that_does_not_hold_is_not_judged(sim: Sim) -> None:
    """ "Given every critical workload has Ready replicas in at least 3 racks" after earlier
    scenarios left web on 2 racks: the scenario is skipped saying why, not failed."""
    from types import SimpleNamespace
    from typing import cast

    from harness.scenario.errors import NotApplicable, PreconditionNotMet
    from harness.scenario.expectations.availability import spread

    sim.pod("a", "w1")
    sim.pod("b", "w2")
    sim.pod("c", "w2")
    nodes = [SimpleNamespace(name=n, rack=r) for n, r in [("w1", "a"), ("w2", "b"), ("w3", "c")]]
    web = SimpleNamespace(
        critical=True, kind="Deployment", namespace="ns", key="Deployment/web", ref="ns/web"
    )
    inventory, baseline = SimpleNamespace(nodes=nodes), SimpleNamespace(workloads=[web])
    spread(cast(Any, inventory), sim.tl, cast(Any, baseline), 2)  # holds: nothing raised
    with pytest.raises(PreconditionNotMet, match=r"not judged: .*in 2 rack.*Topology spread"):
        spread(cast(Any, inventory), sim.tl, cast(Any, baseline), 3)
    assert issubclass(PreconditionNotMet, NotApplicable)  # the steps turn it into a skip


# -- volumes -------------------------------------------------------------------------------


def _va(sim: Sim, name: str, what: str, node: str, pv: str = "pv-1", **extra: Any) -> None:
    sim.rec("VolumeAttachment", name, what, uid=name, node=node, pv=pv, **extra)


def test_attachments_replayed_at_a_moment(sim: Sim) -> None:
    _va(sim, "va-1", "observed", "w1", attached=True)
    _va(sim, "va-3", "observed", "w3", pv="pv-3", attached=True)
    sim.now(10.0)
    _va(sim, "va-1", "detached", "w1")
    sim.now(20.0)
    _va(sim, "va-2", "created", "w2", attached=False)
    _va(sim, "va-3", "deleted", "w3", pv="pv-3")
    sim.now(30.0)
    _va(sim, "va-2", "attached", "w2")
    ts = sim.tl.snapshot()
    assert attachments_at(ts, T0 + 5) == {
        "va-1": AttachmentSnap("w1", "pv-1", True),
        "va-3": AttachmentSnap("w3", "pv-3", True),
    }
    assert attachments_at(ts, T0 + 20) == {
        "va-1": AttachmentSnap("w1", "pv-1", False),
        "va-2": AttachmentSnap("w2", "pv-1", False),
    }
    assert attachments_at(ts, T0 + 30)["va-2"].attached is True


def test_volume_moved_to_another_node(sim: Sim) -> None:
    _va(sim, "va-1", "observed", "w1", attached=True, attacher="x")
    off = sim.power_off()
    sim.at(360.0, lambda: _va(sim, "va-1", "detached", "w1"))
    sim.at(361.0, lambda: _va(sim, "va-2", "created", "w2", attached=False, attacher="x"))
    sim.at(365.0, lambda: _va(sim, "va-2", "attached", "w2"))
    m = volume_moved(sim.tl, "pv-1", from_node="w1", since=off, budget_s=420)
    assert m.duration_s == pytest.approx(365.0)
    assert m.detail["to_node"] == "w2" and m.detail["released_from_old_s"] == pytest.approx(360)


def test_volume_not_moved_reports_the_attachments(sim: Sim) -> None:
    _va(sim, "va-1", "observed", "w1", attached=True, attacher="x")
    off = sim.power_off()
    with pytest.raises(CheckFailed) as err:
        volume_moved(sim.tl, "pv-1", from_node="w1", since=off, budget_s=30)
    assert "VolumeAttachment va-1 observed" in err.value.seen
    assert "node=w1" in err.value.seen


def test_multi_attach_seen_and_absent(sim: Sim) -> None:
    off = sim.power_off()
    m = multi_attach_absent(sim.tl, since=off, until=T0 + 30)
    assert m.duration_s == pytest.approx(30) and sim.clock.monotonic() == pytest.approx(T0 + 30)
    sim.at(45.0, lambda: sim.rec("Pod", "web-0", "multi-attach", "ns", volume="pvc-1", count=1))
    seen = multi_attach_seen(sim.tl, since=off, budget_s=60, volume="pvc-1")
    assert seen.duration_s == pytest.approx(45) and seen.detail["pod"] == "ns/web-0"
    with pytest.raises(CheckFailed, match=r"multi-attach at \+.*45\.0s after"):
        multi_attach_absent(sim.tl, since=off, until=T0 + 600, pod="web-0", namespace="ns")
    assert multi_attach_absent(sim.tl, since=off, until=T0 + 600, volume="pvc-2").detail == {
        "count": 0
    }
    with pytest.raises(CheckFailed, match="Multi-Attach error for pod ns/web-1"):
        multi_attach_seen(sim.tl, since=off, budget_s=60, namespace="ns", pod="web-1")


def test_measurement_serialises() -> None:
    m = Measurement("x", 1.0, 2.0, 3.0, {"a": 1})
    assert m.to_json() == {
        "name": "x",
        "started_mono": 1.0,
        "duration_s": 2.0,
        "budget_s": 3.0,
        "detail": {"a": 1},
    }
    assert not Measurement("y", 0.0, 5.0, 3.0).within_budget
