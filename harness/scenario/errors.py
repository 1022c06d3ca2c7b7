"""What a scenario's parts raise besides a product verdict.

- :class:`NotApplicable` (and its kinds): this cluster, inventory or driver gives the
  scenario nothing to act on or to measure. The step grammar turns it into a *skip* that
  says what is missing; it is never a product failure.
- :class:`MissingStep`: an expectation whose start event cannot come in this scenario,
  because no step before it provides that event. A harness error (broken, exit code 2)
  that names a step that would provide it; never a product failure.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.errors import PermanentError, PowercutError


class NotApplicable(PowercutError):
    """Nothing in this cluster fits the scenario: skip it, saying what is missing."""


class NoTargets(NotApplicable):
    """No node (or set of nodes) fits the target the scenario asks for."""


class NothingToMeasure(NotApplicable):
    """The expectation has nothing to judge here (no pod on the lost nodes, no workload
    with a health endpoint, no held volume): skip, naming what is missing."""


class PreconditionNotMet(NotApplicable):
    """The state a scenario's Given requires does not hold (a workload left on fewer racks
    by earlier scenarios): the scenario is not judged, saying why; never a product failure."""


class UnsupportedKind(NotApplicable):
    """The target's driver cannot do the failure kind the scenario asks for."""


class MissingStep(PermanentError):
    """``expectation`` measures from an event that no earlier step provides."""

    def __init__(self, expectation: str, needs: str, steps: Sequence[str]) -> None:
        self.expectation = expectation
        self.needs = needs
        self.steps = tuple(steps)
        choices = " or ".join(f'"{s}"' for s in steps)
        super().__init__(
            f"step order: '{expectation}' measures from {needs}, which no earlier step of "
            f"this scenario provides; put {choices} before it"
        )
