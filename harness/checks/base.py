"""What every check returns or raises, and the helpers they share.

A check is a query over the :class:`~harness.kube.timeline.Timeline`. It returns a
:class:`Measurement` when the expectation held, or raises :class:`CheckFailed` saying what
was expected, what was seen and over how long. Checks that are about the future (``within
60 s of power-off``, ``throughout the next 5 minutes``) wait on the timeline until their
deadline, and end as soon as the outcome is known; run after the fact they answer at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.errors import PowercutError, WaitTimeout
from harness.kube.timeline import Timeline, Transition

#: A reference point: a transition (e.g. the ``power-off acknowledged`` action) or a
#: monotonic timestamp on the timeline's clock.
Ref = float | Transition
T = TypeVar("T")

#: Put in a :class:`CheckFailed` message (after the check's name) when what was expected did
#: happen, only later than its budget. The report's "Budget overruns" category matches it.
OVER_BUDGET = "over budget"


@dataclass(frozen=True)
class Measurement:
    """How long a phase took, against which budget: the outcome of a check that held, or a
    phase measured from recorded transitions (:mod:`harness.checks.phase`).

    ``complete`` is False when its end was not seen: ``duration_s`` is then the time waited
    for it, a lower bound.
    """

    name: str
    started_mono: float
    duration_s: float
    budget_s: float | None
    detail: Mapping[str, Any] = field(default_factory=dict)
    complete: bool = True

    @property
    def within_budget(self) -> bool:
        return self.budget_s is None or self.duration_s <= self.budget_s

    def to_json(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "started_mono": self.started_mono,
            "duration_s": round(self.duration_s, 6),
            "budget_s": self.budget_s,
            "detail": dict(self.detail),
        }
        if not self.complete:
            out["complete"] = False
        return out

    def __str__(self) -> str:
        budget = f" (budget {self.budget_s:g}s)" if self.budget_s is not None else ""
        more = " (did not complete)" if not self.complete else ""
        return f"{self.name}: {self.duration_s:.3f}s{budget}{more}"


class CheckFailed(PowercutError, AssertionError):
    """An expectation about the cluster did not hold.

    Also an ``AssertionError``, so pytest and Allure report it as a failed test (a product
    defect), not as a broken one. ``late`` says that what was expected did happen, after its
    budget: the message then reads ``<check>: over budget: expected ...`` (see
    :data:`OVER_BUDGET`), which the report files under *Budget overruns* rather than
    *Product failures*.
    """

    def __init__(
        self,
        expected: str,
        seen: str,
        waited_s: float,
        *,
        check: str = "",
        detail: Mapping[str, Any] | None = None,
        late: bool = False,
    ) -> None:
        self.expected = expected
        self.seen = seen
        self.waited_s = waited_s
        self.check = check
        self.detail = dict(detail or {})
        self.late = late
        prefix = f"{check}: " if check else ""
        marker = f"{OVER_BUDGET}: " if late else ""
        super().__init__(
            f"{prefix}{marker}expected {expected}; seen {seen} (observed for {waited_s:.1f}s)"
        )


def fail_if(
    problems: Sequence[str], expected: str, waited: float, check: str, *, late: bool = False
) -> None:
    """Raise :class:`CheckFailed` when there are problems (joined); ``late``: each is
    something that happened, only after its limit (a budget overrun, not a product
    failure)."""
    if problems:
        raise CheckFailed(expected, "; ".join(problems), waited, check=check, late=late)


def ref_mono(ref: Ref) -> float:
    return ref.mono if isinstance(ref, Transition) else float(ref)


def ref_label(tl: Timeline, ref: Ref) -> str:
    """``power-off acknowledged of w1`` for an action, ``t=+12.345s`` for a timestamp."""
    if isinstance(ref, Transition):
        return f"{ref.transition} of {ref.name}" if ref.name else ref.transition
    return f"t=+{float(ref) - tl.start_mono:.3f}s"


def uncertainty(t: Transition) -> dict[str, Any]:
    """Detail for a transition learnt from a re-list: it may have happened earlier."""
    if t.detail.get("relist"):
        return {"relist": True, "uncertain_s": t.detail.get("uncertain_s")}
    return {}


def covered(tl: Timeline, start: float, deadline: float) -> float:
    """How much of ``[start, deadline]`` has elapsed on the timeline's clock."""
    return max(0.0, min(tl.clock.monotonic(), deadline) - start)


def wait_until_time(tl: Timeline, until: float, description: str) -> None:
    """Block (on the timeline's condition, not a sleep loop) until ``until`` has passed."""
    try:
        tl.wait_for(lambda _t: False, until, description)
    except WaitTimeout:
        return


def watch_until(tl: Timeline, check: Callable[[], T | None], until: float) -> T | None:
    """Re-evaluate ``check()`` after every append until it returns something (returned) or
    ``until`` passes (None). For checks that may fail early but otherwise hold to the end."""
    try:
        return tl.wait_until(check, until, "end of the observation window", last_seen=str)
    except WaitTimeout:
        return None
