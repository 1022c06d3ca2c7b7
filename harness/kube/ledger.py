"""The harness's own time in a scenario: everything not spent waiting for the cluster or a BMC.

A scenario's wall time is Kubernetes' phases (nodes going NotReady, pods rescheduled: the
scenario blocks on the timeline until they are seen), the BMCs' answers (power requests and
their read-backs), the holds a feature asks for ("for 30 seconds"), and the rest: the
harness's own work (the steady-state checks' evaluations, choosing targets, journaling,
building the report). A :class:`Ledger` belongs to one scenario's thread (the one that made
it): time that thread spends blocked in :meth:`waiting` sections is counted per kind of
wait, and everything else is the harness's time, split into the :meth:`part` sections it
was spent in (a step, the baseline's steady-state check, the teardown's undo, the report).
Waits on other threads (the Observer's watches, probes) do not count: they run beside the
scenario, not in its way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: The kinds of waits that are not the harness's time.
KUBERNETES = "kubernetes"
BMC = "bmc"
HOLD = "hold"  # a pause the scenario asks for
UNDO = "undo"  # the session's undo at its end: power-ons, heals, uncordons (BMC and API)


class Ledger:
    """Accounts one thread's wall time: waits by kind, the rest by part (see module doc)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self._owner = threading.get_ident()
        self._in_wait = False
        self.waited: dict[str, float] = {}
        self._parts: dict[str, float] = {}
        self._part: list[str] = []

    def owned(self) -> bool:
        return threading.get_ident() == self._owner

    @contextmanager
    def waiting(self, kind: str) -> Iterator[None]:
        """A wait for the cluster, a BMC or a hold; on another thread, or inside another
        wait, it counts nothing (never twice)."""
        if self._in_wait or not self.owned():
            yield
            return
        self._in_wait = True
        t0 = self._clock()
        try:
            yield
        finally:
            self.waited[kind] = self.waited.get(kind, 0.0) + self._clock() - t0
            self._in_wait = False

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """The harness's time in this section (its wall time less its waits) goes to
        ``name``; a part inside another counts for the inner one only."""
        opened = self.begin(name)
        try:
            yield
        finally:
            self.end(opened)

    def begin(self, name: str) -> tuple[str, float, float] | None:
        """Open a part (for hooks that cannot hold a ``with``); give the result to :meth:`end`."""
        if not self.owned():
            return None
        self._part.append(name)
        return name, self._clock(), self.waited_s

    def end(self, opened: tuple[str, float, float] | None) -> None:
        if opened is None or not self._part or self._part[-1] != opened[0]:
            return  # another thread's, or already closed
        name, t0, w0 = opened
        self._part.pop()
        own = (self._clock() - t0) - (self.waited_s - w0)
        self._parts[name] = self._parts.get(name, 0.0) + own
        for outer in self._part:  # not counted twice by an enclosing part
            self._parts[outer] = self._parts.get(outer, 0.0) - own

    @property
    def waited_s(self) -> float:
        return sum(self.waited.values())

    def elapsed_s(self) -> float:
        return self._clock() - self.started

    def harness_s(self) -> float:
        """Wall time so far less every wait."""
        return max(0.0, self.elapsed_s() - self.waited_s)

    def parts(self) -> dict[str, float]:
        """Harness time per part, slowest first, with ``other`` for what no part held."""
        named = {k: max(0.0, v) for k, v in self._parts.items()}
        other = self.harness_s() - sum(named.values())
        if other > 0.0005:
            named["other"] = other
        return dict(sorted(named.items(), key=lambda kv: -kv[1]))

    def summary(self) -> dict[str, Any]:
        """JSON-able figures: the scenario's wall time, its waits, the harness's time and
        its parts (seconds, rounded to the millisecond)."""
        return {
            "elapsed_s": round(self.elapsed_s(), 3),
            "waited_s": {k: round(v, 3) for k, v in sorted(self.waited.items())},
            "harness_s": round(self.harness_s(), 3),
            "parts_s": {k: round(v, 3) for k, v in self.parts().items()},
        }
