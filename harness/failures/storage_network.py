"""A storage-network cut ("array I/O network failure" in Dell's resiliency module): the node
keeps running, its kubelet and its API connection go on, only its path to the storage
endpoints the inventory names (``storage_network.endpoints``) is dropped. Kubernetes sees a
Ready node; its pods with volumes see their I/O hang, then fail. Nothing moves them by
itself: fencing (power OFF confirmed through the BMC) and the out-of-service taint do.

Inflicted through the node's first driver that can (:class:`SupportsStorageCut`: SSH, kind,
the lab's SSH server), which arms the heal on the node first (``heal_after_s``) and then
adds a firewall chain dropping only the storage endpoints (:mod:`harness.power.storage_cut`);
journaled with the heal as its undo; down from the cut's acknowledgement, back at the
heal's. Comes back when healed (or by the armed timer, or a power cycle: the rules live in
the running kernel), never by itself otherwise. An inventory without ``storage_network``
cannot be cut: a harness error naming the field, before anything is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from harness.errors import ConfigError
from harness.failures.base import Infliction
from harness.failures.running import RunningNodeFailure
from harness.inventory.storage import StorageEndpoint
from harness.journal import UndoSpec
from harness.kube.names import Act
from harness.power.base import SupportsStorageCut
from harness.session import PowerResult, Session
from harness.session.cuts import NodeCut


def endpoints(session: Session) -> list[StorageEndpoint]:
    """The inventory's storage endpoints; a :class:`ConfigError` naming the field when it
    has none."""
    spec = session.inventory.storage_network
    if spec is None:
        where = f" ({session.inventory.source})" if session.inventory.source else ""
        raise ConfigError(
            "a storage-network cut needs the storage endpoints: add `storage_network: "
            "{endpoints: ['10.0.20.5', '10.0.20.0/24:3260']}` to the inventory" + where
        )
    return spec.parsed()


class StorageNetworkCut(RunningNodeFailure):
    name: ClassVar[str] = "storage"
    verb: ClassVar[Act] = Act.STORAGE_CUT
    undo_verb: ClassVar[Act] = Act.STORAGE_HEAL
    journaled: ClassVar[str] = "storage"
    undo_text: ClassVar[str] = "heal the storage network"
    what: ClassVar[str] = "cut off from its storage, kubelet and API connection kept"
    comes_back_by: ClassVar[str] = "the storage heal (armed on the node before the cut)"
    steps: ClassVar[str] = "`the node loses its storage network for ...`, Dell-style `storage`"
    down_text: ClassVar[str] = "the cut's acknowledgement (the firewall chain in place, over SSH)"
    back_text: ClassVar[str] = (
        "the storage heal request (`the node's storage network is back`, the Dell-style "
        "step's end, or a power cycle)"
    )

    def capable(self, driver: object) -> bool:
        return isinstance(driver, SupportsStorageCut)

    def unsupported(self, session: Session, nodes: Sequence[str]) -> str | None:
        endpoints(session)  # no endpoints: a harness error, not a skip
        return super().unsupported(session, nodes)

    def journal_undo(self, node: str, protocol: str) -> UndoSpec:
        return UndoSpec.heal_storage(node, protocol)

    def do(self, driver: Any, node: str, undo_after_s: float) -> None:
        raise AssertionError("cut through _cut(session), which knows the endpoints")

    def undo(self, driver: Any, node: str) -> None:
        assert isinstance(driver, SupportsStorageCut)
        driver.heal_storage(node)

    def _cut(self, session: Session) -> NodeCut:
        eps = endpoints(session)

        def do(driver: Any, node: str, undo_after_s: float) -> None:
            assert isinstance(driver, SupportsStorageCut)
            driver.cut_storage(node, eps, heal_after_s=undo_after_s)

        base = super()._cut(session)
        return NodeCut(
            name=base.name,
            verb=base.verb,
            undo_verb=base.undo_verb,
            undo_text=base.undo_text,
            journal_undo=base.journal_undo,
            do=do,
            undo=base.undo,
            choose=base.choose,
        )

    def inflict(self, session: Session, nodes: list[str], how: Infliction) -> PowerResult:
        """Check the inventory names the storage endpoints before anything is cut. The
        cut nodes are not down to the blast-radius rules afterwards: they stay Ready and
        keep running, and fencing them (powering them off: the remedy) must stay possible;
        the journal still owes their heal."""
        endpoints(session)
        result = super().inflict(session, nodes, how)
        session.down.difference_update(nodes)
        return result
