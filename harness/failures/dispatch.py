"""One dispatch for every way the harness fails nodes and brings them back: the steps,
``powercut longevity`` and the chaostoolkit extension all call :func:`inflict` and
:func:`restore` (or :func:`bring_back`), so each kind means one thing everywhere, its
strategy's (:mod:`harness.failures.registry`).

Each answer is built from the transitions the session's primitive returned (its
``PowerResult.transitions``): per node the request, where it went down (the strategy's
``down_at``, as :func:`harness.kube.names.downs` applies it for the reports and longevity
too) and where it came back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.failures.base import Infliction
from harness.failures.registry import FailureKind, strategy
from harness.kube.names import Stage, downs
from harness.kube.timeline import ACTION, Transition
from harness.session import PowerResult, Session

__all__ = ["Inflicted", "Restored", "bring_back", "inflict", "restore", "unsupported"]


@dataclass(frozen=True)
class Inflicted:
    """A failure done: per node its request (``sent``) and where it went down (``acks``:
    :func:`harness.kube.names.downs` over its transitions; a reboot's: see
    :mod:`harness.failures.reboot`), and the session's :class:`PowerResult`."""

    kind: FailureKind
    nodes: tuple[str, ...]
    result: PowerResult
    sent: Mapping[str, Transition]
    acks: Mapping[str, Transition]
    protocol: str  # "" for each node's own driver
    graceful: bool

    @property
    def first_sent(self) -> Transition:
        return min(self.sent.values(), key=lambda t: t.mono)

    @property
    def first_ack(self) -> float:
        """When the first node went down (monotonic)."""
        return min(t.mono for t in self.acks.values())

    @property
    def back_by_itself(self) -> bool:
        """The node comes back with nothing done (a reboot)."""
        return strategy(self.kind).back_by_itself


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


def unsupported(session: Session, nodes: Sequence[str], kind: FailureKind) -> str | None:
    """Why one of ``nodes`` cannot be failed with ``kind`` (None: each can)."""
    return strategy(kind).unsupported(session, nodes)


def inflict(
    session: Session,
    nodes: Sequence[str],
    kind: FailureKind,
    *,
    undo_after_s: float,
    protocol: str | None = None,
    off_s: float = 0.0,
) -> Inflicted:
    """Fail ``nodes`` together with ``kind``. ``undo_after_s``: after how long a node
    that stays on (a partition, a kubelet stop) is undone by itself (armed on the node
    before, in case this process dies); the power kinds ignore it (the journal holds
    their undo). ``protocol``: one of each node's power endpoints (power kinds).
    ``off_s``: a reboot's power stays off that long within its one power cycle; the other
    kinds' hold is the caller's."""
    failure = strategy(kind)
    names = list(nodes)
    how = Infliction(undo_after_s=undo_after_s, protocol=protocol, off_s=off_s)
    result = failure.inflict(session, names, how)
    sent = result.first(failure.verb.at(Stage.SENT))
    acks = result.first(failure.verb.at(Stage.ACKNOWLEDGED))
    down = {
        d.node: d.since
        for d in downs((t.name, t.transition, t) for t in result.transitions if t.kind == ACTION)
    }
    acks = {n: down.get(n, a) for n, a in acks.items()}
    return Inflicted(kind, tuple(names), result, sent, acks, protocol or "", failure.graceful)


def restore(session: Session, inflicted: Inflicted, *, protocol: str | None = None) -> Restored:
    """Bring the nodes of ``inflicted`` back (power on, heal, start the kubelet); a kind
    that came back by itself: where its return was within the failure (a reboot's: see
    :mod:`harness.failures.reboot`)."""
    failure = strategy(inflicted.kind)
    if failure.back_by_itself:
        sent, acks = failure.returned(inflicted.result, inflicted.sent)
        return Restored(inflicted.nodes, inflicted.result, sent, acks)
    return bring_back(session, inflicted.nodes, inflicted.kind, protocol=protocol)


def bring_back(
    session: Session, nodes: Sequence[str], kind: FailureKind, *, protocol: str | None = None
) -> Restored:
    """Undo ``kind`` on ``nodes`` now, failed by this process or an earlier one (the journal
    entries are settled). A kind that comes back by itself owes nothing."""
    failure = strategy(kind)
    names = list(nodes)
    result = failure.bring_back(session, names, protocol=protocol)
    return Restored(
        tuple(names),
        result,
        result.first(failure.undo_verb.at(Stage.SENT)),
        result.first(failure.undo_verb.at(Stage.ACKNOWLEDGED)),
    )
