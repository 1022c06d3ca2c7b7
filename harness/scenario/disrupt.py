"""One dispatch for every way the harness fails nodes and brings them back.

The Gherkin steps, ``powercut longevity`` and the chaostoolkit extension all fail nodes
through :func:`inflict` and bring them back through :func:`restore`, so each
:class:`~harness.power.base.FailureKind` means one thing everywhere:

===============  ========================================  =================================
kind             inflicted by                              restored by
===============  ========================================  =================================
``power``        a forced power-off at the BMC             a power-on
``graceful``     a graceful shutdown at the BMC            a power-on
``reboot``       the BMC's power cycle (``PowerCycle``,    nothing: back by itself (the
                 ``ForceRestart``, chassis power cycle;    cycle is acknowledged once the
                 several nodes, or held off ``off_s``:     node reads on again; it then
                 off together, on together)                boots)
``partition``    the node cut off the network (it runs)    a heal
``kubelet``      the kubelet stopped (containers run)      the kubelet started
===============  ========================================  =================================

Every one goes through the :class:`~harness.session.Session`: blast radius checked and
journaled with its undo before it is done, and recorded on the timeline as
``<verb> sent`` / ``<verb> acknowledged`` (:class:`~harness.kube.names.Act`). Where a node
is down from and back at are :data:`~harness.kube.names.DOWN_FROM` and
:data:`~harness.kube.names.BACK_AT`, applied by :func:`~harness.kube.names.downs`, which
:func:`inflict`, the reports and longevity's measurements all read.

The Kubernetes disruptions (drain, cordon, delete a Node, force-delete its pods, the
out-of-service taint, re-run a Job) are the session's methods, journaled the same way;
:func:`restart_pods` is here because it owes no undo.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from harness.kube import actions
from harness.kube.names import Act, Stage, downs
from harness.kube.timeline import ACTION, Transition
from harness.power.base import FailureKind, UnsupportedFailure
from harness.session import PowerResult, Session

__all__ = [
    "CUT_KINDS",
    "VERBS",
    "Inflicted",
    "Restored",
    "bring_back",
    "inflict",
    "restart_pods",
    "restore",
    "unsupported",
]

#: The kinds a node survives running: its undo is armed on the node before the cut.
CUT_KINDS: Final = frozenset({FailureKind.PARTITION, FailureKind.KUBELET_STOP})
#: Per kind, the action that fails the node and the one that brings it back.
VERBS: Final[Mapping[FailureKind, tuple[Act, Act]]] = {
    FailureKind.POWER_OFF: (Act.POWER_OFF, Act.POWER_ON),
    FailureKind.GRACEFUL: (Act.POWER_OFF, Act.POWER_ON),
    FailureKind.REBOOT: (Act.POWER_CYCLE, Act.POWER_CYCLE),
    FailureKind.PARTITION: (Act.PARTITION, Act.HEAL),
    FailureKind.KUBELET_STOP: (Act.KUBELET_STOP, Act.KUBELET_START),
}


@dataclass(frozen=True)
class Inflicted:
    """A failure done: per node its request (``sent``) and where it went down (``acks``:
    its acknowledgement, :func:`harness.kube.names.downs`), as recorded on the session's
    timeline, and the session's :class:`PowerResult`. A reboot's node went down at the
    power-off's acknowledgement within the cycle (a BMC's own reset, which has none: at the
    cycle's request)."""

    kind: FailureKind
    nodes: tuple[str, ...]
    result: PowerResult
    sent: Mapping[str, Transition]
    acks: Mapping[str, Transition]
    protocol: str  # "" for each node's own driver
    graceful: bool
    since: int  # the timeline's length before the first request

    @property
    def first_sent(self) -> Transition:
        return min(self.sent.values(), key=lambda t: t.mono)

    @property
    def first_ack(self) -> float:
        """When the first node went down (monotonic): its acknowledgement (a reboot's: its
        power-off's, or a BMC reset's request)."""
        return min(t.mono for t in self.acks.values())

    @property
    def back_by_itself(self) -> bool:
        """A reboot: the node is back once the cycle is acknowledged."""
        return self.kind is FailureKind.REBOOT


@dataclass(frozen=True)
class Restored:
    """The nodes brought back: per node the request and its acknowledgement."""

    nodes: tuple[str, ...]
    result: PowerResult
    sent: Mapping[str, Transition]
    acks: Mapping[str, Transition]

    @property
    def first_ack(self) -> float:
        return min(t.mono for t in self.acks.values())


def _recorded(session: Session, before: int, verb: Act, stage: Stage) -> dict[str, Transition]:
    """Per node, its first ``<verb> <stage>`` recorded since position ``before``."""
    name = verb.at(stage)
    out: dict[str, Transition] = {}
    for t in session.timeline.read_from(before):
        if t.kind == ACTION and t.transition == name:
            out.setdefault(t.name, t)
    return out


def unsupported(session: Session, nodes: Sequence[str], kind: FailureKind) -> str | None:
    """Why one of ``nodes`` cannot be failed with ``kind`` (None: each can). Power kinds
    go through each node's power driver, which every node has."""
    if kind not in CUT_KINDS:
        return None
    for node in nodes:
        try:
            session.failure_driver(node, kind)
        except UnsupportedFailure as exc:
            return str(exc)
    return None


def inflict(
    session: Session,
    nodes: Sequence[str],
    kind: FailureKind,
    *,
    undo_after_s: float,
    protocol: str | None = None,
    off_s: float = 0.0,
) -> Inflicted:
    """Fail ``nodes`` together with ``kind`` (see the module's table). ``undo_after_s``:
    after how long a partitioned node heals, a stopped kubelet starts, by itself (armed on
    the node before the cut, in case this process dies); power kinds ignore it (the journal
    holds their undo). ``protocol``: one of each node's power endpoints (power kinds).
    ``off_s``: a reboot's power stays off that long within its one power cycle
    (:meth:`Session.power_cycle`); the other kinds' hold is the caller's."""
    names = list(nodes)
    before = len(session.timeline)
    if kind in (FailureKind.POWER_OFF, FailureKind.GRACEFUL):
        result = session.power_off(names, graceful=kind is FailureKind.GRACEFUL, protocol=protocol)
    elif kind is FailureKind.REBOOT:
        result = session.power_cycle(names, protocol=protocol, off_s=off_s)
    else:
        result = session.cut(names, kind, undo_after_s=undo_after_s)
    verb = VERBS[kind][0]
    sent = _recorded(session, before, verb, Stage.SENT)
    acks = _recorded(session, before, verb, Stage.ACKNOWLEDGED)
    # where each node went down, as longevity and the reports read it (names.downs): a
    # reboot's power-off within the cycle, a BMC's own reset's request
    down = {
        d.node: d.since
        for d in downs(
            (t.name, t.transition, t)
            for t in session.timeline.read_from(before)
            if t.kind == ACTION
        )
    }
    acks = {n: down.get(n, a) for n, a in acks.items()}
    return Inflicted(
        kind, tuple(names), result, sent, acks, protocol or "", kind is FailureKind.GRACEFUL, before
    )


def restore(session: Session, inflicted: Inflicted, *, protocol: str | None = None) -> Restored:
    """Bring the nodes of ``inflicted`` back: power them on, heal the partition, start the
    kubelet. A reboot's nodes came back within the cycle: its return is each node's
    power-on request within the cycle (a BMC's own reset: the cycle's request), its
    acknowledgement the cycle's; later phases (Ready again) measure from that request."""
    if inflicted.back_by_itself:
        on_sent = _recorded(session, inflicted.since, Act.POWER_CYCLE_ON, Stage.SENT)
        cycle_acks = _recorded(session, inflicted.since, Act.POWER_CYCLE, Stage.ACKNOWLEDGED)
        sent = {n: on_sent.get(n, inflicted.sent[n]) for n in inflicted.nodes}
        return Restored(inflicted.nodes, inflicted.result, sent, cycle_acks)
    return bring_back(session, inflicted.nodes, inflicted.kind, protocol=protocol)


def bring_back(
    session: Session, nodes: Sequence[str], kind: FailureKind, *, protocol: str | None = None
) -> Restored:
    """Undo ``kind`` on ``nodes`` now, failed by this process or an earlier one (the journal
    entries are settled): power on, heal, start the kubelet. A reboot owes nothing."""
    names = list(nodes)
    before = len(session.timeline)
    if kind is FailureKind.REBOOT:
        return Restored(tuple(names), PowerResult(names), {}, {})
    if kind in CUT_KINDS:
        result = session.uncut(names, kind)
    else:
        result = session.power_on(names, protocol=protocol)
    verb = VERBS[kind][1]
    return Restored(
        tuple(names),
        result,
        _recorded(session, before, verb, Stage.SENT),
        _recorded(session, before, verb, Stage.ACKNOWLEDGED),
    )


def restart_pods(
    session: Session, namespace: str, selector: str, *, grace_period_s: int | None = None
) -> list[str]:
    """Delete the pods ``selector`` matches in ``namespace`` so their controllers create
    them again (nothing to undo); recorded on the session's timeline. Their names."""
    if session.dry_run:
        session.plan.append(f"restart the pods {selector} in {namespace} (delete them)")
        return []
    return actions.restart_pods(
        session.client,
        namespace,
        selector,
        grace_period_s=grace_period_s,
        timeline=session.timeline,
    )
