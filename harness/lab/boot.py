"""When a lab node's processes start after a power-on: after its boot time.

A real server that is powered on POSTs and boots for minutes before its kubelet starts; its
BMC reads the power On all the while. A lab node does the same: :class:`Lab.power_on`
turns it on at once (its BMCs read On) and arms a timer; the node's processes (kubelet
stand-in, and on a control-plane node etcd and the control-plane components) start when it
fires. A power-off while booting cancels it.

The timer is a :data:`Schedule`, so the unit tests drive it with a fake clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

#: Cancels what a :data:`Schedule` armed (no-op once it ran).
Cancel = Callable[[], None]
#: Runs ``fn`` after ``delay_s`` seconds on some thread; returns its cancel.
Schedule = Callable[[float, Callable[[], None]], Cancel]


def thread_timer(delay_s: float, fn: Callable[[], None]) -> Cancel:
    """A :data:`Schedule` on a daemon ``threading.Timer``."""
    timer = threading.Timer(delay_s, fn)
    timer.daemon = True
    timer.name = "lab-boot"
    timer.start()
    return timer.cancel


class FakeClock:
    """A :data:`Schedule` whose time moves only by :meth:`advance` (for tests)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._n = 0

    def __call__(self, delay_s: float, fn: Callable[[], None]) -> Cancel:
        self._n += 1
        entry = (self.now + delay_s, self._n, fn)
        self._due.append(entry)

        def cancel() -> None:
            if entry in self._due:
                self._due.remove(entry)

        return cancel

    @property
    def pending(self) -> int:
        return len(self._due)

    def advance(self, seconds: float) -> None:
        """Move the clock on, running what falls due, in order."""
        until = self.now + seconds
        while True:
            due = sorted(e for e in self._due if e[0] <= until)
            if not due:
                break
            at, _, fn = due[0]
            self._due.remove(due[0])
            self.now = at
            fn()
        self.now = until
