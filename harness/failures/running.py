"""What the failure kinds that leave the node running share (a network partition, a stopped
kubelet): each is done through the node's first driver that can
(:func:`~harness.failures.base.driver_for`), which arms the undo on the node itself before
the failure, through the session's :meth:`~harness.session.Session.cut` primitive.

A subclass says what its driver is asked (:meth:`do`, :meth:`undo`), what the journal
holds (:meth:`journal_undo`) and which driver capability it needs (:meth:`capable`).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar

from harness.failures.base import Failure, Infliction, driver_for
from harness.journal import UndoSpec
from harness.power.base import UnsupportedFailure
from harness.session import PowerResult, Session
from harness.session.cuts import NodeCut


class RunningNodeFailure(Failure):
    """A failure kind done on a running node through a driver, undone on the node too."""

    undone_on_node: ClassVar[bool] = True

    @abc.abstractmethod
    def journal_undo(self, node: str, protocol: str) -> UndoSpec:
        """The journal's undo for ``node`` failed through ``protocol``."""

    @abc.abstractmethod
    def do(self, driver: Any, node: str, undo_after_s: float) -> None:
        """Arm the undo on the node (after ``undo_after_s``), then fail it."""

    @abc.abstractmethod
    def undo(self, driver: Any, node: str) -> None:
        """Undo it now (idempotent)."""

    def _cut(self, session: Session) -> NodeCut:
        return NodeCut(
            name=self.name,
            verb=self.verb,
            undo_verb=self.undo_verb,
            undo_text=self.undo_text,
            journal_undo=self.journal_undo,
            do=self.do,
            undo=self.undo,
            choose=lambda node: driver_for(session, node, self),
        )

    def unsupported(self, session: Session, nodes: Sequence[str]) -> str | None:
        for node in nodes:
            try:
                driver_for(session, node, self)
            except UnsupportedFailure as exc:
                return str(exc)
        return None

    def inflict(self, session: Session, nodes: list[str], how: Infliction) -> PowerResult:
        """Through each node's own driver that can; back by itself after
        ``how.undo_after_s``."""
        return session.cut(nodes, self._cut(session), undo_after_s=how.undo_after_s)

    def bring_back(
        self, session: Session, nodes: list[str], *, protocol: str | None
    ) -> PowerResult:
        del protocol
        return session.uncut(nodes, self._cut(session))
