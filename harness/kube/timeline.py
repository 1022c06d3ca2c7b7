"""The scenario timeline: every observed transition and every harness action, in one place.

A :class:`Timeline` is an append-only, thread-safe list of :class:`Transition` records. The
observer's watch threads append what the cluster did (node Ready changes, pods evicted,
volumes attached, ...), the harness appends what it did itself (``"power-off sent"``,
``"power-off acknowledged"``), and the checks are queries over it: "pod X Ready on a node
other than N within 90 s of power-off". Because everything is on one clock
(``time.monotonic``) a failure can say what was expected, what was seen and when.

Waiting never polls: :meth:`Timeline.wait_for` and :meth:`Timeline.wait_until` block on a
condition variable that every append notifies. Time comes from a :class:`Clock` so unit
tests can run waits on a :class:`FakeClock` without sleeping.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from harness import progress
from harness.clock import SYSTEM_CLOCK as SYSTEM_CLOCK
from harness.clock import Clock as Clock
from harness.errors import PermanentError, WaitTimeout
from harness.kube.ledger import KUBERNETES, Ledger
from harness.kube.names import Kind

T = TypeVar("T")
Predicate = Callable[["Transition"], bool]

#: ``kind`` of the harness's own actions (``Timeline.action``).
ACTION = Kind.ACTION


class WaitFailed(PermanentError):
    """A wait ended before its deadline because a terminal state was seen.

    For example: waiting for a pod to be Ready and it went ``Failed``. Retrying cannot help.
    """

    def __init__(self, expected: str, seen: str, waited_s: float) -> None:
        self.expected = expected
        self.seen = seen
        self.waited_s = waited_s
        super().__init__(f"gave up after {waited_s:.1f}s waiting for {expected}: {seen}")


# -- clocks --------------------------------------------------------------------------------


class FakeClock:
    """A clock that only moves when told to, or when someone waits or sleeps on it.

    ``wait`` and ``sleep`` jump straight to the next scheduled callback (``call_at``) or to
    the end of the timeout, so a 5-minute wait runs in microseconds. Callbacks run on the
    thread that advances the clock, with the waiter's lock held (the timeline's lock is
    re-entrant, so a callback may append to the timeline being waited on).
    """

    def __init__(self, start: float = 1000.0, wall: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall - start
        self._lock = threading.RLock()
        self._seq = itertools.count()
        self._due: list[tuple[float, int, Callable[[], object]]] = []

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self._now + self._wall_offset

    def call_at(self, mono: float, fn: Callable[[], object]) -> None:
        with self._lock:
            heapq.heappush(self._due, (mono, next(self._seq), fn))

    def call_later(self, delay_s: float, fn: Callable[[], object]) -> None:
        self.call_at(self._now + delay_s, fn)

    def advance(self, seconds: float) -> None:
        """Move time forward, running every callback that falls due on the way."""
        self._run_until(self._now + seconds)

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))

    def wait(self, cond: threading.Condition, timeout: float) -> bool:
        target = self._now + max(0.0, timeout)
        with self._lock:
            nxt = self._due[0][0] if self._due else None
        if nxt is not None and nxt <= target:
            self._run_until(nxt)
            return True
        self._run_until(target)
        return False

    def wait_event(self, event: threading.Event, timeout: float) -> bool:
        """Run the callbacks due until ``event`` is set or ``timeout`` has passed."""
        target = self._now + max(0.0, timeout)
        while not event.is_set():
            with self._lock:
                nxt = self._due[0][0] if self._due else None
            if nxt is None or nxt > target:
                self._run_until(target)
                break
            self._run_until(nxt)
        return event.is_set()

    def _run_until(self, target: float) -> None:
        while True:
            with self._lock:
                if not self._due or self._due[0][0] > target:
                    self._now = max(self._now, target)
                    return
                when, _, fn = heapq.heappop(self._due)
                self._now = max(self._now, when)
            fn()


# -- transitions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transition:
    """One thing that happened, stamped on the harness's clocks.

    ``mono`` is ``time.monotonic()`` when the harness learnt of it (for a watch event: when
    its line was read), ``wall`` the matching ``time.time()`` for reports. ``detail`` holds
    small JSON values only (strings, numbers, booleans, short lists).
    """

    mono: float
    wall: float
    kind: str
    namespace: str
    name: str
    transition: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """``Kind ns/name`` (or ``Kind name`` for cluster-scoped objects)."""
        obj = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {obj}"

    def describe(self, origin: float | None = None) -> str:
        """One line for error messages; times relative to ``origin`` when given."""
        when = f"+{self.mono - origin:.3f}s" if origin is not None else f"mono={self.mono:.3f}"
        extra = " ".join(f"{k}={v}" for k, v in self.detail.items() if k != "uid")
        return f"{self.ref} {self.transition} at {when}" + (f" ({extra})" if extra else "")

    def to_json(self, origin: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mono": self.mono,
            "wall": self.wall,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "transition": self.transition,
            "detail": dict(self.detail),
        }
        if origin is not None:
            out["t"] = round(self.mono - origin, 6)
        return out


def _mono_of(at: float | Transition | None) -> float | None:
    return at.mono if isinstance(at, Transition) else at


def match(
    kind: str | None = None,
    name: str | None = None,
    transition: str | None = None,
    *,
    namespace: str | None = None,
    after: float | Transition | None = None,
    before: float | Transition | None = None,
    where: Predicate | None = None,
) -> Predicate:
    """Build a predicate from the usual filters. ``after``/``before`` are strict bounds."""
    lo, hi = _mono_of(after), _mono_of(before)

    def pred(t: Transition) -> bool:
        return (
            (kind is None or t.kind == kind)
            and (name is None or t.name == name)
            and (transition is None or t.transition == transition)
            and (namespace is None or t.namespace == namespace)
            and (lo is None or t.mono > lo)
            and (hi is None or t.mono < hi)
            and (where is None or where(t))
        )

    return pred


class Timeline:
    """Append-only, thread-safe list of transitions with query and wait helpers."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SYSTEM_CLOCK
        self.start_mono = self.clock.monotonic()
        self.start_wall = self.clock.time()
        self._items: list[Transition] = []
        self._by_kind: dict[str, list[Transition]] = {}
        self._cond = threading.Condition(threading.RLock())
        self._touches = 0  # with len(_items), what a state wait has seen (touch() counts)
        #: The creating thread's waits and the harness's own time (see harness.kube.ledger).
        self.ledger = Ledger(self.clock.monotonic)

    # -- writing ---------------------------------------------------------------------------

    def append(self, t: Transition) -> Transition:
        with self._cond:
            self._items.append(t)
            self._by_kind.setdefault(t.kind, []).append(t)
            self._cond.notify_all()
        return t

    def extend(self, ts: list[Transition]) -> None:
        """Append several transitions at once (one wake-up for the waiters)."""
        if not ts:
            return
        with self._cond:
            for t in ts:
                self._items.append(t)
                self._by_kind.setdefault(t.kind, []).append(t)
            self._cond.notify_all()

    def record(
        self,
        kind: str,
        name: str,
        transition: str,
        *,
        namespace: str = "",
        detail: Mapping[str, Any] | None = None,
        mono: float | None = None,
        wall: float | None = None,
    ) -> Transition:
        """Append a transition stamped now (or at the given ``mono``/``wall``)."""
        if mono is None:
            mono = self.clock.monotonic()
            wall = self.clock.time() if wall is None else wall
        elif wall is None:
            wall = self.start_wall + (mono - self.start_mono)
        return self.append(
            Transition(mono, wall, kind, namespace, name, transition, dict(detail or {}))
        )

    def action(
        self, name: str, transition: str, *, namespace: str = "", **detail: Any
    ) -> Transition:
        """Record one of the harness's own actions, e.g. ``action("w1", "power-off sent")``."""
        return self.record(ACTION, name, transition, namespace=namespace, detail=detail)

    def touch(self) -> None:
        """Wake every waiter without recording anything (a state they check has changed)."""
        with self._cond:
            self._touches += 1
            self._cond.notify_all()

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Transition]:
        return iter(self.snapshot())

    def snapshot(self) -> list[Transition]:
        """A copy of every transition, in the order they were recorded."""
        with self._cond:
            return list(self._items)

    def read_from(self, index: int) -> list[Transition]:
        """Transitions recorded at position ``index`` and later (``len`` gives the next one).

        A batch added with :meth:`extend` is either wholly included or not at all.
        """
        with self._cond:
            return self._items[index:]

    def _candidates(self, kind: str | None) -> list[Transition]:
        with self._cond:
            return list(self._items if kind is None else self._by_kind.get(kind, ()))

    def all(
        self,
        kind: str | None = None,
        name: str | None = None,
        transition: str | None = None,
        *,
        namespace: str | None = None,
        after: float | Transition | None = None,
        before: float | Transition | None = None,
        where: Predicate | None = None,
    ) -> list[Transition]:
        """Every matching transition, ordered by ``mono`` (ties keep recording order)."""
        pred = match(
            kind, name, transition, namespace=namespace, after=after, before=before, where=where
        )
        found = [t for t in self._candidates(kind) if pred(t)]
        found.sort(key=lambda t: t.mono)
        return found

    def first(
        self,
        kind: str | None = None,
        name: str | None = None,
        transition: str | None = None,
        *,
        namespace: str | None = None,
        after: float | Transition | None = None,
        before: float | Transition | None = None,
        where: Predicate | None = None,
    ) -> Transition | None:
        """The earliest matching transition, or None."""
        found = self.all(
            kind, name, transition, namespace=namespace, after=after, before=before, where=where
        )
        return found[0] if found else None

    def last(
        self,
        kind: str | None = None,
        name: str | None = None,
        transition: str | None = None,
        *,
        namespace: str | None = None,
        after: float | Transition | None = None,
        before: float | Transition | None = None,
        where: Predicate | None = None,
    ) -> Transition | None:
        """The latest matching transition, or None."""
        found = self.all(
            kind, name, transition, namespace=namespace, after=after, before=before, where=where
        )
        return found[-1] if found else None

    def describe(self, t: Transition | None) -> str:
        """``t.describe`` relative to the start of this timeline; "nothing" for None."""
        return "nothing" if t is None else t.describe(self.start_mono)

    # -- waiting ---------------------------------------------------------------------------

    def wait_for(
        self,
        predicate: Predicate,
        deadline: float,
        description: str,
        *,
        terminal: Predicate | None = None,
        last_seen: Callable[[], str] | None = None,
    ) -> Transition:
        """The first transition (already recorded or still to come) that matches.

        Scans in recording order, then blocks on the timeline's condition until a new
        transition arrives or ``deadline`` (on ``self.clock``'s monotonic scale) passes.
        A transition matching ``terminal`` ends the wait at once with :class:`WaitFailed`.
        On timeout raises :class:`~harness.errors.WaitTimeout` carrying ``last_seen()``
        (default: the number of transitions examined).
        """
        started = self.clock.monotonic()
        with progress.waiting(description, max(0.0, deadline - started)):
            return self._wait_for(predicate, deadline, description, started, terminal, last_seen)

    def _wait_for(
        self,
        predicate: Predicate,
        deadline: float,
        description: str,
        started: float,
        terminal: Predicate | None,
        last_seen: Callable[[], str] | None,
    ) -> Transition:
        scanned = 0
        while True:
            with self._cond:
                end = len(self._items)
            items = self._items  # append-only: indices below `end` are stable
            for i in range(scanned, end):
                t = items[i]
                if terminal is not None and terminal(t):
                    raise WaitFailed(
                        description, self.describe(t), self.clock.monotonic() - started
                    )
                if predicate(t):
                    return t
            scanned = end
            with self._cond:
                if len(self._items) != scanned:
                    continue
                now = self.clock.monotonic()
                if now >= deadline:
                    seen = last_seen() if last_seen else f"no match among {scanned} transitions"
                    raise WaitTimeout(description, seen, now - started)
                with self.ledger.waiting(KUBERNETES):
                    self.clock.wait(self._cond, deadline - now)

    def wait_until(
        self,
        check: Callable[[], T | None],
        deadline: float,
        description: str,
        *,
        last_seen: Callable[[], str],
        terminal: Callable[[], str | None] | None = None,
    ) -> T:
        """Re-evaluate ``check()`` after every append (and :meth:`touch`) until it returns
        something not None.

        For waits on state (for example the observer's current view of a pod) rather than on
        one transition. ``terminal()`` returning a reason ends the wait with
        :class:`WaitFailed`. The state must change before the transition announcing it is
        appended (the observer does so), otherwise a change could be missed.
        """
        started = self.clock.monotonic()
        with progress.waiting(description, max(0.0, deadline - started)):
            return self._wait_until(check, deadline, description, started, last_seen, terminal)

    def _wait_until(
        self,
        check: Callable[[], T | None],
        deadline: float,
        description: str,
        started: float,
        last_seen: Callable[[], str],
        terminal: Callable[[], str | None] | None,
    ) -> T:
        while True:
            with self._cond:
                generation = (len(self._items), self._touches)
            result = check()
            if result is not None:
                return result
            if terminal is not None:
                reason = terminal()
                if reason is not None:
                    raise WaitFailed(description, reason, self.clock.monotonic() - started)
            with self._cond:
                if (len(self._items), self._touches) != generation:
                    continue
                now = self.clock.monotonic()
                if now >= deadline:
                    raise WaitTimeout(description, last_seen(), now - started)
                with self.ledger.waiting(KUBERNETES):
                    self.clock.wait(self._cond, deadline - now)

    # -- export ----------------------------------------------------------------------------

    def to_json(self) -> bytes:
        """The whole timeline as JSON (for report attachments); ``t`` is relative to start."""
        doc = {
            "version": 1,
            "start_mono": self.start_mono,
            "start_wall": self.start_wall,
            "transitions": [t.to_json(self.start_mono) for t in self.snapshot()],
        }
        return orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)

    def write_json(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_bytes(self.to_json())
        return p

    @classmethod
    def from_json(cls, data: bytes | str, clock: Clock | None = None) -> Timeline:
        """Load a timeline written by :meth:`to_json` (for checks after the fact)."""
        doc = orjson.loads(data)
        tl = cls(clock)
        tl.start_mono = float(doc["start_mono"])
        tl.start_wall = float(doc["start_wall"])
        tl.extend(
            [
                Transition(
                    float(d["mono"]),
                    float(d["wall"]),
                    str(d["kind"]),
                    str(d["namespace"]),
                    str(d["name"]),
                    str(d["transition"]),
                    dict(d.get("detail") or {}),
                )
                for d in doc["transitions"]
            ]
        )
        return tl
