"""A reboot: the BMC's power cycle (Redfish ``PowerCycle`` or ``ForceRestart``, IPMI's
chassis power cycle, ``reboot`` over SSH); the node is off, then on again by itself.

This is the one place that says what a reboot means for a measurement (everything else
refers here):

- It comes back by itself: nothing is owed once the cycle is acknowledged, which is when
  the node reads back as on (a BMC reads On while the server POSTs and boots; its kubelet
  comes later). The journal holds a power-on per node anyway, in case the cycle stops
  midway, settled once the node reads on.
- Several nodes, or a cycle held off (``off_s``), are the session's synchronized off and
  on: every node off together, held ``off_s`` from its power-off's read-back, then on
  together (``power-cycle off`` / ``power-cycle on`` within ``power-cycle``). One node not
  held off is the BMC's own reset, which has no power-off of its own.
- The node is down from its power-off's acknowledgement within the cycle; a BMC's own
  reset, which has none, from the cycle's request. It is back from its power-on request
  within the cycle (a BMC's own reset: the cycle's request); the cycle's acknowledgement
  closes it on the timeline. Later phases (Ready again) measure from that request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from harness.failures.base import Failure, Infliction
from harness.kube.names import Act, Stage
from harness.kube.timeline import Transition
from harness.power.base import PowerDriver, ResetType
from harness.session import PowerResult, Session


class Reboot(Failure):
    name: ClassVar[str] = "reboot"
    verb: ClassVar[Act] = Act.POWER_CYCLE
    undo_verb: ClassVar[Act] = Act.POWER_CYCLE
    # the cycle's request opens it; the power-off within the cycle, once acknowledged,
    # is where it is down from instead (harness.kube.names.downs)
    down_at: ClassVar[tuple[str, ...]] = (
        Act.POWER_CYCLE.at(Stage.SENT),
        Act.POWER_CYCLE_OFF.at(Stage.ACKNOWLEDGED),
    )
    back_at: ClassVar[tuple[str, ...]] = (Act.POWER_CYCLE.at(Stage.ACKNOWLEDGED),)
    journaled: ClassVar[str] = "power_cycle"
    undo_text: ClassVar[str] = "power on, if the cycle stops midway"
    back_by_itself: ClassVar[bool] = True
    #: A cycle by the BMC (or a reboot by the OS), else off then on.
    resets: ClassVar[tuple[tuple[ResetType, ...], ...]] = (
        (ResetType.POWER_CYCLE,), (ResetType.FORCE_RESTART,), (ResetType.GRACEFUL_RESTART,),
        (ResetType.FORCE_OFF, ResetType.ON),
    )  # fmt: skip
    # what the step reference (docs/steps.md) says of it
    what: ClassVar[str] = "power cycle: off, then on"
    comes_back_by: ClassVar[str] = "itself (a power cycle)"
    steps: ClassVar[str] = "`the node is rebooted`, Dell-style `reboot`"
    down_text: ClassVar[str] = (
        "the power-off acknowledgement within the power cycle (a BMC's own reset, which has "
        "none: the power-cycle request)"
    )
    back_text: ClassVar[str] = (
        "the power-on request within the power cycle (a BMC's own reset: the power-cycle request)"
    )

    def capable(self, driver: object) -> bool:
        return isinstance(driver, PowerDriver)

    def inflict(self, session: Session, nodes: list[str], how: Infliction) -> PowerResult:
        """The session's power cycle, the power held off ``how.off_s`` within it."""
        return session.power_cycle(nodes, protocol=how.protocol, off_s=how.off_s)

    def bring_back(
        self, session: Session, nodes: list[str], *, protocol: str | None
    ) -> PowerResult:
        """Nothing: a reboot owes no undo."""
        del session, protocol
        return PowerResult(nodes)

    def returned(
        self, result: PowerResult, sent: Mapping[str, Transition]
    ) -> tuple[dict[str, Transition], dict[str, Transition]]:
        """Each node's power-on request within the cycle (a BMC's own reset: the cycle's
        request, ``sent``), and the cycle's acknowledgement."""
        on_sent = result.first(Act.POWER_CYCLE_ON.at(Stage.SENT))
        return (
            {n: on_sent.get(n, t) for n, t in sent.items()},
            result.first(Act.POWER_CYCLE.at(Stage.ACKNOWLEDGED)),
        )
