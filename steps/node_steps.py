"""What the lost nodes go through, as Kubernetes sees them: NotReady, tainted unreachable,
the Node object gone after its deletion, Ready again after the return, the out-of-service
taint gone; and the nodes' DaemonSet pods (NotReady, Ready again, never evicted).

Each step parses its sentence, resolves its limit and calls one phase of
:mod:`harness.scenario.expectations.phases` (or of
:mod:`harness.scenario.expectations.operator_results` /
:mod:`harness.scenario.expectations.replacements` where a phase runs per node or per pod), which
waits for its start event and measures from it.
"""

from __future__ import annotations

from pytest_bdd import then

from harness.budgets import Budgets
from harness.kube.timeline import Timeline, Transition
from harness.scenario.expectations import operator_results, phases, replacements
from harness.scenario.report import Measurements, waiting
from harness.scenario.targets.choice import Outage, PoweredOn, Targets
from harness.steps.support.limits import Limit
from harness.steps.support.phrases import phrase, within


@then(phrase("the node is NotReady within {limit:Limit}"))
@then(phrase("every lost node is NotReady within {limit:Limit}"))
def nodes_not_ready(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """Each node's Ready condition turns False or Unknown, measured from its BMC's power-off
    acknowledgement (a reboot's: its power cycle's power-off, or for a BMC's own reset, which
    has none, the cycle's request). A node that never goes NotReady fails the scenario."""
    with within(limit, budgets, "NotReady: " + ", ".join(outage.nodes)) as seconds:
        phases.nodes_not_ready(timeline, outage, seconds, measurements)


@then(phrase("the node is tainted unreachable within {limit:Limit}"))
@then(phrase("every lost node is tainted unreachable within {limit:Limit}"))
def nodes_tainted_unreachable(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """The node.kubernetes.io/unreachable:NoExecute taint, measured from NotReady. Tainting is
    rate-limited per zone (one node per 10 s upstream), so the k-th node of a rack to be
    tainted gets the limit plus 10 * (k - 1) seconds, as the taint-applied budget documents."""
    seconds = limit.seconds(budgets)
    most = seconds + phases.ZONE_TAINT_INTERVAL_S * (len(outage.nodes) - 1)
    with waiting("unreachable taint: " + ", ".join(outage.nodes), most):
        phases.nodes_tainted(timeline, outage, seconds, measurements, budgets)


@then(phrase("the Node object is gone within {limit:Limit}"))
@then(phrase("every lost Node object is gone within {limit:Limit}"))
def node_object_gone(
    limit: Limit,
    resolution: Transition,
    targets: Targets,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each chosen node's Node object disappears, measured from its delete request."""
    what = "Node deleted: " + ", ".join(targets.nodes)
    with within(limit, budgets, what) as seconds:
        operator_results.nodes_gone(timeline, targets.nodes, resolution, seconds, measurements)


@then(phrase("the node is Ready within {limit:Limit}"))
@then(phrase("every lost node is Ready within {limit:Limit}"))
def nodes_ready_again(
    limit: Limit,
    powered_on: PoweredOn,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each node's Ready condition turns True, measured from its power-on request (after a
    deletion: the re-registered Node turns Ready). A node that never went NotReady (a cut
    or reboot shorter than the node monitor's grace period) is Ready at once (0 s, noted):
    put "NotReady within" before the return to require the transition."""
    with within(limit, budgets, "Ready: " + ", ".join(powered_on.nodes)) as seconds:
        phases.nodes_ready(timeline, powered_on, seconds, measurements)


@then(phrase("the node no longer has the out-of-service taint within {limit:Limit}"))
@then(phrase("no lost node has the out-of-service taint within {limit:Limit}"))
def out_of_service_taint_gone(
    limit: Limit,
    targets: Targets,
    powered_on: PoweredOn,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The out-of-service taint was removed from each chosen node after it powered on (not
    before), and the Node no longer carries it, measured from the removal request."""
    what = "out-of-service taint gone from " + ", ".join(targets.nodes)
    with within(limit, budgets, what) as seconds:
        operator_results.out_of_service_gone(
            timeline, targets.nodes, powered_on, seconds, measurements
        )


@then(phrase("the node's DaemonSet pods are NotReady within {limit:Limit}"))
def daemon_pods_not_ready(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """Each DaemonSet pod of the node turns NotReady, measured from the power-off
    acknowledgement."""
    seconds = limit.seconds(budgets)
    replacements.daemon_pods_not_ready(timeline, outage, seconds, measurements)


@then(phrase("the node's DaemonSet pods are Ready again within {limit:Limit}"))
def daemon_pods_ready_again(
    limit: Limit,
    outage: Outage,
    powered_on: PoweredOn,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """For each DaemonSet that had a pod on the node, a pod of it is Ready on the node after
    the power-on, measured from the power-on request."""
    with within(limit, budgets, "DaemonSet pods Ready again") as seconds:
        phases.daemon_pods_ready_again(timeline, outage, powered_on, seconds, measurements)


@then("the node's DaemonSet pods were never evicted")
def daemon_pods_not_evicted(outage: Outage, timeline: Timeline) -> None:
    """None of the node's DaemonSet pods got a deletionTimestamp or was deleted."""
    phases.daemon_pods_kept(timeline, outage)
