"""Checks on pods: eviction, rescheduling, StatefulSet members, availability, spread."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.checks import phase as P
from harness.checks.base import (
    CheckFailed,
    Measurement,
    Ref,
    covered,
    ref_label,
    ref_mono,
    watch_until,
)
from harness.checks.replay import PodReplay, PodSnap, availability, pods_at
from harness.errors import ConfigError, WaitTimeout
from harness.kube.names import Change
from harness.kube.observer import POD
from harness.kube.timeline import Timeline, Transition


def _names(pods: list[PodSnap], limit: int = 10) -> str:
    names = sorted(f"{p.namespace}/{p.name}" for p in pods)
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more if names else "none"


def pods_evicted(
    tl: Timeline,
    node: str,
    *,
    since: Ref,
    budget_s: float,
    namespace: str | None = None,
    include_daemonsets: bool = False,
    min_pods: int = 1,
) -> Measurement:
    """Every pod on ``node`` at ``since`` got a deletionTimestamp (or vanished) within budget.

    DaemonSet pods (they tolerate the node's taints) and mirror pods are left out unless
    ``include_daemonsets``. Fewer than ``min_pods`` pods on the node at ``since`` fails: a
    check that passes because nothing was there proves nothing. Pods already Terminating at
    ``since`` count as evicted at 0 s. The duration is that of the last pod.
    """
    start = ref_mono(since)
    deadline = start + budget_s
    at_ref = pods_at(tl, start, namespace=namespace)
    targets = {
        uid: p
        for uid, p in at_ref.items()
        if p.node == node and not p.is_mirror and (include_daemonsets or not p.is_daemonset)
    }
    where = f" in {namespace}" if namespace else ""
    expected = (
        f"every pod{where} of node {node} evicted (deletionTimestamp set) within "
        f"{budget_s:g}s of {ref_label(tl, since)}"
    )
    if len(targets) < min_pods:
        raise CheckFailed(
            f"at least {min_pods} pod(s){where} on node {node} at {ref_label(tl, since)}",
            f"{len(targets)} pod(s) there",
            0.0,
            check="pods-evicted",
        )
    if not targets:  # allowed by min_pods=0: nothing to evict
        return Measurement("pods-evicted", start, 0.0, budget_s, {"node": node, "pods": 0})
    phases = {
        uid: P.pod_evicted(p, since=start, already=p.terminating) for uid, p in targets.items()
    }
    done = {uid: ph.at_once(budget_s) for uid, ph in phases.items() if ph.already}
    pending = set(targets) - set(done)

    def pred(t: Transition) -> bool:
        uid = str(t.detail.get("uid"))
        if uid in pending and phases[uid].accepts(t):
            pending.discard(uid)
            done[uid] = phases[uid].reached(t, budget_s)
        return not pending

    if pending:
        try:
            tl.wait_for(pred, deadline, expected)
        except WaitTimeout:
            left = [targets[u] for u in pending]
            raise CheckFailed(
                expected,
                f"{len(done)} of {len(targets)} evicted; still not Terminating: {_names(left)}",
                covered(tl, start, deadline),
                check="pods-evicted",
            ) from None
    last_uid = max(done, key=lambda u: done[u].duration_s)
    took = done[last_uid].duration_s
    if took > budget_s:
        p = targets[last_uid]
        raise CheckFailed(
            expected,
            f"last pod {p.namespace}/{p.name} evicted {took:.1f}s after {ref_label(tl, since)}",
            took,
            check="pods-evicted",
            late=True,
        )
    per_pod = {
        f"{targets[u].namespace}/{targets[u].name}": round(m.duration_s, 3) for u, m in done.items()
    }
    return Measurement(
        "pods-evicted",
        start,
        took,
        budget_s,
        {
            "node": node,
            "pods": len(targets),
            "already_terminating": sum(1 for p in targets.values() if p.terminating),
            "first_s": min(per_pod.values()),
            "per_pod_s": per_pod,
        },
    )


def replacement_ready(
    tl: Timeline,
    namespace: str,
    workload: str,
    *,
    not_on: str,
    since: Ref,
    budget_s: float,
    count: int = 1,
) -> Measurement:
    """``count`` new pods of ``workload`` (``Kind/name``) became Ready off ``not_on``.

    A replacement is a pod that did not exist at ``since`` (a StatefulSet's re-created
    member has the same name but a new uid, so it counts). Each is the phase
    :func:`~harness.checks.phase.pod_ready`, counted from ``since``; the duration is that of
    the ``count``-th.
    """
    start = ref_mono(since)
    deadline = start + budget_s
    baseline = set(pods_at(tl, start, namespace=namespace, workload=workload))
    phase = P.pod_ready(
        since=start, namespace=namespace, workload=workload, not_on=not_on, not_uids=baseline
    )
    ready: dict[str, Transition] = {}
    expected = (
        f"{count} new pod(s) of {namespace}/{workload} Ready on a node other than {not_on} "
        f"within {budget_s:g}s of {ref_label(tl, since)}"
    )

    def pred(t: Transition) -> bool:
        if phase.accepts(t):
            ready.setdefault(str(t.detail.get("uid")), t)
        return len(ready) >= count

    def seen() -> str:
        replay = PodReplay(namespace, workload)
        replay.feed_all(tl.snapshot())
        new = [p for u, p in replay.alive.items() if u not in baseline]
        parts = [f"{p.name}@{p.node or '-'}:{'ready' if p.ready else p.phase or '?'}" for p in new]
        return f"{len(ready)} of {count} ready; new pods: {', '.join(parts) or 'none'}"

    try:
        hit = tl.wait_for(pred, deadline, expected, last_seen=seen)
    except WaitTimeout as exc:
        raise CheckFailed(
            expected, exc.last_seen, covered(tl, start, deadline), check="replacement-ready"
        ) from None
    took = phase.reached(hit).duration_s
    if took > budget_s:
        raise CheckFailed(
            expected,
            f"{tl.describe(hit)}, {took:.1f}s after {ref_label(tl, since)}",
            took,
            check="replacement-ready",
            late=True,
        )
    pods = sorted(ready.values(), key=lambda t: t.mono)
    return Measurement(
        "replacement-ready",
        start,
        took,
        budget_s,
        {
            "workload": f"{namespace}/{workload}",
            "pods": [
                {"name": t.name, "node": t.detail.get("node"), "ready_s": round(t.mono - start, 3)}
                for t in pods
            ],
            "relist": any(t.detail.get("relist") for t in pods),
        },
    )


def still_terminating(
    tl: Timeline, namespace: str, pod: str, *, since: Ref, hold_s: float
) -> Measurement:
    """The pod that existed at ``since`` is Terminating ``hold_s`` later and was never deleted.

    Models a StatefulSet member on a dead node: it stays Terminating until the node returns,
    the Node object is deleted, or it is force-deleted. Waits until ``since + hold_s``,
    failing at once if the pod is deleted earlier. The duration is how long it had been
    Terminating at the end.
    """
    start = ref_mono(since)
    end = start + hold_s
    ref = f"{namespace}/{pod}"
    snap = next(
        (p for p in pods_at(tl, start, namespace=namespace).values() if p.name == pod), None
    )
    expected = f"pod {ref} still Terminating {hold_s:g}s after {ref_label(tl, since)}"
    if snap is None:
        raise CheckFailed(
            expected,
            f"pod {ref} did not exist at {ref_label(tl, since)}",
            0.0,
            check="still-terminating",
        )
    uid = snap.uid

    def gone(t: Transition) -> bool:
        return (
            t.kind == POD
            and t.transition == Change.DELETED
            and t.detail.get("uid") == uid
            and start < t.mono <= end
        )

    try:
        t = tl.wait_for(gone, end, expected)
    except WaitTimeout:
        pass
    else:
        raise CheckFailed(
            expected,
            f"pod {ref} deleted {t.mono - start:.1f}s after {ref_label(tl, since)}",
            t.mono - start,
            check="still-terminating",
        )
    final = pods_at(tl, end, namespace=namespace).get(uid)
    if final is None or not final.terminating:
        state = "absent" if final is None else f"phase={final.phase}, ready={final.ready}"
        raise CheckFailed(
            expected, f"pod {ref} not Terminating ({state})", hold_s, check="still-terminating"
        )
    marked = next(
        (
            x.mono
            for x in tl.all(POD, pod, "terminating", namespace=namespace)
            if x.detail.get("uid") == uid
        ),
        final.since,
    )
    return Measurement(
        "still-terminating",
        marked,
        end - marked,
        None,
        {
            "pod": ref,
            "uid": uid,
            "node": final.node,
            "terminating_from_s": round(marked - start, 3),
        },
    )


def available_throughout(
    tl: Timeline,
    namespace: str,
    workload: str,
    *,
    min_ready: int,
    start: Ref,
    end: Ref,
    check: str = "available-throughout",
) -> Measurement:
    """At least ``min_ready`` pods of ``workload`` Ready (and not Terminating) all along.

    Computed from pod Ready transitions by :func:`~harness.checks.replay.availability` (the
    function longevity measures each workload of a cycle with). Waits until ``end`` if it is
    still to come, failing as soon as the count drops below ``min_ready``.
    """
    s, e = ref_mono(start), ref_mono(end)
    expected = (
        f">= {min_ready} Ready pod(s) of {namespace}/{workload} from {ref_label(tl, start)} "
        f"to {ref_label(tl, end)}"
    )
    live = PodReplay(namespace, workload)
    pos = 0

    def dropped() -> bool | None:
        nonlocal pos
        new = tl.read_from(pos)
        pos += len(new)
        for t in new:
            if t.mono <= e:
                live.feed(t)
        if tl.clock.monotonic() > s and len(live.available()) < min_ready:
            return True
        return None

    watch_until(tl, dropped, e)
    until = min(e, tl.clock.monotonic())
    seen = availability(tl.snapshot(), namespace, workload, start=s, until=until)
    lowest_at, lowest = seen.lowest()
    below = seen.time_below(min_ready)
    detail: dict[str, Any] = {
        "workload": f"{namespace}/{workload}",
        "min_ready": min_ready,
        "initial": seen.initial,
        "lowest": lowest,
        "lowest_at_s": round(lowest_at - s, 3),
        "changes": len(seen.changes),
        "time_below_s": round(below, 3),
    }
    if lowest < min_ready:
        raise CheckFailed(
            expected,
            f"{lowest} Ready at {lowest_at - s:.1f}s into the window "
            f"({below:.1f}s below {min_ready} in total)",
            until - s,
            check=check,
            detail=detail,
        )
    return Measurement(check, s, e - s, None, detail)


def quorum_kept(
    tl: Timeline, namespace: str, statefulset: str, *, replicas: int, start: Ref, end: Ref
) -> Measurement:
    """A majority (``replicas // 2 + 1``) of the StatefulSet's members Ready all along."""
    return available_throughout(
        tl,
        namespace,
        f"StatefulSet/{statefulset}",
        min_ready=replicas // 2 + 1,
        start=start,
        end=end,
        check="quorum-kept",
    )


def spread_over_racks(
    tl: Timeline,
    namespace: str,
    workload: str,
    *,
    racks: Mapping[str, str],
    min_racks: int,
    at: Ref | None = None,
) -> Measurement:
    """The Ready pods of ``workload`` are on nodes in at least ``min_racks`` racks.

    ``racks`` maps node name to rack (from the inventory). A pod on a node the map does not
    know is a configuration error, not a failed check.
    """
    when = tl.clock.monotonic() if at is None else ref_mono(at)
    pods = [
        p for p in pods_at(tl, when, namespace=namespace, workload=workload).values() if p.available
    ]
    unknown = sorted({p.node for p in pods if p.node not in racks})
    if unknown:
        raise ConfigError(
            f"nodes {', '.join(unknown)} are not in the rack map; known: "
            f"{', '.join(sorted(racks)) or '(none)'}",
            field="racks",
        )
    by_rack: dict[str, list[str]] = {}
    for p in pods:
        by_rack.setdefault(racks[p.node], []).append(p.name)
    spread = {r: sorted(names) for r, names in sorted(by_rack.items())}
    detail = {"workload": f"{namespace}/{workload}", "pods": len(pods), "racks": spread}
    if len(by_rack) < min_racks:
        label = "now" if at is None else ref_label(tl, at)
        raise CheckFailed(
            f"Ready pods of {namespace}/{workload} spread over >= {min_racks} racks at {label}",
            f"{len(pods)} Ready pod(s) in {len(by_rack)} rack(s): "
            + ("; ".join(f"{r}: {', '.join(n)}" for r, n in spread.items()) or "none"),
            0.0,
            check="spread-over-racks",
            detail=detail,
        )
    return Measurement("spread-over-racks", when, 0.0, None, detail)
