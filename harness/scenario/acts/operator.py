"""Operator actions on the scenario's chosen nodes, one or many: delete the Node object,
force-delete the stuck pods, the out-of-service taint, drain, cordon, uncordon.

Each acts on every node of the targets in turn (the order the Given chose them), through
the session, which journals the undo before it acts and applies the fencing rules per node
(the out-of-service taint and force-deleting the pods of a node that is not Ready both need
a BMC that confirms that node powered OFF). The steps' singular and plural forms both call
these: "the node" is a one-node target, "the lost nodes" every node chosen.
"""

from __future__ import annotations

from collections.abc import Sequence

import allure

from harness.checks import CheckFailed
from harness.kube.actions import DrainResult
from harness.kube.names import Act, Stage
from harness.kube.timeline import Timeline, Transition
from harness.scenario import lost_pods as L
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage
from harness.session import Session


def _first(tl: Timeline, nodes: Sequence[str], transition: str) -> Transition:
    """The earliest of the harness's latest ``transition`` actions on ``nodes`` (where a
    phase that follows the action on every node is measured from)."""
    return min((L.require_action(tl, n, transition) for n in nodes), key=lambda t: t.mono)


def delete_nodes(session: Session, nodes: Sequence[str]) -> Transition:
    """Delete each Node object (undo: re-create it from its manifest, read before)."""
    for node in nodes:
        session.delete_node(node)
    return _first(session.timeline, nodes, Act.DELETE_NODE.at(Stage.SENT))


def force_delete_pods(session: Session, nodes: Sequence[str], outage: Outage) -> Transition:
    """Force-delete (grace 0) every non-DaemonSet pod bound to each node; on a node that is
    not Ready, only once its BMC confirmed power OFF. Fails when a lost pod of the outage
    was not among those deleted."""
    deleted: list[str] = []
    for node in nodes:
        deleted += session.force_delete_pods(node)
    allure.dynamic.parameter("force-deleted", ", ".join(deleted), excluded=True)
    lost = {p.ref for p in outage.lost if p.node in nodes}
    if lost and not lost & set(deleted):
        raise CheckFailed(
            f"the lost pods of {', '.join(nodes)} force-deleted",
            f"deleted: {', '.join(deleted) or 'none'}",
            0.0,
        )
    return _first(session.timeline, nodes, Act.FORCE_DELETE_PODS.at(Stage.SENT))


def taint_out_of_service(session: Session, nodes: Sequence[str]) -> Transition:
    """node.kubernetes.io/out-of-service=nodeshutdown:NoExecute on each node, each once its
    own BMC confirmed power OFF (undo: remove it)."""
    for node in nodes:
        session.add_out_of_service_taint(node)
    return _first(session.timeline, nodes, Act.TAINT.at(Stage.SENT))


def remove_out_of_service_taint(session: Session, nodes: Sequence[str]) -> None:
    for node in nodes:
        session.remove_out_of_service_taint(node)


def drain(
    session: Session, nodes: Sequence[str], deadline: float, ms: Measurements, budget_s: float
) -> DrainResult:
    """Drain each node in turn (cordon, evictions through the Eviction API, DaemonSet pods
    skipped; undo: uncordon), all within ``deadline`` (monotonic). The result merges the
    nodes' drains: ``node`` names them all."""
    clock = session.timeline.clock
    began = clock.monotonic()
    results: list[DrainResult] = []
    for node in nodes:
        results.append(session.drain(node, timeout_s=max(0.0, deadline - clock.monotonic())))
    merged = DrainResult(
        node=", ".join(nodes),
        evicted=tuple(p for r in results for p in r.evicted),
        skipped={k: v for r in results for k, v in r.skipped.items()},
        attempts=sum(r.attempts for r in results),
        duration_s=sum(r.duration_s for r in results),
    )
    ms.record("drain", merged.duration_s, budget_s, {"nodes": list(nodes)}, started_mono=began)
    ms.note(
        "drain: eviction requests refused (429) or retried", merged.attempts - len(merged.evicted)
    )
    return merged


def drain_within(
    session: Session, nodes: Sequence[str], seconds: float, ms: Measurements
) -> DrainResult:
    """:func:`drain` with ``seconds`` for all the nodes, from now."""
    deadline = session.timeline.clock.monotonic() + seconds
    return drain(session, nodes, deadline, ms, seconds)


def drain_window(tl: Timeline, nodes: Sequence[str]) -> tuple[Transition, Transition]:
    """From the first node's drain request to the last node's drain end."""
    start = _first(tl, nodes, Act.DRAIN.at(Stage.SENT))
    end = max(
        (L.require_action(tl, n, Act.DRAIN.at(Stage.DONE)) for n in nodes), key=lambda t: t.mono
    )
    return start, end


def cordon(session: Session, nodes: Sequence[str]) -> None:
    """Mark each node unschedulable (undo: uncordon)."""
    for node in nodes:
        session.cordon(node)


def uncordon(session: Session, nodes: Sequence[str]) -> None:
    for node in nodes:
        session.uncordon(node)
