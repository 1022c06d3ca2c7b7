"""What the lost nodes' pods go through: Terminating, deleted, rescheduled on another node,
replaced by Ready pods; and what a lost StatefulSet member must go through (it stays
Terminating while its node is away, no second copy of it starts, its StatefulSet keeps a
majority Ready, it is re-created once its node is back).

Each step parses its sentence (the subject phrase "every lost pod", "the member", "the
singleton": :mod:`harness.steps.support.phrases`) and calls one function of
:mod:`harness.scenario.expectations.phases`, :mod:`harness.scenario.expectations.replacements`
(which first waits for the event a phase measures from) or
:mod:`harness.scenario.expectations.statefulset_members`.
"""

from __future__ import annotations

import pytest
from pytest_bdd import then

from harness.budgets import Budgets
from harness.kube.timeline import Timeline, Transition
from harness.scenario.expectations import phases, replacements, statefulset_members
from harness.scenario.expectations.steady_state import Baseline
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage, PoweredOn
from harness.scenario.targets.subjects import replaced_elsewhere
from harness.scenario.targets.workloads import Workload
from harness.steps.support.limits import Limit, Subject
from harness.steps.support.phrases import about, members_meant, phrase, subject, within


@then(phrase("the node's pods are Terminating within {limit:Limit}"))
@then(phrase("every lost node's pods are Terminating within {limit:Limit}"))
def pods_terminating(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """Every non-DaemonSet pod on each lost node gets a deletionTimestamp, measured from the
    node's unreachable NoExecute taint (their tolerations run out), which it waits for
    first. Skipped when no pod of an inventory workload ran on the lost nodes."""
    with within(limit, budgets, "pods Terminating on " + ", ".join(outage.nodes)) as seconds:
        phases.pods_terminating(timeline, outage, seconds, measurements, budgets)


@then(phrase("{pod:One} is Terminating within {limit:Limit}"))
def subject_terminating(
    pod: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    outage: Outage,
    workloads: tuple[Workload, ...],
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The pod the scenario is about ("the member", "the singleton") gets a
    deletionTimestamp, measured from its node's unreachable NoExecute taint, which it waits
    for first."""
    plural = "Then every lost node's pods are Terminating within <limit>"
    one = subject(request, outage, pod, workloads, plural)
    with within(limit, budgets, f"{one.ref} Terminating") as seconds:
        phases.subject_terminating(timeline, outage, one, seconds, measurements, budgets)


@then(phrase("the lost pods are deleted within {limit:Limit}"))
def lost_pods_deleted(
    limit: Limit,
    outage: Outage,
    resolution: Transition,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Every lost pod is gone from the API, measured from the operator's action (Node
    deleted, pods force-deleted, out-of-service taint)."""
    with within(limit, budgets, "the lost pods deleted") as seconds:
        phases.pods_deleted(timeline, replaced_elsewhere(outage), resolution, seconds, measurements)


@then(phrase("{pods:Pods} is rescheduled on another node within {limit:Limit}"))
def lost_pods_rescheduled(
    pods: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """A replacement of every lost pod (or of the singleton) is scheduled on a node that is
    not lost, measured from when the lost pod stopped blocking it (Deployment: Terminating;
    StatefulSet: gone). Scheduled, not Ready: a replacement that needs a volume the dead
    node holds cannot start yet."""
    plural = "Then every lost pod is rescheduled on another node within <limit>"
    lost = about(request, outage, pods, workloads, plural)
    seconds = limit.seconds(budgets)
    replacements.judge(
        replacements.RESCHEDULED, timeline, lost, outage, seconds, measurements, budgets.recovery
    )


@then(phrase("every lost pod is replaced by a Ready pod on another node within {limit:Limit}"))
def lost_pods_replaced_ready(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """Every lost pod's replacement is Ready on a node that is not lost, measured from when
    the lost pod stopped blocking it (Deployment: Terminating; StatefulSet: gone)."""
    lost = replaced_elsewhere(outage)
    seconds = limit.seconds(budgets)
    replacements.judge(
        replacements.REPLACED_BY_READY,
        timeline,
        lost,
        outage,
        seconds,
        measurements,
        budgets.recovery,
    )


@then(
    phrase(
        "every lost stateless pod is replaced by a Ready pod on another node within {limit:Limit}"
    )
)
def lost_stateless_pods_replaced_ready(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """As above, for the lost pods without a ReadWriteOnce volume (StatefulSet members and
    pods whose volume the dead node holds must wait). None lost: nothing to judge, skips."""
    lost = replaced_elsewhere(outage, stateless_only=True)
    seconds = limit.seconds(budgets)
    replacements.judge(
        replacements.REPLACED_BY_READY,
        timeline,
        lost,
        outage,
        seconds,
        measurements,
        budgets.recovery,
        what="stateless replacements Ready",
    )


@then(phrase("{pods:Pods_} replacement is Ready within {limit:Limit}"))
def replacements_ready(
    pods: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each replacement (of every lost pod, or of the singleton) is Ready, measured from
    when it could start: scheduled and, if it mounts a ReadWriteOnce volume, that volume
    attached to its node."""
    plural = "Then every lost pod's replacement is Ready within <limit>"
    lost = about(request, outage, pods, workloads, plural)
    seconds = limit.seconds(budgets)
    replacements.judge(
        replacements.REPLACEMENT_READY,
        timeline,
        lost,
        outage,
        seconds,
        measurements,
        budgets.recovery,
    )


@then(phrase("the member stays Terminating for {limit:Limit}"))
@then(phrase("every lost member stays Terminating for {limit:Limit}"))
def member_stays_terminating(
    limit: Limit,
    request: pytest.FixtureRequest,
    outage: Outage,
    workloads: tuple[Workload, ...],
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The StatefulSet member (or every lost one) stays Terminating (never deleted) for the
    whole limit, counted from when it became Terminating: nothing may give up on it while
    its node is away."""
    plural = "Then every lost member stays Terminating for <limit>"
    pods = members_meant(request, outage, workloads, plural)
    statefulset_members.stay_terminating(timeline, pods, limit.seconds(budgets), measurements)


@then("no second copy of the member was started")
@then("no second copy of any lost member was started")
def no_second_member(
    request: pytest.FixtureRequest,
    outage: Outage,
    workloads: tuple[Workload, ...],
    timeline: Timeline,
    baseline: Baseline,
) -> None:
    """While the lost member (or each lost member) existed no other pod had its name, and
    its StatefulSet never had more pods than replicas."""
    plural = "Then no second copy of any lost member was started"
    pods = members_meant(request, outage, workloads, plural)
    statefulset_members.no_second_copy(timeline, outage, pods, baseline)


@then("the StatefulSet kept a majority of its members Ready throughout")
def statefulset_quorum_kept(
    outage: Outage, timeline: Timeline, baseline: Baseline, measurements: Measurements
) -> None:
    """A majority (replicas // 2 + 1) of the lost member's StatefulSet was Ready from the
    power-off until now (of each StatefulSet that lost a member)."""
    statefulset_members.majority_kept(timeline, outage, baseline, measurements)


@then(phrase("the member is re-created and Ready within {limit:Limit}"))
@then(phrase("every lost member is re-created and Ready within {limit:Limit}"))
def member_recreated(
    limit: Limit,
    request: pytest.FixtureRequest,
    outage: Outage,
    workloads: tuple[Workload, ...],
    powered_on: PoweredOn,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The lost member (or each) is deleted only once its node is back, and a new pod with
    its name is Ready within the limit of that deletion."""
    plural = "Then every lost member is re-created and Ready within <limit>"
    pods = members_meant(request, outage, workloads, plural)
    seconds = limit.seconds(budgets)
    statefulset_members.recreated(timeline, outage, pods, powered_on, seconds, measurements)
