"""The fake clock of the unit tests: time moves only when a test (or the code under test)
sleeps or waits on it, or advances it, so a 5-minute wait runs in microseconds and a test's
outcome does not depend on the machine's load.

It is :class:`harness.kube.timeline.FakeClock` (``monotonic``, ``time``, ``sleep``,
``wait``, ``wait_event``, callbacks at given times), which the library's waits accept in
place of the real clock, plus what the tests ask of it: every pause recorded (``sleeps``),
``now``, and the clock as a plain callable (``clock()``, for code that takes a
``Callable[[], float]``). The ``fake_clock`` fixture (tests/unit/conftest.py) hands out a
fresh one.

Two ways for time to move:

* by default a sleep or a wait jumps straight to its end (or to the next callback due), on
  the thread that waits: right for code that waits on the test's own thread;
* ``FakeClock(manual=True)`` is for a library thread paced by the clock (a prober, a resync,
  a watch's backoff): its sleeps and waits block until the test calls :meth:`advance` past
  their end (or the event or condition it waits on is set or notified meanwhile). The test
  calls :meth:`block_until_waiting` to know that the thread has done its work and waits on
  the clock again, then advances: each step of the thread is one step of the test, whatever
  the machine's load (:meth:`settle` does the same for threads given to :meth:`track`,
  and returns as well once they ended). A thread that nothing wakes fails the test after
  ``STUCK_S`` of real time (a deadlock guard, never a condition a passing test comes near).
"""

from __future__ import annotations

import faulthandler
import threading
import time
from collections.abc import Callable

from harness.kube import timeline

#: Real seconds a blocked wait (or :meth:`FakeClock.block_until_waiting`) gives the test
#: before it calls the test stuck: far beyond any step of a passing test.
STUCK_S = 60.0

#: Real seconds between two looks of a blocked thread at what it waits for, when that
#: cannot notify the clock (an event set by another thread).
_LOOK_S = 0.005


class _Waiter:
    __slots__ = ("cond", "due", "fired", "thread")

    def __init__(self, due: float, cond: threading.Condition | None) -> None:
        self.due = due
        self.cond = cond  # what the thread waits on (notified when the clock passes due)
        self.fired = False
        self.thread = threading.current_thread()


class FakeClock(timeline.FakeClock):
    def __init__(
        self, start: float = 1000.0, wall: float = 1_700_000_000.0, *, manual: bool = False
    ) -> None:
        super().__init__(start, wall)
        self.sleeps: list[float] = []
        self.manual = manual
        self._cv = threading.Condition()
        self._waiters: list[_Waiter] = []
        self._tracked: list[threading.Thread] = []

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

    # -- time moving -----------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move time forward, running every callback that falls due on the way; with
        ``manual``, wake every wait whose end it passes (gone from :meth:`waiting` when
        this returns)."""
        assert seconds >= 0, f"advanced {seconds} s"
        super().advance(seconds)
        if not self.manual:
            return
        with self._cv:
            fired = [w for w in self._waiters if w.due <= self.monotonic()]
            for w in fired:
                w.fired = True
                self._waiters.remove(w)
            self._cv.notify_all()
        for w in fired:  # outside the clock's lock: a waiter holds its condition to enter
            if w.cond is not None:
                with w.cond:
                    w.cond.notify_all()

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0, f"slept {seconds} s"
        self.sleeps.append(seconds)
        if self.manual:
            self._block(seconds, lambda: False)
        else:
            super().sleep(seconds)

    def wait(self, cond: threading.Condition, timeout: float) -> bool:
        if not self.manual:
            return super().wait(cond, timeout)
        # The caller holds ``cond`` from its last look at what it waits for until this
        # waits on it, so nothing it waits for can slip by: a notify, or :meth:`advance`
        # passing the end (which notifies ``cond`` too), wakes this one wait.
        w = self._enter(timeout, cond)
        try:
            if w.fired:
                return False
            if not cond.wait(STUCK_S):
                self._stuck(w)
            return not w.fired
        finally:
            self._leave(w)

    def wait_event(self, event: threading.Event, timeout: float) -> bool:
        if not self.manual:
            return super().wait_event(event, timeout)
        return self._block(timeout, event.is_set)

    # -- manual mode: what the test synchronises on ----------------------------------------

    def waiting(self) -> list[str]:
        """The threads blocked on the clock now (their names), with ``manual``."""
        with self._cv:
            return [w.thread.name for w in self._waiters]

    def block_until_waiting(
        self, count: int = 1, *, thread: threading.Thread | None = None
    ) -> None:
        """Return once ``count`` threads (or ``thread``) are blocked on the clock
        (``manual``): each has done what it does before its next sleep or wait. A thread
        that :meth:`advance` woke has left its wait when that returns; one woken otherwise
        (its condition notified, its event set) may not have yet: wait for what it does
        next first."""
        assert self.manual, "block_until_waiting is for a FakeClock(manual=True)"
        deadline = time.monotonic() + STUCK_S
        with self._cv:
            while True:
                blocked = [w for w in self._waiters if thread is None or w.thread is thread]
                if len(blocked) >= count:
                    return
                left = deadline - time.monotonic()
                assert left > 0, (
                    f"{STUCK_S:.0f} s of real time and {len(blocked)} thread(s) "
                    f"waiting on the fake clock, not {count}"
                    + (f" ({thread.name})" if thread else "")
                    + f": {self.waiting()}"
                )
                self._cv.wait(left)

    def track(self, *threads: threading.Thread) -> None:
        """The library threads :meth:`settle` waits for."""
        self._tracked.extend(threads)

    def settle(self) -> None:
        """Return once every tracked thread is blocked on the clock or has ended: whatever
        the last :meth:`advance` woke it for is done (``manual``)."""
        assert self.manual and self._tracked, "settle: a FakeClock(manual=True) and track()"
        deadline = time.monotonic() + STUCK_S
        with self._cv:
            while True:
                blocked = {w.thread for w in self._waiters}
                busy = [t.name for t in self._tracked if t.is_alive() and t not in blocked]
                if not busy:
                    return
                assert time.monotonic() < deadline, (
                    f"{STUCK_S:.0f} s of real time and {busy} neither wait on the fake clock "
                    "nor ended"
                )
                self._cv.wait(_LOOK_S)  # an ending thread does not notify the clock

    def _block(self, timeout: float, done: Callable[[], bool]) -> bool:
        if done():
            return True
        w = self._enter(timeout)
        deadline = time.monotonic() + STUCK_S
        try:
            with self._cv:
                while not w.fired:
                    if done():
                        return True
                    self._cv.wait(_LOOK_S)
                    self._check_stuck(deadline, w)
            return done()
        finally:
            self._leave(w)

    def _enter(self, timeout: float, cond: threading.Condition | None = None) -> _Waiter:
        with self._cv:
            w = _Waiter(self.monotonic() + max(0.0, timeout), cond)
            if w.due <= self.monotonic():
                w.fired = True  # a wait of 0: over at once
            else:
                self._waiters.append(w)
                self._cv.notify_all()
        return w

    def _leave(self, w: _Waiter) -> None:
        with self._cv:
            if w in self._waiters:
                self._waiters.remove(w)

    def _check_stuck(self, deadline: float, w: _Waiter) -> None:
        if time.monotonic() > deadline:
            self._stuck(w)

    def _stuck(self, w: _Waiter) -> None:
        faulthandler.dump_traceback(all_threads=True)  # what each thread is stuck on
        raise AssertionError(
            f"thread {w.thread.name} waited {STUCK_S:.0f} s of real time on the fake clock "
            f"(until {w.due}, now {self.monotonic()}): nothing advanced it"
        )
