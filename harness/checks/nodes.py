"""Checks on Node transitions: NotReady, Ready again, taints."""

from __future__ import annotations

from harness.checks.base import (
    Measurement,
    Ref,
    await_transition,
    ref_label,
    ref_mono,
    uncertainty,
)
from harness.checks.replay import node_at, node_summary
from harness.kube.observer import NODE
from harness.kube.timeline import Timeline, match

UNREACHABLE_NO_EXECUTE = "node.kubernetes.io/unreachable:NoExecute"
NOT_READY_NO_EXECUTE = "node.kubernetes.io/not-ready:NoExecute"
OUT_OF_SERVICE_NO_EXECUTE = "node.kubernetes.io/out-of-service:NoExecute"


def _ready_change(
    tl: Timeline, node: str, transition: str, label: str, *, since: Ref, budget_s: float
) -> Measurement:
    check = f"node-{transition}"
    t = await_transition(
        tl,
        match(NODE, node, transition, after=since),
        ref=since,
        budget_s=budget_s,
        check=check,
        expected=f"node {node} {label} within {budget_s:g}s of {ref_label(tl, since)}",
        last_seen=lambda: node_summary(tl, node),
    )
    start = ref_mono(since)
    return Measurement(
        check,
        start,
        t.mono - start,
        budget_s,
        {
            "node": node,
            "status": t.detail.get("status"),
            "reason": t.detail.get("reason"),
            **uncertainty(t),
        },
    )


def node_not_ready(tl: Timeline, node: str, *, since: Ref, budget_s: float) -> Measurement:
    """The node's Ready condition turned False or Unknown after ``since``, within budget."""
    return _ready_change(tl, node, "not-ready", "NotReady", since=since, budget_s=budget_s)


def node_ready(tl: Timeline, node: str, *, since: Ref, budget_s: float) -> Measurement:
    """The node's Ready condition turned True after ``since``, within budget."""
    return _ready_change(tl, node, "ready", "Ready", since=since, budget_s=budget_s)


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
    if before is not None and before.present and taint in before.taints:
        return Measurement(
            "taint-present", start, 0.0, budget_s, {"node": node, "taint": taint, "already": True}
        )
    t = await_transition(
        tl,
        match(
            NODE, node, "taint-added", after=since, where=lambda x: x.detail.get("taint") == taint
        ),
        ref=since,
        budget_s=budget_s,
        check="taint-present",
        expected=f"taint {taint} on node {node} within {budget_s:g}s of {ref_label(tl, since)}",
        last_seen=lambda: node_summary(tl, node),
    )
    return Measurement(
        "taint-present",
        start,
        t.mono - start,
        budget_s,
        {"node": node, "taint": taint, "already": False, **uncertainty(t)},
    )
