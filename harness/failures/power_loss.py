"""Power loss: a forced power-off at the BMC (or ``poweroff --force`` over SSH), as a PDU
or a rack's feed failing; several nodes are cut together (the session's synchronized
power-off).

Inflicted by :meth:`~harness.session.Session.power_off`; journaled per node before its
request with a power-on as its undo; down from the power-off's acknowledgement, back at the
power-on's. Never comes back by itself: a power-on brings it back (through ``protocol``, or
the node's BMC).
"""

from __future__ import annotations

from typing import ClassVar

from harness.failures.base import Failure, Infliction
from harness.kube.names import Act
from harness.power.base import PowerDriver, ResetType
from harness.session import PowerResult, Session


class PowerLoss(Failure):
    name: ClassVar[str] = "power"
    verb: ClassVar[Act] = Act.POWER_OFF
    undo_verb: ClassVar[Act] = Act.POWER_ON
    journaled: ClassVar[str] = "power_off"
    undo_text: ClassVar[str] = "power on"
    resets: ClassVar[tuple[tuple[ResetType, ...], ...]] = ((ResetType.FORCE_OFF, ResetType.ON),)
    # what the step reference (docs/steps.md) says of it
    what: ClassVar[str] = "forced power-off"
    comes_back_by: ClassVar[str] = "power-on through the BMC"
    steps: ClassVar[str] = "`the node loses power`, Dell-style `power`"
    down_text: ClassVar[str] = "the BMC's power-off acknowledgement (power state read back Off)"
    back_text: ClassVar[str] = "the power-on request"

    def capable(self, driver: object) -> bool:
        return isinstance(driver, PowerDriver)

    def inflict(self, session: Session, nodes: list[str], how: Infliction) -> PowerResult:
        """The session's synchronized power-off (through ``how.protocol``; the journal holds
        the undo, the caller holds the failure)."""
        return session.power_off(nodes, graceful=self.graceful, protocol=how.protocol)

    def bring_back(
        self, session: Session, nodes: list[str], *, protocol: str | None
    ) -> PowerResult:
        return session.power_on(nodes, protocol=protocol)
