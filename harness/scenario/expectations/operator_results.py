"""What the operator's actions must have done, judged per node: the Node objects gone after
their deletion, the out-of-service taint gone after the return, the drain's evictions (every
pod evicted and gone, the DaemonSet pods left, no PodDisruptionBudget broken), and a re-run
Job complete.

The actions themselves are :mod:`harness.scenario.acts.operator` and
:mod:`harness.scenario.acts.jobs`; each function here is what one Then-step of the grammar judges,
with its loops and its "nothing to judge" cases (a skip,
:class:`~harness.scenario.errors.NothingToMeasure`) and the step order it relies on
(:class:`~harness.scenario.errors.MissingStep`).
"""

from __future__ import annotations

from collections.abc import Sequence

import allure

from harness.checks import CheckFailed, available_throughout
from harness.errors import ConfigError
from harness.kube.actions import DrainResult
from harness.kube.client import KubeClient
from harness.kube.names import Act, Change, Stage
from harness.kube.observer import Observer
from harness.kube.timeline import Timeline, Transition
from harness.scenario import lost_pods as L
from harness.scenario.acts import jobs, operator
from harness.scenario.errors import MissingStep, NothingToMeasure
from harness.scenario.expectations import phases
from harness.scenario.expectations.steady_state import Baseline
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import PoweredOn, Targets

#: How long after the API showed a change its watch event may still be on its way.
OBSERVER_LAG_S = 5.0


def nodes_gone(
    tl: Timeline, nodes: Sequence[str], resolution: Transition, seconds: float, ms: Measurements
) -> None:
    """Each node's Node object disappears within ``seconds`` of its own delete request (else
    of ``resolution``, the action that provided it)."""
    for node in nodes:
        sent = L.last_action(tl, node, {Act.DELETE_NODE.at(Stage.SENT)}) or resolution
        phases.node_gone(tl, node, sent, seconds, ms)


def out_of_service_gone(
    tl: Timeline, nodes: Sequence[str], powered_on: PoweredOn, seconds: float, ms: Measurements
) -> None:
    """The out-of-service taint was removed from each node after its power-on and the Node
    no longer carries it, within ``seconds`` of the removal request. A node whose removal no
    step asked for is a harness error naming the step, not the cluster's failure."""
    unremoved = [n for n in nodes if L.last_action(tl, n, {Act.UNTAINT.at(Stage.SENT)}) is None]
    if unremoved:
        raise MissingStep(
            f"the out-of-service taint gone from {', '.join(unremoved)}",
            "the out-of-service taint's removal",
            [
                "When the out-of-service taint is removed",
                "When the out-of-service taints are removed",
            ],
        )
    for node in nodes:
        phases.out_of_service_removed(tl, node, powered_on, seconds, ms)


def evicted_all(drained: DrainResult, targets: Targets, tl: Timeline) -> None:
    """The drain evicted every non-DaemonSet pod of the inventory's workloads on the chosen
    nodes, and the observer saw each gone. Nodes that ran none give it nothing to judge."""
    expected = {p.ref for p in targets.pods}
    if not expected:
        raise NothingToMeasure(
            f"no pod of an inventory workload (DaemonSets apart) ran on "
            f"{', '.join(targets.nodes)}: the drain had nothing to evict"
        )
    missing = sorted(expected - set(drained.evicted))
    if missing:
        raise CheckFailed(
            f"every pod of {drained.node} evicted ({len(expected)} expected)",
            f"not evicted: {', '.join(missing) or 'none'}; evicted: {', '.join(drained.evicted)}",
            drained.duration_s,
        )
    # The drain saw them gone through the API; the observer's watch reports it a moment later.
    seen_by = tl.clock.monotonic() + OBSERVER_LAG_S
    still = [
        p.ref for p in targets.pods if L.await_pod_event(tl, p, {Change.DELETED}, seen_by) is None
    ]
    if still:
        raise CheckFailed("every evicted pod gone", f"still there: {', '.join(still)}", 0.0)
    allure.dynamic.parameter("evicted", ", ".join(drained.evicted), excluded=True)


def daemon_pods_left(drained: DrainResult, targets: Targets, observer: Observer) -> None:
    """The drain skipped the chosen nodes' DaemonSet pods, and each still runs where it ran
    (same uid, not Terminating)."""
    if not targets.daemon_pods:
        raise NothingToMeasure(f"no DaemonSet pod ran on {', '.join(targets.nodes)}")
    for p in targets.daemon_pods:
        now = observer.pod(p.namespace, p.name)
        if drained.skipped.get(p.ref) != "DaemonSet pod":
            raise CheckFailed(
                f"the drain to skip {p.ref}", f"skipped: {dict(drained.skipped) or 'none'}", 0.0
            )
        if now is None or now.uid != p.uid or now.terminating or now.node != p.node:
            raise CheckFailed(f"{p.ref} still running on {p.node}", str(now), 0.0)


def budgets_respected(
    tl: Timeline, nodes: Sequence[str], baseline: Baseline, ms: Measurements
) -> None:
    """From the drain's start to its end, each workload with a PodDisruptionBudget had at
    least the pods its budget wants healthy Ready (status.desiredHealthy)."""
    start, end = operator.drain_window(tl, nodes)
    protected = [w for w in baseline.workloads if w.pdb_min_healthy is not None]
    if not protected:
        raise NothingToMeasure("no inventory workload has a PodDisruptionBudget")
    for w in protected:
        assert w.pdb_min_healthy is not None
        m = available_throughout(
            tl, w.namespace, w.key, min_ready=w.pdb_min_healthy, start=start, end=end
        )
        ms.note(
            f"{w.ref} fewest Ready during the drain (PDB {w.pdb} wants {w.pdb_min_healthy})",
            m.detail.get("lowest"),
        )


def job_completes(
    name: str,
    rerun: jobs.Rerun,
    tl: Timeline,
    kube: KubeClient,
    seconds: float,
    ms: Measurements,
) -> None:
    """The Job named is the one re-run in this scenario (else a harness error), and it
    completes (:func:`~harness.scenario.acts.jobs.completes`)."""
    if name != rerun.name:
        raise ConfigError(
            f"the Job {name!r} was not re-run in this scenario (re-run: {rerun.ref})",
            field="scenario",
        )
    jobs.completes(tl, kube, rerun, seconds, ms)
