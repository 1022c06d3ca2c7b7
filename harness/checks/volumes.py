"""Checks on volumes: VolumeAttachments moving to another node, Multi-Attach errors."""

from __future__ import annotations

from dataclasses import replace

from harness.checks import phase as P
from harness.checks.base import CheckFailed, Measurement, Ref, ref_label, ref_mono
from harness.errors import WaitTimeout
from harness.kube.observer import VOLUME_ATTACHMENT
from harness.kube.timeline import Timeline, Transition


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
    m = P.await_phase(
        tl,
        P.volume_attached(pv, since=start, not_on=from_node),
        budget_s=budget_s,
        expected=(
            f"volume {pv} attached to a node other than {from_node} within {budget_s:g}s "
            f"of {ref_label(tl, since)}"
        ),
        last_seen=lambda: attachments_summary(tl, pv),
        ref=since,
    )
    released = P.end_event(P.volume_released(pv, from_node, since=start), tl.all(VOLUME_ATTACHMENT))
    return replace(
        m,
        detail={
            **m.detail,
            "released_from_old_s": None if released is None else round(released.mono - start, 3),
        },
    )


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
    return P.await_phase(
        tl,
        P.multi_attach(since=ref_mono(since), namespace=namespace, pod=pod, volume=volume),
        budget_s=budget_s,
        expected=(
            f"a Multi-Attach error{_scope(namespace, pod, volume)} within {budget_s:g}s of "
            f"{ref_label(tl, since)}"
        ),
        last_seen=lambda: "no Multi-Attach error event",
        ref=since,
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
        t = tl.wait_for(
            P.multi_attach(
                since=start, namespace=namespace, pod=pod, volume=volume, until=end
            ).accepts,
            end,
            expected,
        )
    except WaitTimeout:
        return Measurement("multi-attach-absent", start, end - start, None, {"count": 0})
    raise CheckFailed(
        expected,
        f"{tl.describe(t)} {t.mono - start:.1f}s after {ref_label(tl, since)}",
        t.mono - start,
        check="multi-attach-absent",
    )
