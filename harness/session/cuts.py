"""The session's failures beyond power: a network partition and a stopped kubelet.

The node stays on. Each is done through the node's first driver that can (the primary,
then the alternatives, SSH last), which arms the undo on the node itself before the cut
(back by itself after ``undo_after_s``); the journal holds the undo too, so a crash or
``powercut recover`` undoes it earlier.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from harness.errors import PermanentError, PowercutError
from harness.journal import UndoSpec
from harness.kube.ledger import BMC
from harness.kube.names import Act, Stage
from harness.power.base import (
    FailureKind,
    PowerDriver,
    SupportsKubeletStop,
    SupportsPartition,
    UnsupportedFailure,
    supports,
)
from harness.session.core import SessionCore
from harness.session.parallel import PowerResult, in_parallel


class Cuts(SessionCore):
    """Partition nodes or stop their kubelets, and undo it."""

    def failure_driver(self, node: str, kind: FailureKind) -> tuple[PowerDriver, str]:
        """The node's first driver (primary, then alternatives) that can do ``kind``, and
        its protocol; :class:`UnsupportedFailure` when none can."""
        spec = self.inventory.node(node)
        protocols = [spec.power.driver, *(p.driver for p in spec.power_alternatives)]
        if spec.ssh is not None and "ssh" not in protocols:
            protocols.append("ssh")
        first: PowerDriver | None = None
        for protocol in dict.fromkeys(protocols):
            try:
                driver = self.driver(node, protocol)
            except PowercutError:
                continue
            first = first or driver
            if supports(driver, kind):
                return driver, protocol
        raise UnsupportedFailure.of(node, kind, first if first is not None else object())

    def cut(self, nodes: Iterable[str], kind: FailureKind, *, undo_after_s: float) -> PowerResult:
        """Cut the nodes off the network (``PARTITION``) or stop their kubelets
        (``KUBELET_STOP``), in parallel; they stay on. Each driver arms the undo on the node
        before the cut (back by itself after ``undo_after_s``); the journal holds the undo
        too, so a crash or ``recover`` undoes it earlier. A node whose drivers cannot do
        ``kind`` raises :class:`UnsupportedFailure` before anything is cut."""
        if kind not in (FailureKind.PARTITION, FailureKind.KUBELET_STOP):
            raise PermanentError(f"cut: {kind.value} is not a partition or a kubelet stop")
        names = list(nodes)
        plan = self._check_blast_radius(names, kind.value)
        # Opening each node's driver (an SSH session: connect, key exchange, login) is a
        # wait for the node's answers, as the cut's own requests are.
        with self.timeline.ledger.waiting(BMC):
            chosen = {n: self.failure_driver(n, kind) for n in names}
        if self.dry_run:
            undo_what = "heal" if kind is FailureKind.PARTITION else "start kubelet"
            for n in names:
                self.plan.append(
                    f"{kind.value} {n} through {chosen[n][1]}, undone after "
                    f"{undo_after_s:g}s; undo: {undo_what}"
                )
            self.plan.extend(plan.describe())
            return PowerResult(names)
        result = PowerResult(names)

        verb = Act.PARTITION if kind is FailureKind.PARTITION else Act.KUBELET_STOP

        def one(node: str) -> None:
            driver, protocol = chosen[node]
            if kind is FailureKind.PARTITION:
                assert isinstance(driver, SupportsPartition)
                undo = UndoSpec.heal(node, protocol)
                cut: Callable[[], None] = lambda: driver.partition(  # noqa: E731
                    node, heal_after_s=undo_after_s
                )
            else:
                assert isinstance(driver, SupportsKubeletStop)
                undo = UndoSpec.start_kubelet(node, protocol)
                cut = lambda: driver.stop_kubelet(  # noqa: E731
                    node, restart_after_s=undo_after_s
                )

            def act() -> None:
                result.sent[node] = time.monotonic()
                self.timeline.action(
                    node, verb.at(Stage.SENT), protocol=protocol, undo_after_s=undo_after_s
                )
                cut()
                result.acknowledged[node] = time.monotonic()
                self.timeline.action(node, verb.at(Stage.ACKNOWLEDGED))

            self._journaled(kind.value, f"node/{node}", undo, act)
            self.down.add(node)

        in_parallel(names, one, result, kind.value, timeline=self.timeline, tell=self._tell)
        self.say(f"{kind.value}: {', '.join(names)} (undone by the nodes after {undo_after_s:g}s)")
        return result

    def uncut(self, nodes: Iterable[str], kind: FailureKind) -> PowerResult:
        """Undo :meth:`cut` now: heal the partition, or start the kubelet (idempotent)."""
        names = list(nodes)
        result = PowerResult(names)
        if self.dry_run:
            return result

        def one(node: str) -> None:
            driver, protocol = self.failure_driver(node, kind)
            result.sent[node] = time.monotonic()
            verb = Act.HEAL if kind is FailureKind.PARTITION else Act.KUBELET_START
            self.timeline.action(node, verb.at(Stage.SENT), protocol=protocol)
            if kind is FailureKind.PARTITION:
                assert isinstance(driver, SupportsPartition)
                driver.heal(node)
            else:
                assert isinstance(driver, SupportsKubeletStop)
                driver.start_kubelet(node)
            result.acknowledged[node] = time.monotonic()
            self.timeline.action(node, verb.at(Stage.ACKNOWLEDGED))
            self._undone(kind.value, f"node/{node}")
            self.down.discard(node)

        in_parallel(
            names, one, result, "undo " + kind.value, timeline=self.timeline, tell=self._tell
        )
        return result
