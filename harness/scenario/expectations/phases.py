"""The expectations about nodes and pods after a failure: each waits on the timeline (up to
a deadline), records what it measured in :class:`~harness.scenario.report.Measurements`
and raises :class:`~harness.checks.CheckFailed` naming every node or pod that missed its
limit. The volumes' are in :mod:`harness.scenario.expectations.volumes`; the disruptions they
measure from in :mod:`harness.scenario.acts.disruptions`.

Each expectation waits, within its budget, for its own start event (the unreachable taint
before eviction, NotReady before the taint) and then for its end event: none relies on an
earlier step having waited. One that has nothing to judge (no pod on the lost nodes, no
DaemonSet pod) raises :class:`~harness.scenario.errors.NothingToMeasure`.

The step definitions in :mod:`harness.steps.scenario_steps` only parse the sentence, resolve
the limit to seconds and call one of these inside ``allure.step``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

import allure

from harness.budgets import Budgets
from harness.checks import (
    UNREACHABLE_NO_EXECUTE,
    CheckFailed,
    node_not_ready,
    node_ready,
    pods_evicted,
    taint_present,
)
from harness.checks import phase as P
from harness.checks.base import fail_if
from harness.checks.replay import PodReplay, node_at
from harness.errors import WaitTimeout
from harness.kube.client import KubeClient
from harness.kube.names import Act, Stage
from harness.kube.observer import NODE
from harness.kube.timeline import Timeline, Transition, match
from harness.scenario import lost_pods as L
from harness.scenario import reads
from harness.scenario.errors import NothingToMeasure
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage, PoweredOn, Restarted
from harness.scenario.targets.workloads import PodInfo, Workload


def _not_ready_within(budgets: Budgets) -> float:
    return max(budgets.node_not_ready, budgets.control_plane_node_not_ready)


def wait_node_event(
    tl: Timeline,
    node: str,
    *,
    after: Transition,
    within_s: float,
    what: str,
    check: str,
    taint: str | None = None,
) -> Transition:
    """The start event of an expectation: ``node``'s first NotReady (or ``taint`` added)
    after ``after``, already seen or waited for until ``within_s`` after it (the phases of
    :mod:`harness.checks.phase`). Its absence by then is a :class:`CheckFailed` (the cluster
    did not do what starts the phase)."""
    phase = (
        P.taint_added(node, taint, since=after.mono)
        if taint is not None
        else P.node_not_ready(node, since=after.mono)
    )
    found = P.end_event(phase, tl.all(NODE, node))
    if found is not None:
        return found
    try:
        return tl.wait_for(phase.accepts, after.mono + within_s, what)
    except WaitTimeout as exc:
        raise CheckFailed(
            f"{what} within {within_s:g}s of {after.transition}",
            exc.last_seen,
            within_s,
            check=check,
        ) from None


def unreachable_taint(tl: Timeline, outage: Outage, node: str, budgets: Budgets) -> Transition:
    """Where eviction starts: ``node``'s unreachable NoExecute taint after the outage, waited
    for within the not-ready and taint budgets (plus the zone's rate limit for each other
    lost node)."""
    within = (
        _not_ready_within(budgets)
        + budgets.taint_applied
        + ZONE_TAINT_INTERVAL_S * (len(outage.nodes) - 1)
    )
    return wait_node_event(
        tl,
        node,
        after=outage.acks.get(node, outage.sent),
        within_s=within,
        what=f"node {node} tainted unreachable (where eviction starts)",
        check="taint-present",
        taint=UNREACHABLE_NO_EXECUTE,
    )


# -- nodes ---------------------------------------------------------------------------------


def nodes_not_ready(
    tl: Timeline, outage: Outage, seconds: float, measurements: Measurements
) -> None:
    for node in outage.nodes:
        m = node_not_ready(tl, node, since=outage.acks[node], budget_s=seconds)
        measurements.check(f"{node} NotReady", m)


def nodes_ready(tl: Timeline, powered_on: PoweredOn, seconds: float, ms: Measurements) -> None:
    """Each node Ready again within ``seconds`` of its return (power-on, heal, kubelet
    start, reboot request). A node that was Ready at that request and never went NotReady
    since (a reboot faster than the node monitor's grace period) is Ready at once: 0 s."""
    for node in powered_on.nodes:
        since = powered_on.sent[node]
        went = P.end_event(P.node_not_ready(node, since=since.mono), tl.all(NODE, node))
        was = node_at(tl, node, since.mono)
        if went is None and was is not None and was.ready == "True":
            ms.record(
                f"{node} Ready after its return",
                0.0,
                seconds,
                {"never_not_ready": True},
                started_mono=since.mono,
            )
            continue
        m = node_ready(tl, node, since=since, budget_s=seconds)
        ms.check(f"{node} Ready after power-on", m)


#: Seconds between two NoExecute taints in one zone: 1 / --node-eviction-rate (0.1 node/s,
#: the upstream default and the lab's). The taint-applied budget's documentation counts on it.
ZONE_TAINT_INTERVAL_S = 10.0


def nodes_tainted(
    tl: Timeline, outage: Outage, seconds: float, ms: Measurements, budgets: Budgets
) -> None:
    """Unreachable NoExecute taint within ``seconds`` of NotReady; the k-th node of a rack to
    be tainted gets ``seconds + ZONE_TAINT_INTERVAL_S * (k - 1)`` (tainting is rate-limited
    per zone)."""

    def allowed(k: int) -> float:
        return seconds + ZONE_TAINT_INTERVAL_S * (k - 1)

    by_rack: dict[str, list[str]] = {}
    for node in outage.nodes:
        by_rack.setdefault(outage.targets.racks.get(node, ""), []).append(node)
    late = []
    for nodes in by_rack.values():
        seen: list[tuple[float, str, float, float]] = []
        for node in nodes:
            not_ready = wait_node_event(
                tl,
                node,
                after=outage.acks[node],
                within_s=_not_ready_within(budgets),
                what=f"node {node} NotReady (where its taint is measured from)",
                check="node-not-ready",
            )
            m = taint_present(
                tl, node, UNREACHABLE_NO_EXECUTE, since=not_ready, budget_s=allowed(len(nodes))
            )
            seen.append((not_ready.mono + m.duration_s, node, m.duration_s, m.started_mono))
        for k, (_, node, took, began) in enumerate(sorted(seen), start=1):
            ms.record(f"{node} unreachable taint", took, allowed(k), started_mono=began)
            if took > allowed(k):
                late.append(f"{node} (tainted {k}. in its rack) after {took:.1f}s")
    fail_if(
        late,
        f"the k-th node of a rack tainted unreachable within {seconds:g}s + "
        f"{ZONE_TAINT_INTERVAL_S:g}s x (k - 1) of NotReady",
        seconds,
        "taint-present",
        late=True,
    )


def node_gone(tl: Timeline, node: str, since: Transition, seconds: float, ms: Measurements) -> None:
    gone = tl.first(NODE, node, "deleted", after=since.mono - 1e-6) or tl.wait_for(
        match(NODE, node, "deleted", after=since),
        since.mono + seconds,
        f"Node {node} deleted within {seconds:g}s",
    )
    ms.record(
        f"{node} Node object deleted", gone.mono - since.mono, seconds, started_mono=since.mono
    )


def out_of_service_removed(
    tl: Timeline, node: str, powered_on: PoweredOn, seconds: float, ms: Measurements
) -> None:
    sent = L.last_action(tl, node, {Act.UNTAINT.at(Stage.SENT)})
    if sent is None or sent.mono < powered_on.sent[node].mono:
        raise CheckFailed(
            f"the out-of-service taint removed from {node} after its power-on",
            "removed before the power-on" if sent else "never removed",
            0.0,
        )
    gone = L.taint_gone(tl, node, L.OUT_OF_SERVICE, sent, seconds)
    ms.record(
        f"{node} out-of-service taint removed",
        gone.mono - sent.mono,
        seconds,
        started_mono=sent.mono,
    )


# -- pods ----------------------------------------------------------------------------------


def pods_terminating(
    tl: Timeline, outage: Outage, seconds: float, ms: Measurements, budgets: Budgets
) -> None:
    """Every non-DaemonSet pod of each lost node Terminating within ``seconds`` of the node's
    unreachable taint (waited for first); nothing to measure without a lost pod."""
    if not outage.lost:
        raise NothingToMeasure(
            "no pod of an inventory workload (DaemonSets apart) ran on the lost nodes "
            f"{', '.join(outage.nodes)}: nothing to evict"
        )
    for node in outage.nodes:
        had = any(p.node == node for p in outage.lost)
        taint = unreachable_taint(tl, outage, node, budgets)
        m = pods_evicted(tl, node, since=taint, budget_s=seconds, min_pods=int(had))
        if had:
            ms.check(f"{node} pods Terminating", m)


def subject_terminating(
    tl: Timeline, outage: Outage, pod: PodInfo, seconds: float, ms: Measurements, budgets: Budgets
) -> None:
    """The subject ``pod`` Terminating within ``seconds`` of its node's unreachable taint
    (waited for first)."""
    taint = unreachable_taint(tl, outage, pod.node, budgets)
    (timed,) = L.wait_pod_transitions(
        tl,
        [pod],
        {"terminating", "deleted"},
        refs={pod.uid: taint},
        limit_s=seconds,
        what=f"{pod.ref} Terminating after its node's taint",
        check="pods-evicted",
    )
    ms.check(f"{pod.ref} Terminating", timed)


def pods_deleted(
    tl: Timeline, pods: Sequence[PodInfo], since: Transition, seconds: float, ms: Measurements
) -> None:
    timed = L.wait_pod_transitions(
        tl,
        pods,
        {"deleted"},
        refs={p.uid: since for p in pods},
        limit_s=seconds,
        what=f"every lost pod deleted after {since.transition}",
        check="pods-deleted",
    )
    for t in timed:
        ms.record(f"{t.detail['pod']} deleted", t.duration_s, seconds, started_mono=t.started_mono)


def rescheduled(
    tl: Timeline, pods: Sequence[PodInfo], outage: Outage, seconds: float, ms: Measurements
) -> dict[str, L.Replacement]:
    found = L.wait_rescheduled(
        tl,
        pods,
        outage.nodes,
        since=outage.sent.mono,
        limit_s=seconds,
        what="every lost pod rescheduled on another node",
    )
    for r in found.values():
        ms.record(
            f"{r.lost.ref} rescheduled",
            r.scheduled.mono - r.ref.mono,
            seconds,
            {"replacement": r.name, "node": r.node},
            started_mono=r.ref.mono,
        )
    return found


def replaced_by_ready(
    tl: Timeline, pods: Sequence[PodInfo], outage: Outage, seconds: float, ms: Measurements
) -> None:
    """Each lost pod's replacement Ready on another node within ``seconds`` of when the lost
    pod stopped blocking it."""
    found = rescheduled(tl, pods, outage, seconds, ms)
    problems, missing = [], False
    for r in found.values():
        phase = P.pod_ready(since=r.ref.mono, uid=r.uid, node=r.node, after=r.scheduled.mono - 1e-6)
        ready = None
        with contextlib.suppress(WaitTimeout):  # reported below
            ready = tl.wait_for(phase.accepts, r.ref.mono + seconds, f"{r.name} Ready")
        if ready is None:
            problems.append(f"missing: {r.lost.ref} -> {r.name}@{r.node} not Ready")
            missing = True
            continue
        reached = phase.reached(ready, seconds)
        took = reached.duration_s
        ms.record(
            f"{r.lost.ref} replaced by a Ready pod",
            took,
            seconds,
            started_mono=reached.started_mono,
        )
        if took > seconds:
            problems.append(f"late: {r.lost.ref} -> {r.name} Ready after {took:.1f}s")
    fail_if(
        problems,
        f"every lost pod replaced by a Ready pod on another node within {seconds:g}s",
        seconds,
        "replacement-ready",
        late=not missing,
    )


def replacement_ready(
    tl: Timeline, pods: Sequence[PodInfo], outage: Outage, seconds: float, ms: Measurements
) -> None:
    """Each replacement Ready within ``seconds`` of when it could start: scheduled and its
    ReadWriteOnce volumes attached to its node."""
    found = L.replacements(tl, pods, outage.nodes, outage.sent.mono)
    missing = [p.ref for p in pods if p.uid not in found]
    fail_if(
        [f"no replacement of {m}" for m in missing], "a replacement of every lost pod", 0.0, "ready"
    )
    late = []
    for r in found.values():
        attached = [
            a
            for pv in r.lost.pvs
            if (
                a := L.attachment_event(
                    tl, pv, on=r.node, transitions={"attached"}, after=outage.sent.mono
                )
            )
            is not None
        ]
        if len(attached) < len(r.lost.pvs):
            raise CheckFailed(
                f"the volumes of {r.name} attached to {r.node} before it can be Ready",
                f"{len(attached)} of {len(r.lost.pvs)} attached",
                0.0,
            )
        start = max([r.scheduled.mono, *(a.mono for a in attached)])
        phase = P.pod_ready(since=start, uid=r.uid, node=r.node, after=r.scheduled.mono - 1e-6)
        ready = tl.wait_for(phase.accepts, start + seconds, f"{r.name} Ready")
        took = phase.reached(ready, seconds).duration_s
        early = ready.mono < start
        ms.record(
            f"{r.name} Ready once it could start",
            took,
            seconds,
            {"ready_before_its_volumes_attached": early},
            started_mono=start,
        )
        if early:
            allure.dynamic.parameter(
                f"{r.name} note",
                "Ready before its volume was attached (a simulated kubelet that does not "
                "wait for volumes, as in the lab)",
                excluded=True,
            )
        if took > seconds:
            late.append(f"{r.name} Ready {took:.1f}s after it could start")
    fail_if(late, f"every replacement Ready within {seconds:g}s", seconds, "ready", late=True)


# -- StatefulSet members -------------------------------------------------------------------


def no_second_member(tl: Timeline, outage: Outage, pod: PodInfo, workload: Workload) -> None:
    """No pod with the lost member ``pod``'s name while it exists; never more pods than
    replicas."""
    replay = PodReplay(pod.namespace, pod.workload)
    most = 0
    for t in sorted(tl.snapshot(), key=lambda t: t.mono):
        replay.feed(t)
        if t.mono < outage.sent.mono:
            continue
        alive = list(replay.alive.values())
        most = max(most, len(alive))
        twins = [p for p in alive if p.name == pod.name and p.uid != pod.uid]
        if twins and pod.uid in replay.alive:
            raise CheckFailed(
                f"no second pod named {pod.name} while the lost one exists",
                f"uid {twins[0].uid} on {twins[0].node} at +{t.mono - tl.start_mono:.1f}s",
                t.mono - outage.sent.mono,
                check="no-double-member",
            )
    if most > workload.desired:
        raise CheckFailed(
            f"at most {workload.desired} pods of {workload.ref}",
            f"{most} at once",
            0.0,
            check="no-double-member",
        )


def member_recreated(
    tl: Timeline,
    outage: Outage,
    pod: PodInfo,
    powered_on: PoweredOn,
    seconds: float,
    ms: Measurements,
) -> None:
    """The member ``pod`` is deleted only after its node powered on, and a new pod with its
    name is Ready within ``seconds`` of that deletion."""
    back = powered_on.sent[pod.node]
    # Any deletion of this incarnation counts (one before the power-on is a failure below).
    gone = tl.wait_for(
        P.pod_gone(pod, since=back.mono, after=-math.inf).accepts,
        back.mono + seconds,
        f"{pod.ref} finalised once its node is back",
    )
    if gone.mono < back.mono:
        raise CheckFailed(
            f"{pod.ref} kept until its node powered on",
            f"deleted {back.mono - gone.mono:.1f}s before the power-on",
            0.0,
            check="no-double-member",
        )

    phase = P.pod_ready(since=gone.mono, namespace=pod.namespace, name=pod.name, not_uids={pod.uid})
    ready = tl.wait_for(phase.accepts, gone.mono + seconds, f"a new {pod.ref} Ready")
    ms.check(f"{pod.ref} re-created and Ready", phase.reached(ready, seconds))


# -- DaemonSets ----------------------------------------------------------------------------


def daemon_pods_ready_again(
    tl: Timeline, outage: Outage, powered_on: PoweredOn, seconds: float, ms: Measurements
) -> None:
    if not outage.targets.daemon_pods:
        raise NothingToMeasure(f"no DaemonSet pod ran on {', '.join(outage.nodes)}")
    for p in outage.targets.daemon_pods:
        ack = powered_on.sent[p.node]
        phase = P.pod_ready(since=ack.mono, namespace=p.namespace, workload=p.workload, node=p.node)
        ready = tl.wait_for(
            phase.accepts,
            ack.mono + seconds,
            f"a pod of {p.workload} Ready on {p.node} after its power-on",
        )
        ms.check(f"{ready.name} Ready after power-on", phase.reached(ready, seconds))


def daemon_pods_kept(tl: Timeline, outage: Outage) -> None:
    if not outage.targets.daemon_pods:
        raise NothingToMeasure(f"no DaemonSet pod ran on {', '.join(outage.nodes)}")
    for p in outage.targets.daemon_pods:
        t = L.pod_event(tl, p, {"terminating", "deleted"})
        if t is not None:
            raise CheckFailed(f"DaemonSet pod {p.ref} kept on {p.node}", tl.describe(t), 0.0)


# -- repopulation runbook: the restarted pods Ready again -----------------------------------


def restarted_ready(
    tl: Timeline, client: KubeClient, restarted: Restarted, seconds: float, ms: Measurements
) -> None:
    """As many Ready pods matching the selector as were restarted, none of them one of the
    deleted ones (by uid: a StatefulSet member comes back under its name), within
    ``seconds`` of the restart request. Re-evaluated on every transition the watches record
    (no polling loop)."""
    gone = set(restarted.pods.values())

    def fresh_ready() -> list[str]:
        return reads.new_ready_pods(client, restarted.namespace, restarted.selector, not_uids=gone)

    def check() -> list[str] | None:
        ready = fresh_ready()
        return ready if len(ready) >= len(restarted.pods) else None

    try:
        ready = tl.wait_until(
            check,
            restarted.sent.mono + seconds,
            f"{len(restarted.pods)} new Ready pods matching {restarted.selector}",
            last_seen=lambda: f"new and Ready: {', '.join(fresh_ready()) or 'none'}",
        )
    except WaitTimeout as exc:
        raise CheckFailed(
            f"the {len(restarted.pods)} restarted pods ({restarted.selector}) replaced by Ready "
            f"pods within {seconds:g}s",
            exc.last_seen,
            seconds,
            check="restarted-ready",
        ) from None
    took = tl.clock.monotonic() - restarted.sent.mono
    ms.record(
        f"{restarted.selector} restarted and Ready",
        took,
        seconds,
        {"pods": ready},
        started_mono=restarted.sent.mono,
    )
