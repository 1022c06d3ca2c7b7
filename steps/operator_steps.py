"""What an operator does to Kubernetes in a runbook, and what each must have done: delete
the Node object, force-delete the stuck pods, the out-of-service taint, drain, cordon,
uncordon; the repopulation runbook's restart of pods by selector and re-run of a Job; the
drain's evictions (every pod evicted, the DaemonSet pods left, no PodDisruptionBudget
broken).

Each step parses its sentence and calls one function: the actions in
:mod:`harness.scenario.acts.operator`, :mod:`harness.scenario.expectations.phases` and
:mod:`harness.scenario.acts.jobs`, through the session (which journals each undo before it acts
and fences what needs a confirmed power-off); the judgements in
:mod:`harness.scenario.expectations.operator_results`. The action that freed the stuck pods is the
``resolution`` fixture; ``drained``, ``restarted`` and ``rerun`` are the others.
"""

from __future__ import annotations

from pytest_bdd import then, when

from harness.budgets import Budgets
from harness.kube.actions import DrainResult
from harness.kube.client import KubeClient
from harness.kube.observer import Observer
from harness.kube.timeline import Timeline, Transition
from harness.scenario.acts import disruptions, jobs, operator
from harness.scenario.expectations import operator_results, phases
from harness.scenario.expectations.steady_state import Baseline
from harness.scenario.report import Measurements, waiting
from harness.scenario.targets.choice import Outage, Restarted, Targets
from harness.session import Session
from harness.steps.support.limits import Limit
from harness.steps.support.phrases import phrase, within


@when(
    phrase("the pods labelled {selector} in namespace {namespace} are restarted"),
    target_fixture="restarted",
)
def restart_pods_by_selector(selector: str, namespace: str, session: Session) -> Restarted:
    """Delete the pods the label selector matches so their controllers re-create them (the
    repopulation runbook's "restart pods by selector"). Skips when none matches."""
    return disruptions.restart_pods(session, namespace.strip(), selector.strip().strip('"'))


@then(phrase("the restarted pods are replaced by Ready pods within {limit:Limit}"))
def restarted_pods_ready(
    limit: Limit,
    restarted: Restarted,
    timeline: Timeline,
    kube: KubeClient,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """As many new Ready pods match the selector as were restarted (none of them one of the
    deleted pods, by uid), measured from the restart request."""
    with within(limit, budgets, f"{restarted.selector} Ready again") as seconds:
        phases.restarted_ready(timeline, kube, restarted, seconds, measurements)


@when(
    phrase("the Job {name} in namespace {namespace} is re-run from its manifest"),
    target_fixture="rerun",
)
def rerun_job(name: str, namespace: str, session: Session, budgets: Budgets) -> jobs.Rerun:
    """Delete the Job (propagation Background: its pods go too) and create it again from
    the manifest stored in the journal before the delete (the repopulation runbook's "re-run
    the Jobs"), within the job-rerun budget. Skips when there is no such Job."""
    seconds = budgets.job_rerun
    with waiting(f"Job {namespace.strip()}/{name.strip()} re-run", seconds):
        return jobs.rerun(session, namespace.strip(), name.strip(), seconds)


@then(phrase("the Job {name} completes within {limit:Limit}"))
def job_completes(
    name: str,
    limit: Limit,
    rerun: jobs.Rerun,
    timeline: Timeline,
    kube: KubeClient,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The re-run Job (the new one, by uid) has its Complete condition, measured from its
    re-creation; a Failed condition fails at once."""
    with within(limit, budgets, f"Job {rerun.ref} complete") as seconds:
        operator_results.job_completes(name.strip(), rerun, timeline, kube, seconds, measurements)


@when("the Node object is deleted", target_fixture="resolution")
@when("the Node objects are deleted", target_fixture="resolution")
def delete_node_object(session: Session, targets: Targets) -> Transition:
    """Delete the Node object of every chosen node (undo: re-create it from its manifest)."""
    return operator.delete_nodes(session, targets.nodes)


@when("the node's stuck pods are force-deleted", target_fixture="resolution")
@when("the nodes' stuck pods are force-deleted", target_fixture="resolution")
def force_delete_stuck_pods(session: Session, targets: Targets, outage: Outage) -> Transition:
    """Delete every non-DaemonSet pod bound to each chosen node with grace period 0; on a
    node that is not Ready, only once its BMC confirmed power OFF."""
    return operator.force_delete_pods(session, targets.nodes, outage)


@when("the node is tainted out-of-service", target_fixture="resolution")
@when("the nodes are tainted out-of-service", target_fixture="resolution")
def taint_out_of_service(session: Session, targets: Targets) -> Transition:
    """Add node.kubernetes.io/out-of-service=nodeshutdown:NoExecute to every chosen node,
    each once its BMC confirmed power OFF (undo: remove it)."""
    return operator.taint_out_of_service(session, targets.nodes)


@when("the out-of-service taint is removed")
@when("the out-of-service taints are removed")
def remove_out_of_service_taint(session: Session, targets: Targets) -> None:
    """Remove the out-of-service taint from every chosen node (do it only once they are
    back)."""
    operator.remove_out_of_service_taint(session, targets.nodes)


@when(phrase("the node is drained within {limit:Limit}"), target_fixture="drained")
@when(phrase("the nodes are drained within {limit:Limit}"), target_fixture="drained")
def drain_node(
    limit: Limit,
    session: Session,
    targets: Targets,
    budgets: Budgets,
    measurements: Measurements,
) -> DrainResult:
    """Drain every chosen node in turn: cordon, evict every pod through the Eviction API (a
    PodDisruptionBudget's 429 is retried with backoff), skip DaemonSet pods, wait until the
    evicted pods are gone; all within the limit (undo: uncordon)."""
    with within(limit, budgets, "drain " + ", ".join(targets.nodes)) as seconds:
        return operator.drain_within(session, targets.nodes, seconds, measurements)


@when("the node is cordoned")
@when("the nodes are cordoned")
def cordon_nodes(session: Session, targets: Targets) -> None:
    """Mark every chosen node unschedulable (undo: uncordon)."""
    operator.cordon(session, targets.nodes)


@when("the node is uncordoned")
@when("the nodes are uncordoned")
def uncordon_node(session: Session, targets: Targets) -> None:
    """Mark every chosen node schedulable again."""
    operator.uncordon(session, targets.nodes)


@then("every pod of the node was evicted through the Eviction API")
@then("every pod of the nodes was evicted through the Eviction API")
def drain_evicted_all(drained: DrainResult, targets: Targets, timeline: Timeline) -> None:
    """The drain evicted every non-DaemonSet pod of the inventory's workloads on the chosen
    nodes, and each is gone. Nodes that ran none (a count's random choice can draw them)
    give it nothing to judge: skipped, saying so."""
    operator_results.evicted_all(drained, targets, timeline)


@then("the node's DaemonSet pods were left running")
@then("the nodes' DaemonSet pods were left running")
def drain_left_daemon_pods(drained: DrainResult, targets: Targets, observer: Observer) -> None:
    """The drain skipped the node's DaemonSet pods, and they still run there."""
    operator_results.daemon_pods_left(drained, targets, observer)


@then("no workload went below its PodDisruptionBudget during the drain")
def drain_respected_pdbs(
    drained: DrainResult,
    targets: Targets,
    timeline: Timeline,
    baseline: Baseline,
    measurements: Measurements,
) -> None:
    """From the drain's start to its end, each workload with a PodDisruptionBudget had at
    least the pods its budget wants healthy Ready (status.desiredHealthy)."""
    operator_results.budgets_respected(timeline, targets.nodes, baseline, measurements)
