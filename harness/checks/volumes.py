"""Checks on volumes: VolumeAttachments moving to another node, Multi-Attach errors."""

from __future__ import annotations

from harness.checks.base import (
    CheckFailed,
    Measurement,
    Ref,
    await_transition,
    ref_label,
    ref_mono,
    uncertainty,
)
from harness.checks.replay import RELEASED
from harness.errors import WaitTimeout
from harness.kube.observer import VOLUME_ATTACHMENT
from harness.kube.timeline import Predicate, Timeline, Transition


def attachments_summary(tl: Timeline, pv: str) -> str:
    """The last transition of every VolumeAttachment of ``pv``, for error messages."""
    last: dict[str, Transition] = {}
    for t in tl.all(VOLUME_ATTACHMENT, where=lambda t: t.detail.get("pv") == pv):
        last[t.name] = t
    if not last:
        return f"no VolumeAttachment of {pv} observed"
    return "; ".join(tl.describe(t) for t in sorted(last.values(), key=lambda t: t.mono))


def volume_moved(
    tl: Timeline, pv: str, *, from_node: str, since: Ref, budget_s: float
) -> Measurement:
    """A VolumeAttachment of ``pv`` on a node other than ``from_node`` became attached."""
    start = ref_mono(since)

    def moved(t: Transition) -> bool:
        return (
            t.kind == VOLUME_ATTACHMENT
            and t.transition == "attached"
            and t.mono > start
            and t.detail.get("pv") == pv
            and t.detail.get("node") != from_node
        )

    t = await_transition(
        tl,
        moved,
        ref=since,
        budget_s=budget_s,
        check="volume-moved",
        expected=(
            f"volume {pv} attached to a node other than {from_node} within {budget_s:g}s "
            f"of {ref_label(tl, since)}"
        ),
        last_seen=lambda: attachments_summary(tl, pv),
    )
    released = tl.first(
        VOLUME_ATTACHMENT,
        after=start,
        where=lambda x: (
            x.transition in RELEASED
            and x.detail.get("pv") == pv
            and x.detail.get("node") == from_node
        ),
    )
    return Measurement(
        "volume-moved",
        start,
        t.mono - start,
        budget_s,
        {
            "pv": pv,
            "from_node": from_node,
            "to_node": t.detail.get("node"),
            "attachment": t.name,
            "released_from_old_s": None if released is None else round(released.mono - start, 3),
            **uncertainty(t),
        },
    )


def _multi_attach(
    namespace: str | None, pod: str | None, volume: str | None, start: float, end: float | None
) -> Predicate:
    def pred(t: Transition) -> bool:
        return (
            t.transition == "multi-attach"
            and t.mono > start
            and (end is None or t.mono <= end)
            and (namespace is None or t.namespace == namespace)
            and (pod is None or t.name == pod)
            and (volume is None or t.detail.get("volume") == volume)
        )

    return pred


def _scope(namespace: str | None, pod: str | None, volume: str | None) -> str:
    parts = [
        f"pod {namespace or '*'}/{pod}" if pod else (f"namespace {namespace}" if namespace else ""),
        f"volume {volume}" if volume else "",
    ]
    return " for " + " and ".join(p for p in parts if p) if any(parts) else ""


def multi_attach_seen(
    tl: Timeline,
    *,
    since: Ref,
    budget_s: float,
    namespace: str | None = None,
    pod: str | None = None,
    volume: str | None = None,
) -> Measurement:
    """A ``Multi-Attach error`` event was seen within budget (the RWO volume still attached
    to the dead node blocks the replacement pod)."""
    start = ref_mono(since)
    scope = _scope(namespace, pod, volume)
    t = await_transition(
        tl,
        _multi_attach(namespace, pod, volume, start, None),
        ref=since,
        budget_s=budget_s,
        check="multi-attach-seen",
        expected=f"a Multi-Attach error{scope} within {budget_s:g}s of {ref_label(tl, since)}",
        last_seen=lambda: "no Multi-Attach error event",
    )
    return Measurement(
        "multi-attach-seen",
        start,
        t.mono - start,
        budget_s,
        {"pod": f"{t.namespace}/{t.name}", "volume": t.detail.get("volume"), **uncertainty(t)},
    )


def multi_attach_absent(
    tl: Timeline,
    *,
    since: Ref,
    until: Ref,
    namespace: str | None = None,
    pod: str | None = None,
    volume: str | None = None,
) -> Measurement:
    """No ``Multi-Attach error`` event in ``(since, until]``; waits until ``until`` if needed,
    failing at the first one."""
    start, end = ref_mono(since), ref_mono(until)
    expected = (
        f"no Multi-Attach error{_scope(namespace, pod, volume)} between "
        f"{ref_label(tl, since)} and {ref_label(tl, until)}"
    )
    try:
        t = tl.wait_for(_multi_attach(namespace, pod, volume, start, end), end, expected)
    except WaitTimeout:
        return Measurement("multi-attach-absent", start, end - start, None, {"count": 0})
    raise CheckFailed(
        expected,
        f"{tl.describe(t)} {t.mono - start:.1f}s after {ref_label(tl, since)}",
        t.mono - start,
        check="multi-attach-absent",
    )
