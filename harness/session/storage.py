"""The session's storage-network cut: a node keeps its kubelet and its API connection, only
its path to the storage endpoints the inventory names (``storage_network``) is dropped.

It is done through the node's first driver that can (the primary, then the alternatives,
SSH last: see :mod:`harness.power.storage_cut`), which arms the heal on the node itself
before the cut (back by itself after ``undo_after_s``); the journal holds the heal too, so
a crash or ``powercut recover`` heals earlier. Each primitive returns what it did: the
node -> monotonic times of the request and its acknowledgement.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from harness.errors import ConfigError, PowercutError
from harness.inventory.storage import StorageEndpoint
from harness.journal import UndoSpec
from harness.kube.ledger import BMC
from harness.kube.names import Act, Stage
from harness.power.storage_cut import KIND, SupportsStorageCut
from harness.session.core import SessionCore
from harness.session.parallel import PowerResult, in_parallel


class StorageCutUnsupported(ConfigError):
    """None of the node's drivers can cut its storage network: a scenario that needs it
    skips (a harness limit, never a product failure)."""


class StorageCuts(SessionCore):
    """Cut nodes off their storage network, and give it back."""

    def storage_endpoints(self) -> list[StorageEndpoint]:
        """The inventory's storage endpoints; a :class:`ConfigError` naming the field when
        the inventory has none (nothing is touched)."""
        spec = self.inventory.storage_network
        if spec is None:
            raise ConfigError(
                "a storage-network cut needs the storage endpoints: add "
                "`storage_network: {endpoints: ['10.0.20.5', '10.0.20.0/24:3260']}` to the "
                "inventory" + (f" {self.inventory.source}" if self.inventory.source else "")
            )
        return spec.parsed()

    def storage_driver(self, node: str) -> tuple[SupportsStorageCut, str]:
        """The node's first driver (primary, alternatives, SSH) that can cut its storage
        network, and its protocol; :class:`StorageCutUnsupported` when none can."""
        spec = self.inventory.node(node)
        protocols = [spec.power.driver, *(p.driver for p in spec.power_alternatives)]
        if spec.ssh is not None and "ssh" not in protocols:
            protocols.append("ssh")
        for protocol in dict.fromkeys(protocols):
            try:
                driver = self.driver(node, protocol)
            except PowercutError:
                continue
            if isinstance(driver, SupportsStorageCut):
                return driver, protocol
        raise StorageCutUnsupported(
            f"{node}: none of its drivers ({', '.join(dict.fromkeys(protocols))}) can cut its "
            "storage network (ssh and kind can; ipmi and redfish cannot)"
        )

    def cut_storage(self, nodes: Iterable[str], *, undo_after_s: float) -> PowerResult:
        """Cut the nodes off their storage network, in parallel; they keep running and
        reporting. Checked before anything is cut: the inventory names the endpoints, each
        node has a driver that can, the blast radius allows it."""
        names = list(nodes)
        endpoints = self.storage_endpoints()
        plan = self._check_blast_radius(names, KIND)
        with self.timeline.ledger.waiting(BMC):  # opening an SSH session waits on the node
            chosen = {n: self.storage_driver(n) for n in names}
        shown = ", ".join(str(e) for e in endpoints)
        if self.dry_run:
            for n in names:
                self.plan.append(
                    f"storage cut of {n} from {shown} through {chosen[n][1]}, undone after "
                    f"{undo_after_s:g}s; undo: heal its storage network"
                )
            self.plan.extend(plan.describe())
            return PowerResult(names)
        result = PowerResult(names)

        def one(node: str) -> None:
            driver, protocol = chosen[node]

            def act() -> None:
                result.sent[node] = time.monotonic()
                self.timeline.action(
                    node,
                    Act.STORAGE_CUT.at(Stage.SENT),
                    protocol=protocol,
                    endpoints=shown,
                    undo_after_s=undo_after_s,
                )
                driver.cut_storage(node, endpoints, heal_after_s=undo_after_s)
                result.acknowledged[node] = time.monotonic()
                self.timeline.action(node, Act.STORAGE_CUT.at(Stage.ACKNOWLEDGED))

            self._journaled(KIND, f"node/{node}", UndoSpec.heal_storage(node, protocol), act)
            self.down.add(node)

        in_parallel(names, one, result, "storage cut", timeline=self.timeline, tell=self._tell)
        self.say(
            f"storage cut: {', '.join(names)} off {shown} "
            f"(healed by the nodes after {undo_after_s:g}s)"
        )
        return result

    def heal_storage(self, nodes: Iterable[str]) -> PowerResult:
        """Undo :meth:`cut_storage` now (idempotent: a node powered off and on since is
        healed already, its rules gone with the running kernel)."""
        names = list(nodes)
        result = PowerResult(names)
        if self.dry_run:
            return result

        def one(node: str) -> None:
            driver, protocol = self.storage_driver(node)
            result.sent[node] = time.monotonic()
            self.timeline.action(node, Act.STORAGE_HEAL.at(Stage.SENT), protocol=protocol)
            driver.heal_storage(node)
            result.acknowledged[node] = time.monotonic()
            self.timeline.action(node, Act.STORAGE_HEAL.at(Stage.ACKNOWLEDGED))
            self._undone(KIND, f"node/{node}")
            self.down.discard(node)

        in_parallel(names, one, result, "storage heal", timeline=self.timeline, tell=self._tell)
        return result
