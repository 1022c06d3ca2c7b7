"""A network partition: the node keeps running, cut off from the network (the API server,
its peers, its storage) but for the driver's own way in (SSH).

Inflicted through the node's first driver that can (:class:`~harness.power.base.SupportsPartition`),
which arms the heal on the node first (``heal_after_s``); journaled with a heal as its undo;
down from the partition's acknowledgement, back at the heal's. Comes back when healed (or
by the armed timer), never by itself otherwise.
"""

from __future__ import annotations

from typing import Any, ClassVar

from harness.failures.running import RunningNodeFailure
from harness.journal import UndoSpec
from harness.kube.names import Act
from harness.power.base import SupportsPartition


class Partition(RunningNodeFailure):
    name: ClassVar[str] = "partition"
    verb: ClassVar[Act] = Act.PARTITION
    undo_verb: ClassVar[Act] = Act.HEAL
    journaled: ClassVar[str] = "partition"
    undo_text: ClassVar[str] = "heal"
    # what the step reference (docs/steps.md) says of it
    what: ClassVar[str] = "cut off from the API server, still running"
    comes_back_by: ClassVar[str] = "the heal (armed on the node before the cut)"
    steps: ClassVar[str] = "`the node is cut off from the network for ...`, Dell-style `partition`"
    down_text: ClassVar[str] = (
        "the cut's acknowledgement (the node's own firewall rules in place, over SSH)"
    )
    back_text: ClassVar[str] = (
        "the heal request (`the node is reconnected`, or the Dell-style step's end)"
    )

    def capable(self, driver: object) -> bool:
        return isinstance(driver, SupportsPartition)

    def journal_undo(self, node: str, protocol: str) -> UndoSpec:
        return UndoSpec.heal(node, protocol)

    def do(self, driver: Any, node: str, undo_after_s: float) -> None:
        assert isinstance(driver, SupportsPartition)
        driver.partition(node, heal_after_s=undo_after_s)

    def undo(self, driver: Any, node: str) -> None:
        assert isinstance(driver, SupportsPartition)
        driver.heal(node)
