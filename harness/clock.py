"""Where waits and paced loops get the time from: :class:`Clock`, and the real one.

Library code that sleeps, waits or stamps takes a ``clock`` (``SYSTEM_CLOCK`` unless given),
so the unit tests drive it with a fake one (``tests.fakes.clock``) instead of sleeping:
deadlines and pacing come from ``monotonic()``, report times from ``time()``, pauses from
``sleep()``, and a paced thread waits for its stop event with ``wait_event()``.
"""

from __future__ import annotations

import threading
import time
from typing import Final, Protocol


class Clock(Protocol):
    """Where waits get the time from."""

    def monotonic(self) -> float: ...

    def time(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def wait(self, cond: threading.Condition, timeout: float) -> bool:
        """Wait on ``cond`` (held by the caller) for at most ``timeout`` seconds."""
        ...

    def wait_event(self, event: threading.Event, timeout: float) -> bool:
        """Wait for ``event`` for at most ``timeout`` seconds; whether it is set (a
        thread's paced loop: ``while not clock.wait_event(stop, interval): ...``)."""
        ...


class SystemClock:
    """The real clocks: ``time.monotonic`` for deadlines, ``time.time`` for reports."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, cond: threading.Condition, timeout: float) -> bool:
        return cond.wait(timeout)

    def wait_event(self, event: threading.Event, timeout: float) -> bool:
        return event.wait(max(0.0, timeout))


SYSTEM_CLOCK: Final[Clock] = SystemClock()
