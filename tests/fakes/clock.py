"""The fake clock of the unit tests: time moves only when a test (or the code under test)
sleeps or waits on it, or advances it, so a 5-minute wait runs in microseconds and a test's
outcome does not depend on the machine's load.

It is :class:`harness.kube.timeline.FakeClock` (``monotonic``, ``time``, ``sleep``,
``wait``, callbacks at given times), which the library's waits accept in place of the real
clock, plus what the tests ask of it: every pause recorded (``sleeps``), ``now``, and the
clock as a plain callable (``clock()``, for code that takes a ``Callable[[], float]``).
The ``fake_clock`` fixture (tests/unit/conftest.py) hands out a fresh one.
"""

from __future__ import annotations

from harness.kube import timeline


class FakeClock(timeline.FakeClock):
    def __init__(self, start: float = 1000.0, wall: float = 1_700_000_000.0) -> None:
        super().__init__(start, wall)
        self.sleeps: list[float] = []

    @property
    def now(self) -> float:
        return self.monotonic()

    @now.setter
    def now(self, value: float) -> None:
        """``clock.now += 4``: the same as ``clock.advance(4)`` (never backwards)."""
        assert value >= self.monotonic(), "a monotonic clock never goes back"
        self.advance(value - self.monotonic())

    def __call__(self) -> float:
        return self.monotonic()

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0, f"slept {seconds} s"
        self.sleeps.append(seconds)
        super().sleep(seconds)
