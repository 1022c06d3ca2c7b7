"""Queries over the timeline about the pods a disruption took away and what replaced them.

Everything here reads the scenario timeline (the observer's watch transitions and the
harness's own actions); waits block on the timeline until a deadline, never poll. Each
function takes the lost pods it is about (:class:`~harness.scenario.targets.workloads.PodInfo`, from
the ``Given`` step) and returns per-pod measurements, raising
:class:`~harness.checks.CheckFailed` naming every pod that missed its limit.

Where a phase starts follows the budget documentation in :mod:`harness.budgets`:

* a replacement is measured from when its predecessor stopped blocking it: a Deployment pod
  from its deletionTimestamp or its terminal phase (Failed after a graceful node shutdown;
  the ReplicaSet replaces it at once), a StatefulSet member from
  its deletion (a pod with the same name can only be created afterwards);
* a volume is released (its VolumeAttachment on the lost node detached or deleted) measured
  from its pod's deletion, or from the out-of-service taint for that budget;
* a volume is re-attached measured from its release.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.checks import CheckFailed, Measurement
from harness.checks import phase as P
from harness.checks.replay import attachments_at, pods_at
from harness.errors import PermanentError, WaitTimeout
from harness.kube.names import OUT_OF_SERVICE_NO_EXECUTE, Change
from harness.kube.observer import NODE, POD, VOLUME_ATTACHMENT
from harness.kube.timeline import ACTION, Timeline, Transition
from harness.scenario.errors import NothingToMeasure
from harness.scenario.targets.workloads import PodInfo

OUT_OF_SERVICE = OUT_OF_SERVICE_NO_EXECUTE


def _fail(expected: str, late: list[str], missing: list[str], waited: float, check: str) -> None:
    """Raise the failure; a budget overrun (``late``) only when nothing is missing."""
    seen = "; ".join([*(f"late: {x}" for x in late), *(f"missing: {x}" for x in missing)])
    raise CheckFailed(expected, seen, waited, check=check, late=bool(late) and not missing)


# -- references ------------------------------------------------------------------------------


def pod_event(tl: Timeline, pod: PodInfo, transitions: Collection[str]) -> Transition | None:
    """The first of ``transitions`` that happened to this incarnation (uid) of the pod."""
    return next(
        (
            t
            for t in tl.all(POD, pod.name, namespace=pod.namespace)
            if t.transition in transitions and t.detail.get("uid") == pod.uid
        ),
        None,
    )


def await_pod_event(
    tl: Timeline, pod: PodInfo, transitions: Collection[str], deadline: float
) -> Transition | None:
    """:func:`pod_event`, waiting for it until ``deadline`` (on the timeline's clock): for a
    change the harness has already seen through the API, which the watch reports a moment
    later."""
    try:
        return tl.wait_for(
            lambda t: (
                t.kind == POD
                and t.name == pod.name
                and t.namespace == pod.namespace
                and t.transition in transitions
                and t.detail.get("uid") == pod.uid
            ),
            deadline,
            f"{pod.ref} {'/'.join(sorted(transitions))}",
        )
    except WaitTimeout:
        return None


#: Phases a pod never leaves: its ReplicaSet counts it out and replaces it at once.
TERMINAL_PHASES = frozenset({"Failed", "Succeeded"})


def stopped_blocking(tl: Timeline, pod: PodInfo) -> Transition | None:
    """When the pod stopped blocking its replacement (see the module docstring). A
    Deployment pod also stops blocking when it reaches a terminal phase: a kubelet's
    graceful node shutdown ends its pods as Failed, with no deletionTimestamp, and the
    ReplicaSet replaces them then."""
    if pod.kind == "StatefulSet":
        return pod_event(tl, pod, {"deleted"})
    return next(
        (
            t
            for t in tl.all(POD, pod.name, namespace=pod.namespace)
            if t.detail.get("uid") == pod.uid
            and (
                t.transition in {Change.TERMINATING, Change.DELETED}
                or (t.transition == Change.PHASE and t.detail.get("phase") in TERMINAL_PHASES)
            )
        ),
        None,
    )


def node_event(
    tl: Timeline, node: str, transition: str, *, after: float, taint: str | None = None
) -> Transition | None:
    return tl.first(
        NODE,
        node,
        transition,
        after=after,
        where=None if taint is None else (lambda t: t.detail.get("taint") == taint),
    )


def last_action(tl: Timeline, node: str, transitions: Collection[str]) -> Transition | None:
    found = [t for t in tl.all(ACTION, node) if t.transition in transitions]
    return found[-1] if found else None


def require_action(tl: Timeline, node: str, transition: str) -> Transition:
    """The harness's latest ``transition`` action on ``node``; it must have been recorded."""
    found = last_action(tl, node, {transition})
    if found is None:
        raise PermanentError(f"the harness recorded no {transition!r} action for {node}")
    return found


# -- pods --------------------------------------------------------------------------------------


def wait_pod_transitions(
    tl: Timeline,
    pods: Sequence[PodInfo],
    transitions: Collection[str],
    *,
    refs: Mapping[str, Transition],
    limit_s: float,
    what: str,
    check: str,
) -> list[Measurement]:
    """Each pod (by uid) reaches one of ``transitions`` within ``limit_s`` of its ref: the
    phase :func:`~harness.checks.phase.pod_event` of each, already recorded or waited for."""
    if not pods:
        raise NothingToMeasure(f"{what}: no such pod in this scenario")
    phases = {
        p.uid: P.pod_event(p, transitions, since=refs[p.uid].mono, after=-math.inf, name=check)
        for p in pods
    }
    deadline = max(r.mono for r in refs.values()) + limit_s
    found: dict[str, Transition] = {}

    def pred(t: Transition) -> bool:
        uid = str(t.detail.get("uid"))
        phase = phases.get(uid)
        if phase is not None and uid not in found and phase.accepts(t):
            found[uid] = t
        return len(found) >= len(phases)

    with contextlib.suppress(WaitTimeout):  # reported below: what is missing
        tl.wait_for(pred, deadline, what)
    timed, late, missing = [], [], []
    for p in pods:
        t = found.get(p.uid)
        if t is None:
            missing.append(p.ref)
            continue
        m = phases[p.uid].reached(t, limit_s)
        if m.duration_s > limit_s:
            late.append(f"{p.ref} after {m.duration_s:.1f}s")
        timed.append(m)
    if late or missing:
        _fail(f"{what} within {limit_s:g}s", late, missing, limit_s, check)
    return timed


@dataclass(frozen=True)
class Replacement:
    lost: PodInfo
    ref: Transition  # when the lost pod stopped blocking it
    scheduled: Transition  # the replacement's "scheduled" (or first seen on a node) transition

    @property
    def name(self) -> str:
        return self.scheduled.name

    @property
    def uid(self) -> str:
        return str(self.scheduled.detail.get("uid"))

    @property
    def node(self) -> str:
        return str(self.scheduled.detail.get("node"))


def _new_pods_scheduled(
    tl: Timeline, pod: PodInfo, known: Collection[str], exclude: Collection[str], after: float
) -> list[Transition]:
    """'scheduled' transitions of new pods of the pod's workload, off ``exclude``, in order."""
    out = []
    seen: set[str] = set()
    for t in tl.all(POD, namespace=pod.namespace, after=after):
        uid = str(t.detail.get("uid"))
        if (
            t.transition == Change.SCHEDULED
            and t.detail.get("workload") == pod.workload
            and uid not in known
            and uid not in seen
            and t.detail.get("node") not in exclude
            and (pod.kind != "StatefulSet" or t.name == pod.name)
        ):
            seen.add(uid)
            out.append(t)
    return out


def replacements(
    tl: Timeline, lost: Sequence[PodInfo], exclude: Collection[str], since: float
) -> dict[str, Replacement]:
    """The replacement found so far for each lost pod (by lost uid), deterministically:
    a StatefulSet member's is the new pod with its name; a Deployment's lost pods, ordered by
    when they stopped blocking, take the workload's new pods in the order they were
    scheduled."""
    out: dict[str, Replacement] = {}
    groups: dict[tuple[str, str], list[tuple[Transition, PodInfo]]] = {}
    for p in lost:
        ref = stopped_blocking(tl, p)
        if ref is not None:
            groups.setdefault((p.namespace, p.workload), []).append((ref, p))
    for (ns, _), members in groups.items():
        members.sort(key=lambda rp: rp[0].mono)
        known = set(pods_at(tl, since, namespace=ns))
        if members[0][1].kind == "StatefulSet":
            for ref, p in members:
                new = _new_pods_scheduled(tl, p, known, exclude, ref.mono)
                if new:
                    out[p.uid] = Replacement(p, ref, new[0])
        else:
            new = _new_pods_scheduled(tl, members[0][1], known, exclude, members[0][0].mono)
            for (ref, p), t in zip(members, new, strict=False):
                out[p.uid] = Replacement(p, ref, t)
    return out


def wait_rescheduled(
    tl: Timeline,
    lost: Sequence[PodInfo],
    exclude: Collection[str],
    *,
    since: float,
    limit_s: float,
    what: str,
) -> dict[str, Replacement]:
    """Every lost pod has a replacement scheduled off ``exclude`` within ``limit_s`` of the
    moment it stopped blocking it."""
    if not lost:
        raise NothingToMeasure(f"{what}: no such pod was lost in this scenario")
    # Every predecessor must have stopped blocking first (waiting at most the limit).
    refs_deadline = tl.clock.monotonic() + limit_s
    try:
        tl.wait_until(
            lambda: True if all(stopped_blocking(tl, p) for p in lost) else None,
            refs_deadline,
            "the lost pods to stop blocking their replacements",
            last_seen=lambda: ", ".join(p.ref for p in lost if stopped_blocking(tl, p) is None),
        )
    except WaitTimeout as exc:
        raise CheckFailed(
            f"{what}: the lost pods deleted (StatefulSet) or Terminating (Deployment) first",
            f"still blocking: {exc.last_seen}",
            limit_s,
            check="rescheduled",
        ) from None
    deadline = max(r.mono for p in lost if (r := stopped_blocking(tl, p))) + limit_s

    def seen() -> str:
        got = replacements(tl, lost, exclude, since)
        return f"{len(got)} of {len(lost)} replaced"

    with contextlib.suppress(WaitTimeout):  # reported below, pod by pod
        tl.wait_until(
            lambda: True if len(replacements(tl, lost, exclude, since)) == len(lost) else None,
            deadline,
            what,
            last_seen=seen,
        )
    found = replacements(tl, lost, exclude, since)
    late = [
        f"{r.lost.ref} -> {r.name}@{r.node} after {r.scheduled.mono - r.ref.mono:.1f}s"
        for r in found.values()
        if r.scheduled.mono - r.ref.mono > limit_s
    ]
    missing = [p.ref for p in lost if p.uid not in found]
    if late or missing:
        _fail(f"{what} within {limit_s:g}s", late, missing, limit_s, "rescheduled")
    return found


# -- volumes -----------------------------------------------------------------------------------


def attachment_event(
    tl: Timeline, pv: str, *, on: str | None, transitions: Collection[str], after: float
) -> Transition | None:
    """First VolumeAttachment transition of ``pv`` (on node ``on``, if given) after a time."""
    return tl.first(
        VOLUME_ATTACHMENT,
        after=after,
        where=lambda t: (
            t.transition in transitions
            and t.detail.get("pv") == pv
            and (on is None or t.detail.get("node") == on)
        ),
    )


def attached_at(tl: Timeline, pv: str, node: str, at: float) -> bool:
    """Whether ``pv`` had an attached VolumeAttachment on ``node`` at ``at`` (replayed)."""
    return any(
        a.attached and a.pv == pv and a.node == node
        for a in attachments_at(tl.all(VOLUME_ATTACHMENT, before=at + 1e-9), at).values()
    )


def held_volumes(tl: Timeline, pods: Iterable[PodInfo], at: float) -> list[tuple[PodInfo, str]]:
    """(pod, pv) for each ReadWriteOnce volume of the pods attached to the pod's node at
    ``at`` (the volumes the lost node holds)."""
    return [(p, pv) for p in pods for pv in p.pvs if attached_at(tl, pv, p.node, at)]


def taint_gone(
    timeline: Timeline, node: str, taint: str, since: Transition, seconds: float
) -> Transition:
    found = node_event(timeline, node, "taint-removed", after=since.mono, taint=taint)
    if found is not None:
        return found
    return timeline.wait_for(
        lambda t: (
            t.kind == NODE
            and t.name == node
            and t.transition == Change.TAINT_REMOVED
            and t.detail.get("taint") == taint
            and t.mono > since.mono
        ),
        since.mono + seconds,
        f"taint {taint} removed from {node}",
    )
