"""Rebuild object state at any moment by replaying the timeline.

The observer records ``observed`` (initial list) and ``created`` transitions with the full
slim state, then one transition per change; replaying them in recording order gives the
state of every pod and node at any time, without asking the cluster.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from harness.kube.names import VOLUME_RELEASED, Change, Kind
from harness.kube.observer.states import PodState
from harness.kube.timeline import Timeline, Transition

NODE, POD, VOLUME_ATTACHMENT = Kind.NODE, Kind.POD, Kind.VOLUME_ATTACHMENT
_STATE = frozenset({Change.OBSERVED, Change.CREATED})
#: The VolumeAttachment transitions after which the node no longer holds the volume.
RELEASED = VOLUME_RELEASED


#: A pod as a replay rebuilds it: the one pod state (:class:`~harness.kube.observer.PodState`),
#: ``since`` the monotonic time of the transition that produced it.
PodSnap = PodState


class PodReplay:
    """Pod state per uid, fed one transition at a time (optionally filtered)."""

    def __init__(self, namespace: str | None = None, workload: str | None = None) -> None:
        self.namespace = namespace
        self.workload = workload
        self.alive: dict[str, PodSnap] = {}
        self.deleted: dict[str, PodSnap] = {}

    def relevant(self, t: Transition) -> bool:
        return (
            t.kind == POD
            and (self.namespace is None or t.namespace == self.namespace)
            and (self.workload is None or t.detail.get("workload") == self.workload)
            and bool(t.detail.get("uid"))
        )

    def feed(self, t: Transition) -> PodSnap | None:
        """Apply one transition; returns the pod's new snapshot if it changed state."""
        if not self.relevant(t):
            return None
        d = t.detail
        uid = str(d["uid"])
        cur = self.alive.get(uid)
        if t.transition in _STATE:
            snap = PodSnap(
                t.namespace,
                t.name,
                uid,
                str(d.get("node") or ""),
                str(d.get("phase") or ""),
                bool(d.get("ready")),
                bool(d.get("terminating")),
                str(d.get("workload") or ""),
                since=t.mono,
            )
        elif t.transition == Change.DELETED:
            if cur is not None:
                self.deleted[uid] = cur._replace(since=t.mono)
                del self.alive[uid]
            return None
        else:
            if cur is None:  # first heard of after the timeline started: build from detail
                cur = PodSnap(
                    t.namespace,
                    t.name,
                    uid,
                    str(d.get("node") or ""),
                    "",
                    False,
                    False,
                    str(d.get("workload") or ""),
                    since=t.mono,
                )
            node = str(d.get("node") or cur.node)
            if t.transition == Change.READY:
                snap = cur._replace(ready=True, node=node, since=t.mono)
            elif t.transition == Change.NOT_READY:
                snap = cur._replace(ready=False, node=node, since=t.mono)
            elif t.transition == Change.TERMINATING:
                snap = cur._replace(terminating=True, node=node, since=t.mono)
            elif t.transition == Change.SCHEDULED:
                snap = cur._replace(node=node, since=t.mono)
            elif t.transition == Change.PHASE:
                snap = cur._replace(phase=str(d.get("phase") or ""), since=t.mono)
            else:
                return None  # events (multi-attach, ...) do not change pod state
        self.alive[uid] = snap
        return snap

    def feed_all(self, ts: Iterable[Transition]) -> None:
        for t in ts:
            self.feed(t)

    def available(self) -> list[PodSnap]:
        return [p for p in self.alive.values() if p.available]


@dataclass(frozen=True, slots=True)
class Availability:
    """A workload's available pods (Ready, not Terminating) over a window: the count at
    ``start`` and ``(mono, count)`` after each change, up to ``until``."""

    start: float
    until: float
    initial: int
    changes: tuple[tuple[float, int], ...]

    @property
    def points(self) -> list[tuple[float, int]]:
        return [(self.start, self.initial), *self.changes]

    def at(self, mono: float) -> int:
        """The count at ``mono`` (after the transitions stamped then)."""
        count = self.initial
        for m, c in self.changes:
            if m > mono:
                break
            count = c
        return count

    def lowest(self, until: float | None = None) -> tuple[float, int]:
        """(when, count) of the first lowest count, up to ``until`` (default: the end)."""
        end = self.until if until is None else until
        return min(((m, c) for m, c in self.points if m <= end), key=lambda p: p[1])

    def first_at_least(self, n: int, *, since: float) -> float | None:
        """The first moment from ``since`` on at which at least ``n`` were available."""
        if self.at(since) >= n:
            return since
        return next((m for m, c in self.changes if m > since and c >= n), None)

    def time_below(self, n: int) -> float:
        """How long, in total, fewer than ``n`` were available in the window."""
        points = self.points
        ends = [m for m, _ in points[1:]] + [self.until]
        return sum(e - m for (m, c), e in zip(points, ends, strict=True) if c < n)


def availability(
    transitions: Iterable[Transition],
    namespace: str,
    workload: str,
    *,
    start: float,
    until: float,
    not_on: Collection[str] = (),
) -> Availability:
    """The workload's available pods (off the ``not_on`` nodes) from ``start`` to ``until``,
    replayed from the recorded transitions: what a check waits on live and what longevity
    measures a cycle with.

    Transitions stamped at the same instant (one re-list) are applied together, so a pod
    deleted and its replacement found Ready by the same re-list is not a dip.
    """
    replay = PodReplay(namespace, workload)
    excluded = frozenset(not_on)
    ts = sorted(
        (t for t in transitions if replay.relevant(t) and t.mono <= until), key=lambda t: t.mono
    )

    def count() -> int:
        return sum(1 for p in replay.available() if p.node not in excluded)

    changes: list[tuple[float, int]] = []
    initial: int | None = None
    i = 0
    while i < len(ts):
        mono = ts[i].mono
        if mono > start and initial is None:
            initial = count()
        while i < len(ts) and ts[i].mono == mono:
            replay.feed(ts[i])
            i += 1
        if initial is not None:
            now = count()
            if now != (changes[-1][1] if changes else initial):
                changes.append((mono, now))
    if initial is None:
        initial = count()
    return Availability(start, until, initial, tuple(changes))


def pods_at(
    tl: Timeline, at: float, *, namespace: str | None = None, workload: str | None = None
) -> dict[str, PodSnap]:
    """Every pod alive at ``at`` (mono), by uid."""
    replay = PodReplay(namespace, workload)
    replay.feed_all(t for t in tl.snapshot() if t.kind == POD and t.mono <= at)
    return replay.alive


class NodeSnap(NamedTuple):
    name: str
    present: bool
    ready: str
    unschedulable: bool
    taints: frozenset[str]
    since: float


def node_at(tl: Timeline, node: str, at: float) -> NodeSnap | None:
    """The node as it was at ``at`` (mono); None if the timeline never saw it."""
    snap: NodeSnap | None = None
    for t in tl.all(NODE, node):
        if t.mono > at:
            break
        d = t.detail
        if t.transition in _STATE:
            snap = NodeSnap(
                node,
                True,
                str(d.get("ready") or ""),
                bool(d.get("unschedulable")),
                frozenset(str(x) for x in d.get("taints") or ()),
                t.mono,
            )
            continue
        if snap is None:
            snap = NodeSnap(node, True, "", False, frozenset(), t.mono)
        if t.transition in (Change.READY, Change.NOT_READY):
            snap = snap._replace(ready=str(d.get("status") or ""), since=t.mono)
        elif t.transition == Change.TAINT_ADDED:
            snap = snap._replace(taints=snap.taints | {str(d.get("taint"))}, since=t.mono)
        elif t.transition == Change.TAINT_REMOVED:
            snap = snap._replace(taints=snap.taints - {str(d.get("taint"))}, since=t.mono)
        elif t.transition in (Change.CORDONED, Change.UNCORDONED):
            snap = snap._replace(unschedulable=t.transition == Change.CORDONED, since=t.mono)
        elif t.transition == Change.DELETED:
            snap = snap._replace(present=False, since=t.mono)
    return snap


def node_summary(tl: Timeline, node: str, at: float | None = None) -> str:
    """``node w1: Ready=True, taints=..., last: ...`` for error messages."""
    when = tl.clock.monotonic() if at is None else at
    snap = node_at(tl, node, when)
    if snap is None:
        return f"node {node} never observed"
    if not snap.present:
        return f"node {node} deleted at +{snap.since - tl.start_mono:.3f}s"
    last = tl.last(NODE, node, before=when + 1e-9)
    taints = ",".join(sorted(snap.taints)) or "none"
    return (
        f"node {node}: Ready={snap.ready or '?'}, unschedulable={snap.unschedulable}, "
        f"taints={taints}; last transition: {tl.describe(last)}"
    )


class AttachmentSnap(NamedTuple):
    """One VolumeAttachment as it was at some moment."""

    node: str
    pv: str
    attached: bool


def attachments_at(transitions: Iterable[Transition], at: float) -> dict[str, AttachmentSnap]:
    """Every VolumeAttachment (by name) as it was at ``at`` (mono, inclusive), replayed from
    ``transitions`` (any kinds, in recording order); a deleted one is gone. The one replay of
    attachments: the scenario's held volumes and longevity's volume phase both use it."""
    state: dict[str, AttachmentSnap] = {}
    for t in transitions:
        if t.kind != VOLUME_ATTACHMENT:
            continue
        if t.mono > at:
            break
        node, pv = str(t.detail.get("node") or ""), str(t.detail.get("pv") or "")
        if t.transition in _STATE:
            state[t.name] = AttachmentSnap(node, pv, bool(t.detail.get("attached")))
        elif t.transition in (Change.ATTACHED, Change.DETACHED):
            state[t.name] = AttachmentSnap(node, pv, t.transition == Change.ATTACHED)
        elif t.transition == Change.DELETED:
            state.pop(t.name, None)
    return state
