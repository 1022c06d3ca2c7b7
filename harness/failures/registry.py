"""The failure kinds, registered: :class:`FailureKind` names them (what ``--failure`` and
the Gherkin ``<failure>`` column accept), :data:`REGISTRY` maps each to its strategy.

Adding a kind is its module (a :class:`~harness.failures.base.Failure`) plus one member
here and one entry in :data:`REGISTRY` (docs/DESIGN.md, "Adding a failure kind").
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from harness.failures.base import Failure, register
from harness.failures.graceful import GracefulShutdown
from harness.failures.kubelet_stop import KubeletStop
from harness.failures.partition import Partition
from harness.failures.power_loss import PowerLoss
from harness.failures.reboot import Reboot
from harness.failures.storage_network import StorageNetworkCut


class FailureKind(enum.StrEnum):
    """The ways a scenario can fail a node (the values: each strategy's ``name``)."""

    POWER_OFF = "power"  # forced power-off at the BMC (or ``poweroff --force``)
    GRACEFUL = "graceful"  # graceful shutdown: the OS (and the kubelet) shut down in order
    REBOOT = "reboot"  # power cycle: off, then on again by itself
    PARTITION = "partition"  # the node keeps running, cut off from the API server
    KUBELET_STOP = "kubelet"  # the kubelet stops; containers keep running
    STORAGE_CUT = "storage"  # the node keeps running, cut off its storage network only

    @classmethod
    def parse(cls, text: str) -> FailureKind:
        """``text`` as a kind (its value or its name, any case); else a ``ValueError`` that
        lists the valid values."""
        key = text.strip().lower().replace("_", "-")
        for kind in cls:
            if key in (kind.value, kind.name.lower().replace("_", "-")):
                return kind
        valid = ", ".join(k.value for k in cls)
        raise ValueError(f"unknown failure kind {text!r}; valid: {valid}")


#: Each kind's strategy (every kind has one: tests/unit/test_failure_kinds.py checks it).
REGISTRY: Final[Mapping[FailureKind, Failure]] = {
    FailureKind.POWER_OFF: register(PowerLoss()),
    FailureKind.GRACEFUL: register(GracefulShutdown()),
    FailureKind.REBOOT: register(Reboot()),
    FailureKind.PARTITION: register(Partition()),
    FailureKind.KUBELET_STOP: register(KubeletStop()),
    FailureKind.STORAGE_CUT: register(StorageNetworkCut()),
}


def strategy(kind: FailureKind) -> Failure:
    """The strategy of ``kind``."""
    return REGISTRY[kind]
