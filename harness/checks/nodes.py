"""Checks on Node transitions: NotReady, Ready again, taints."""

from __future__ import annotations

from harness.checks import phase as P
from harness.checks.base import Measurement, Ref, ref_label, ref_mono
from harness.checks.replay import node_at, node_summary
from harness.kube.names import (
    NOT_READY_NO_EXECUTE,
    OUT_OF_SERVICE_NO_EXECUTE,
    UNREACHABLE_NO_EXECUTE,
)
from harness.kube.timeline import Timeline

__all__ = [
    "NOT_READY_NO_EXECUTE",
    "OUT_OF_SERVICE_NO_EXECUTE",
    "UNREACHABLE_NO_EXECUTE",
    "node_not_ready",
    "node_ready",
    "taint_present",
]


def _ready_change(
    tl: Timeline, phase: P.Phase, label: str, since: Ref, budget_s: float
) -> Measurement:
    node = str(phase.subject["node"])
    return P.await_phase(
        tl,
        phase,
        budget_s=budget_s,
        expected=f"node {node} {label} within {budget_s:g}s of {ref_label(tl, since)}",
        last_seen=lambda: node_summary(tl, node),
        ref=since,
    )


def node_not_ready(tl: Timeline, node: str, *, since: Ref, budget_s: float) -> Measurement:
    """The node's Ready condition turned False or Unknown after ``since``, within budget."""
    phase = P.node_not_ready(node, since=ref_mono(since))
    return _ready_change(tl, phase, "NotReady", since, budget_s)


def node_ready(tl: Timeline, node: str, *, since: Ref, budget_s: float) -> Measurement:
    """The node's Ready condition turned True after ``since``, within budget."""
    return _ready_change(tl, P.node_ready(node, since=ref_mono(since)), "Ready", since, budget_s)


def taint_present(
    tl: Timeline,
    node: str,
    taint: str = UNREACHABLE_NO_EXECUTE,
    *,
    since: Ref,
    budget_s: float,
) -> Measurement:
    """The taint (``key:effect``) is on the node within budget; already there counts as 0 s."""
    start = ref_mono(since)
    before = node_at(tl, node, start)
    already = before is not None and before.present and taint in before.taints
    return P.await_phase(
        tl,
        P.taint_added(node, taint, since=start, already=already),
        budget_s=budget_s,
        expected=f"taint {taint} on node {node} within {budget_s:g}s of {ref_label(tl, since)}",
        last_seen=lambda: node_summary(tl, node),
        ref=since,
    )
