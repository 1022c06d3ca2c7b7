"""A graceful shutdown: the BMC asks the OS to shut down in order (its kubelet too, with
its graceful node shutdown), then the node is off.

Everything else is :mod:`~harness.failures.power_loss`'s: the session's power-off (here
graceful), journaled with a power-on as its undo, down from the power-off's
acknowledgement, back at the power-on's, never back by itself.
"""

from __future__ import annotations

from typing import ClassVar

from harness.failures.power_loss import PowerLoss


class GracefulShutdown(PowerLoss):
    name: ClassVar[str] = "graceful"
    graceful: ClassVar[bool] = True
    # what the step reference (docs/steps.md) says of it
    what: ClassVar[str] = "graceful shutdown (ACPI soft-off)"
    comes_back_by: ClassVar[str] = "power-on through the BMC"
    steps: ClassVar[str] = "`the node is shut down gracefully`, Dell-style `graceful`"
    down_text: ClassVar[str] = (
        "the BMC's acknowledgement of the soft-off (ACPI) request, read back Off"
    )
    back_text: ClassVar[str] = "the power-on request"
