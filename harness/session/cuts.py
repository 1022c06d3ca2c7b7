"""The session's disruptions of a running node through one of its drivers: the plain
primitive under a network partition, a stopped kubelet and any other failure kind that
leaves the node on (what each is, the failure kinds say: :mod:`harness.failures`).

The node stays on. The cut is done through the driver the failure kind chose for it, which
arms the undo on the node itself before the cut (back by itself after ``undo_after_s``);
the journal holds the undo too, so a crash or ``powercut recover`` undoes it earlier.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from harness.journal import UndoSpec
from harness.kube.ledger import BMC
from harness.kube.names import Act, Stage
from harness.power.base import PowerDriver
from harness.session.core import SessionCore
from harness.session.parallel import PowerResult, in_parallel

#: A node's driver for a cut, and that driver's protocol.
Chosen = tuple[PowerDriver, str]


@dataclass(frozen=True)
class NodeCut:
    """One way to disrupt a running node through a driver, and its undo: what a failure
    kind hands :meth:`Cuts.cut` and :meth:`Cuts.uncut`.

    ``name``: the journal's action and the messages' word (``"partition"``); ``verb`` and
    ``undo_verb``: the timeline's (``<verb> sent`` / ``acknowledged``); ``undo_text``: the
    undo as a dry run describes it; ``journal_undo(node, protocol)``: the journal's undo;
    ``do(driver, node, undo_after_s)``: arm the undo on the node, then cut;
    ``undo(driver, node)``: undo now (idempotent); ``choose(node)``: the node's driver."""

    name: str
    verb: Act
    undo_verb: Act
    undo_text: str
    journal_undo: Callable[[str, str], UndoSpec]
    do: Callable[[Any, str, float], None]
    undo: Callable[[Any, str], None]
    choose: Callable[[str], Chosen]


class Cuts(SessionCore):
    """Disrupt running nodes through a driver (a partition, a kubelet stop), and undo it."""

    def cut(self, nodes: Iterable[str], how: NodeCut, *, undo_after_s: float) -> PowerResult:
        """Cut the nodes ``how`` says, in parallel; they stay on. Each driver arms the undo
        on the node before the cut (back by itself after ``undo_after_s``); the journal
        holds the undo too, so a crash or ``recover`` undoes it earlier. A node without a
        driver that can (``how.choose`` raises) stops it before anything is cut. The result
        holds the transitions it recorded."""
        names = list(nodes)
        plan = self._check_blast_radius(names, how.name)
        # Opening each node's driver (an SSH session: connect, key exchange, login) is a
        # wait for the node's answers, as the cut's own requests are.
        with self.timeline.ledger.waiting(BMC):
            chosen = {n: how.choose(n) for n in names}
        if self.dry_run:
            for n in names:
                self.plan.append(
                    f"{how.name} {n} through {chosen[n][1]}, undone after "
                    f"{undo_after_s:g}s; undo: {how.undo_text}"
                )
            self.plan.extend(plan.describe())
            return PowerResult(names)
        result = PowerResult(names)

        def one(node: str) -> None:
            driver, protocol = chosen[node]

            def act() -> None:
                result.sent[node] = time.monotonic()
                result.transitions.append(
                    self.timeline.action(
                        node, how.verb.at(Stage.SENT), protocol=protocol, undo_after_s=undo_after_s
                    )
                )
                how.do(driver, node, undo_after_s)
                result.acknowledged[node] = time.monotonic()
                result.transitions.append(
                    self.timeline.action(node, how.verb.at(Stage.ACKNOWLEDGED))
                )

            self._journaled(how.name, f"node/{node}", how.journal_undo(node, protocol), act)
            self.down.add(node)

        in_parallel(names, one, result, how.name, timeline=self.timeline, tell=self._tell)
        self.say(f"{how.name}: {', '.join(names)} (undone by the nodes after {undo_after_s:g}s)")
        return result

    def uncut(self, nodes: Iterable[str], how: NodeCut) -> PowerResult:
        """Undo :meth:`cut` now (idempotent); the result holds the transitions it recorded."""
        names = list(nodes)
        result = PowerResult(names)
        if self.dry_run:
            return result

        def one(node: str) -> None:
            driver, protocol = how.choose(node)
            result.sent[node] = time.monotonic()
            result.transitions.append(
                self.timeline.action(node, how.undo_verb.at(Stage.SENT), protocol=protocol)
            )
            how.undo(driver, node)
            result.acknowledged[node] = time.monotonic()
            result.transitions.append(
                self.timeline.action(node, how.undo_verb.at(Stage.ACKNOWLEDGED))
            )
            self._undone(how.name, f"node/{node}")
            self.down.discard(node)

        in_parallel(names, one, result, "undo " + how.name, timeline=self.timeline, tell=self._tell)
        return result
