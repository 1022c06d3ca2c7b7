"""Each phase of a failure, defined once: where it starts, the event that ends it and the
detail it reports.

A :class:`Phase` is data and a predicate over :class:`~harness.kube.timeline.Transition`\\ s.
The same phase is measured two ways, by the same code:

* after the fact, :func:`measure` applies it to recorded transitions (longevity measures each
  cycle's saved timeline so);
* live, :func:`await_phase` waits on the :class:`~harness.kube.timeline.Timeline` for the
  same end event until the budget ends (the scenario's checks and the chaos probes).

Both build the result with :meth:`Phase.reached` or :meth:`Phase.open`: one
:class:`~harness.checks.base.Measurement`, ``complete=False`` when the end event was not
seen (its duration is then the time waited, a lower bound). Fed the same transitions, the
two paths return equal measurements (``tests/unit/test_phase.py`` holds them to it).

The phases (constructors below): :func:`node_not_ready`, :func:`node_ready`,
:func:`taint_added`, :func:`pod_event` (any of some pod transitions), :func:`pod_evicted`
(Terminating or deleted), :func:`pod_gone` (deleted), :func:`pod_ready`, :func:`volume_released`,
:func:`volume_attached` and :func:`multi_attach`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.checks.base import (
    CheckFailed,
    Measurement,
    covered,
    ref_label,
    uncertainty,
)
from harness.checks.replay import RELEASED
from harness.errors import WaitTimeout
from harness.kube.names import Change, Kind
from harness.kube.timeline import Predicate, Timeline, Transition

__all__ = [
    "EVICTED",
    "Phase",
    "PodRef",
    "await_phase",
    "end_event",
    "measure",
    "multi_attach",
    "node_not_ready",
    "node_ready",
    "pod_event",
    "pod_evicted",
    "pod_gone",
    "pod_ready",
    "slowest",
    "taint_added",
    "volume_attached",
    "volume_released",
]

NODE, POD, VOLUME_ATTACHMENT = Kind.NODE, Kind.POD, Kind.VOLUME_ATTACHMENT

#: The pod transitions after which a pod no longer runs where it was (evicted or removed).
EVICTED = frozenset({Change.TERMINATING, Change.DELETED})


def _nothing(_t: Transition) -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class Phase:
    """One phase: from ``since`` (mono) to the first transition ``ends`` accepts.

    ``after`` (default ``since``) is where the end event may start to come: longevity
    watches a pod's eviction from the cycle's first power-off acknowledgement but counts it
    from its own node's. ``subject`` is the detail known before the end (the node, the pv);
    ``report`` adds what the end event says. ``already``: the phase had ended when it
    started (a pod already Terminating, a taint already there): 0 s, complete.
    """

    name: str
    kind: str
    since: float
    ends: Predicate
    subject: Mapping[str, Any] = field(default_factory=dict)
    after: float | None = None
    report: Callable[[Transition], Mapping[str, Any]] = _nothing
    already: bool = False

    @property
    def watch_from(self) -> float:
        return self.since if self.after is None else self.after

    def accepts(self, t: Transition) -> bool:
        """Whether ``t`` is this phase's end event."""
        return t.kind == self.kind and t.mono > self.watch_from and self.ends(t)

    def reached(self, t: Transition, budget_s: float | None = None) -> Measurement:
        """The measurement when ``t`` ended the phase."""
        return Measurement(
            self.name,
            self.since,
            max(0.0, t.mono - self.since),
            budget_s,
            {**self.subject, **self.report(t), **uncertainty(t)},
        )

    def at_once(self, budget_s: float | None = None) -> Measurement:
        """The measurement of a phase that had ended when it started (``already``)."""
        return Measurement(self.name, self.since, 0.0, budget_s, {**self.subject, "already": True})

    def open(self, until: float, budget_s: float | None = None) -> Measurement:
        """The measurement of a phase not ended by ``until``: the time waited, incomplete."""
        return Measurement(
            self.name,
            self.since,
            max(0.0, until - self.since),
            budget_s,
            dict(self.subject),
            complete=False,
        )


def end_event(
    phase: Phase, ts: Iterable[Transition], *, until: float | None = None
) -> Transition | None:
    """The first of ``ts`` (in their order) that ends ``phase``, at or before ``until``."""
    for t in ts:
        if phase.accepts(t) and (until is None or t.mono <= until):
            return t
    return None


def measure(
    phase: Phase,
    ts: Sequence[Transition],
    *,
    until: float | None = None,
    budget_s: float | None = None,
) -> Measurement:
    """``phase`` over recorded transitions (sorted by time): complete at its end event, or
    the time waited until ``until`` (default: the last transition) when it never came."""
    if phase.already:
        return phase.at_once(budget_s)
    t = end_event(phase, ts, until=until)
    if t is not None:
        return phase.reached(t, budget_s)
    horizon = until if until is not None else (ts[-1].mono if ts else phase.since)
    return phase.open(horizon, budget_s)


def await_phase(
    tl: Timeline,
    phase: Phase,
    *,
    budget_s: float,
    expected: str,
    last_seen: Callable[[], str],
    ref: float | Transition | None = None,
) -> Measurement:
    """``phase`` on the live timeline: its end event, already recorded or waited for until
    ``budget_s`` after its start. None by then raises :class:`CheckFailed` with what was last
    seen; one after the budget raises it as late (a budget overrun)."""
    if phase.already:
        return phase.at_once(budget_s)
    deadline = phase.since + budget_s
    try:
        t = tl.wait_for(phase.accepts, deadline, expected, last_seen=last_seen)
    except WaitTimeout as exc:
        raise CheckFailed(
            expected, exc.last_seen, covered(tl, phase.since, deadline), check=phase.name
        ) from None
    m = phase.reached(t, budget_s)
    if m.duration_s > budget_s:
        label = ref_label(tl, phase.since if ref is None else ref)
        raise CheckFailed(
            expected,
            f"{tl.describe(t)}, {m.duration_s:.1f}s after {label}",
            m.duration_s,
            check=phase.name,
            late=True,
        )
    return m


def slowest(name: str, ms: Iterable[Measurement]) -> Measurement | None:
    """Several measurements of one phase (one a node, a pod, a volume) as one: the longest,
    incomplete if any of them is (it is then a lower bound). None for none."""
    items = list(ms)
    if not items:
        return None
    top = max(items, key=lambda m: m.duration_s)
    return Measurement(
        name,
        top.started_mono,
        top.duration_s,
        top.budget_s,
        {"of": len(items)},
        complete=all(m.complete for m in items),
    )


# -- the phases ------------------------------------------------------------------------------


def _ready_report(t: Transition) -> Mapping[str, Any]:
    return {"status": t.detail.get("status"), "reason": t.detail.get("reason")}


def _ready_change(name: str, transition: str, node: str, since: float) -> Phase:
    return Phase(
        name,
        NODE,
        since,
        lambda t: t.name == node and t.transition == transition,
        {"node": node},
        report=_ready_report,
    )


def node_not_ready(node: str, *, since: float) -> Phase:
    """The node's Ready condition turned False or Unknown after ``since`` (a power-off
    acknowledgement, a cut)."""
    return _ready_change("node-not-ready", "not-ready", node, since)


def node_ready(node: str, *, since: float) -> Phase:
    """The node's Ready condition turned True after ``since`` (a power-on, a heal)."""
    return _ready_change("node-ready", "ready", node, since)


def taint_added(node: str, taint: str, *, since: float, already: bool = False) -> Phase:
    """The taint (``key:effect``) added to the node after ``since``; ``already``: it was
    on the node at ``since``."""
    return Phase(
        "taint-present",
        NODE,
        since,
        lambda t: (
            t.name == node and t.transition == Change.TAINT_ADDED and t.detail.get("taint") == taint
        ),
        {"node": node, "taint": taint},
        report=lambda _t: {"already": False},
        already=already,
    )


class PodRef(Protocol):
    """What a pod phase needs of a pod: a :class:`~harness.checks.replay.PodSnap`, the
    scenario's ``PodInfo``."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def node(self) -> str: ...


def pod_event(
    pod: PodRef,
    transitions: Collection[str],
    *,
    since: float,
    after: float | None = None,
    already: bool = False,
    name: str = "pod-event",
) -> Phase:
    """This incarnation of the pod (its uid) reached one of ``transitions`` (NotReady,
    Terminating, deleted...) after ``since``."""
    uid = pod.uid
    return Phase(
        name,
        POD,
        since,
        lambda t: t.transition in transitions and t.detail.get("uid") == uid,
        {"pod": f"{pod.namespace}/{pod.name}", "uid": uid, "node": pod.node},
        after=after,
        already=already,
    )


def pod_evicted(
    pod: PodRef, *, since: float, after: float | None = None, already: bool = False
) -> Phase:
    """The pod (this incarnation: its uid) got its deletionTimestamp or vanished after
    ``since``; ``already`` (it was Terminating then): evicted at 0 s."""
    return pod_event(pod, EVICTED, since=since, after=after, already=already, name="pod-evicted")


def pod_gone(pod: PodRef, *, since: float, after: float | None = None) -> Phase:
    """The pod (by uid) deleted from the API after ``since``."""
    return pod_event(pod, {"deleted"}, since=since, after=after, name="pod-deleted")


def pod_ready(
    *,
    since: float,
    namespace: str | None = None,
    uid: str | None = None,
    name: str | None = None,
    workload: str | None = None,
    node: str | None = None,
    not_on: str | None = None,
    not_uids: Collection[str] = (),
    after: float | None = None,
) -> Phase:
    """A pod (this uid; or of that name, that workload) turned Ready after ``since``: on
    ``node``, or off ``not_on``, and not one of ``not_uids`` (the pods there before).

    Where it starts: when the pod that is to become Ready could first exist. For a
    replacement that is the moment its predecessor stopped blocking it (a Deployment pod's
    deletionTimestamp, a StatefulSet member's deletion); for a pod that belongs to its node
    (a DaemonSet's, a finalised StatefulSet member's) the node's power-on; a replacement
    known to the caller can be counted from when it could start (scheduled, its volumes
    attached) and watched from its scheduling (``after``). Counting from the outage itself
    would charge the Ready phase with the eviction that came before it, which has a phase
    of its own (:func:`pod_evicted`).
    """
    excluded = frozenset(not_uids)

    def ends(t: Transition) -> bool:
        d = t.detail
        return (
            t.transition == Change.READY
            and (namespace is None or t.namespace == namespace)
            and (uid is None or d.get("uid") == uid)
            and (name is None or t.name == name)
            and (workload is None or d.get("workload") == workload)
            and (node is None or d.get("node") == node)
            and (not_on is None or d.get("node") != not_on)
            and str(d.get("uid")) not in excluded
        )

    subject: dict[str, Any] = {
        k: v
        for k, v in (
            ("namespace", namespace),
            ("uid", uid),
            ("workload", workload),
            ("node", node),
            ("not_on", not_on),
        )
        if v is not None
    }
    return Phase(
        "pod-ready",
        POD,
        since,
        ends,
        subject,
        after=after,
        report=lambda t: {
            "pod": f"{t.namespace}/{t.name}",
            "uid": t.detail.get("uid"),
            "ready_on": t.detail.get("node"),
        },
    )


def volume_released(pv: str, node: str, *, since: float, after: float | None = None) -> Phase:
    """The VolumeAttachment of ``pv`` on ``node`` detached or deleted after ``since`` (or
    ``after``: the scenario watches from the power cut, counts from the pod's deletion)."""
    return Phase(
        "volume-released",
        VOLUME_ATTACHMENT,
        since,
        lambda t: (
            t.transition in RELEASED and t.detail.get("pv") == pv and t.detail.get("node") == node
        ),
        {"pv": pv, "from_node": node},
        after=after,
        report=lambda t: {"attachment": t.name},
    )


def volume_attached(pv: str, *, since: float, not_on: str | None = None) -> Phase:
    """A VolumeAttachment of ``pv`` attached after ``since`` (to a node other than
    ``not_on``, if given)."""
    return Phase(
        "volume-moved",
        VOLUME_ATTACHMENT,
        since,
        lambda t: (
            t.transition == Change.ATTACHED
            and t.detail.get("pv") == pv
            and (not_on is None or t.detail.get("node") != not_on)
        ),
        {"pv": pv} if not_on is None else {"pv": pv, "from_node": not_on},
        report=lambda t: {"to_node": t.detail.get("node"), "attachment": t.name},
    )


def multi_attach(
    *,
    since: float,
    namespace: str | None = None,
    pod: str | None = None,
    volume: str | None = None,
    until: float | None = None,
) -> Phase:
    """A ``Multi-Attach error`` event (of that pod, namespace, volume, if given) after
    ``since`` (and at or before ``until``)."""
    return Phase(
        "multi-attach-seen",
        POD,
        since,
        lambda t: (
            t.transition == Change.MULTI_ATTACH
            and (until is None or t.mono <= until)
            and (namespace is None or t.namespace == namespace)
            and (pod is None or t.name == pod)
            and (volume is None or t.detail.get("volume") == volume)
        ),
        report=lambda t: {"pod": f"{t.namespace}/{t.name}", "volume": t.detail.get("volume")},
    )
