"""A graceful shutdown: the BMC asks the OS to shut down in order (its kubelet too, with
its graceful node shutdown), then the node is off.

Everything else is :mod:`~harness.failures.power_loss`'s: the session's power-off (here
graceful), journaled with a power-on as its undo, down from the power-off's
acknowledgement, back at the power-on's, never back by itself.

A node whose BMC accepts the request but whose OS never acts on it (no ACPI handling, a
shutdown that hangs) is the node's finding, not the harness's: its driver's
:class:`~harness.power.base.GracefulIgnored` is reported as a failed expectation
(:class:`~harness.checks.base.CheckFailed`, exit code 1) that says the node ignored the
request, not as a broken run (docs/bmc.md). The journal's undo powers on whatever did go
off.
"""

from __future__ import annotations

from typing import ClassVar

from harness.checks.base import CheckFailed
from harness.failures.base import Infliction
from harness.failures.power_loss import PowerLoss
from harness.power.base import GracefulIgnored, ResetType
from harness.session import PowerResult, Session

#: The check named in the report when a node ignores the request.
CHECK: str = "graceful shutdown"


class GracefulShutdown(PowerLoss):
    name: ClassVar[str] = "graceful"
    graceful: ClassVar[bool] = True
    resets: ClassVar[tuple[tuple[ResetType, ...], ...]] = (
        (ResetType.GRACEFUL_SHUTDOWN, ResetType.ON),
    )
    # what the step reference (docs/steps.md) says of it
    what: ClassVar[str] = "graceful shutdown (ACPI soft-off)"
    comes_back_by: ClassVar[str] = "power-on through the BMC"
    steps: ClassVar[str] = "`the node is shut down gracefully`, Dell-style `graceful`"
    down_text: ClassVar[str] = (
        "the BMC's acknowledgement of the soft-off (ACPI) request, read back Off"
    )
    back_text: ClassVar[str] = "the power-on request"

    def inflict(self, session: Session, nodes: list[str], how: Infliction) -> PowerResult:
        try:
            return super().inflict(session, nodes, how)
        except GracefulIgnored as exc:
            raise ignored(exc) from exc


def ignored(exc: GracefulIgnored) -> CheckFailed:
    """The verdict on a node that ignored a graceful shutdown its BMC accepted."""
    return CheckFailed(
        f"{exc.node} to shut down after its BMC accepted {exc.request}",
        f"the node ignored it: {exc.last_seen} until the power budget ran out (its OS did "
        "not act on the request: ACPI handling off, or a shutdown that hangs)",
        exc.waited_s,
        check=CHECK,
        detail={"node": exc.node, "request": exc.request},
    )
