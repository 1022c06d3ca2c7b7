"""The longevity loop: cycle after cycle until told to stop, each one written down at once.

:class:`Engine` knows nothing about Kubernetes: it asks a :class:`CycleRunner` to run cycle
``n`` on group ``group_for_cycle(groups, n)``, appends the returned record to
``cycles.jsonl`` (flushed and fsync-ed) and decides whether to go on. It stops, always
between two cycles:

* after ``--cycles N`` cycles in the run directory (a resumed run continues the count);
* when the ``--duration`` deadline has passed, or the next cycle would probably not finish
  before it (the mean duration of the cycles so far says how long one takes);
* when the stop file appears (``DIR/STOP`` by default; it is removed when honoured);
* on the first SIGINT or SIGTERM: the cycle in progress finishes, recovery and cleanup
  included, and is recorded. A second signal stops at once: the session's undos power the
  nodes back on and that cycle is not recorded;
* when a cycle could not bring the cluster back to its steady state (status ``failed``), or
  the cluster is not steady before a cycle starts: the nodes are back on, the reason is
  printed and recorded.

A cycle that only missed budgets is recorded as ``missed`` and the run goes on.
Whatever the reason, a final ``{"type": "run", "event": "stop", "reason": ...}`` record
says why the run ended.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from harness import progress
from harness.errors import PermanentError, PowercutError
from harness.journal import Terminated
from harness.longevity.groups import Group, group_for_cycle
from harness.longevity.records import CycleLog, CycleRecord

__all__ = [
    "CycleRunner",
    "Engine",
    "RunResult",
    "SteadyStateLost",
    "StopControl",
]

log = logging.getLogger(__name__)
Say = Callable[[str], None]


class SteadyStateLost(PermanentError):
    """The cluster is not in its steady state and did not get back to it in time."""

    def __init__(self, cycle: int, what: str, waited_s: float) -> None:
        self.cycle = cycle
        self.what = what
        self.waited_s = waited_s
        super().__init__(
            f"the cluster was not in its steady state before cycle {cycle} "
            f"(waited {waited_s:.0f}s): {what}"
        )


class StopControl:
    """Stop requests: the stop file, SIGINT/SIGTERM, or a caller's :meth:`request`.

    The first signal asks for a stop after the current cycle; a second one is handed to the
    handler that was there before (inside a session: the session's, which defers SIGTERM
    while undos run; for SIGINT: ``KeyboardInterrupt``) or else raises
    :class:`~harness.journal.Terminated` (a ``KeyboardInterrupt``) in the main thread, so the
    session's undos run at once. Later signals are ignored while that happens.
    """

    def __init__(self, stop_file: Path | None = None, say: Say | None = None) -> None:
        self.stop_file = stop_file
        self.say = say or (lambda msg: log.warning("%s", msg))
        self._reason: str | None = None
        self._signalled = False
        self._aborting = False
        self._lock = threading.Lock()
        self._previous: list[dict[signal.Signals, Any]] = []

    @property
    def reason(self) -> str | None:
        """Why a stop was requested (checks the stop file), or None."""
        if self._reason is None and self.stop_file is not None and self.stop_file.exists():
            self.request(f"stop file {self.stop_file}")
        return self._reason

    @property
    def requested(self) -> bool:
        return self.reason is not None

    @property
    def by_signal(self) -> bool:
        return self._signalled

    def request(self, reason: str) -> None:
        with self._lock:
            if self._reason is None:
                self._reason = reason

    def note_signal(self, signum: int) -> None:
        """A first signal that another handler caught: stop after the current cycle."""
        if not self._signalled:
            self._signalled = True
            self.request(f"{signal.Signals(signum).name} received")

    def consume_stop_file(self) -> None:
        """Remove the stop file once its request has been honoured."""
        if self.stop_file is not None:
            with contextlib.suppress(FileNotFoundError):
                self.stop_file.unlink()

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if not self._signalled:
            self._signalled = True
            self.request(f"{name} received")
            self.say(
                f"{name}: stopping after the current cycle (its recovery and cleanup finish "
                "first); send it again to stop now"
            )
            return
        if self._aborting:
            self.say(f"{name}: already stopping, the nodes are being powered back on")
            return
        self._aborting = True
        # Inside a session its own handler decides: it defers the signal while undos run.
        previous = self._previous[-1].get(signal.Signals(signum)) if self._previous else None
        if callable(previous):
            previous(signum, frame)
            return
        raise Terminated(signum)

    @contextlib.contextmanager
    def handlers(self) -> Iterator[None]:
        """Install the SIGINT/SIGTERM handlers for the block (main thread only), then put
        back whatever was there (a session's own handlers, for instance, which a second
        signal is handed to)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {s: signal.signal(s, self._handler) for s in (signal.SIGINT, signal.SIGTERM)}
        self._previous.append(previous)
        try:
            yield
        finally:
            self._previous.pop()
            for s, h in previous.items():
                signal.signal(s, h)


class CycleRunner(Protocol):
    """Runs one cycle. Returns its record, or None when a stop was requested before anything
    was disrupted. Raises :class:`SteadyStateLost` when the cluster is not steady before
    the cycle."""

    def run_cycle(self, cycle: int, group: Group) -> CycleRecord | None: ...


@dataclass
class RunResult:
    """How a run ended."""

    reason: str
    first_cycle: int
    last_cycle: int  # the last cycle recorded (first_cycle - 1 when none)
    statuses: dict[str, int] = field(default_factory=dict)
    failed: bool = False  # a cycle could not restore steady state, or the cluster was unsteady
    interrupted: bool = False  # stopped by a signal
    error: str | None = None

    @property
    def cycles_run(self) -> int:
        return self.last_cycle - self.first_cycle + 1


def _summary_line(r: CycleRecord) -> str:
    shown = []
    for phase, value in r.phases.items():
        if value is None:
            continue
        flag = "!" if phase in r.misses else ""
        more = "+" if phase in r.incomplete else ""
        shown.append(f"{phase} {value:.1f}s{more}{flag}")
    head = f"cycle {r.cycle} {r.group} ({', '.join(r.nodes)}): {r.status} in {r.duration_s:.1f}s"
    tail = f" [{r.reason}]" if r.reason else ""
    return f"{head}: {', '.join(shown)}{tail}"


class Engine:
    """The loop (see the module docstring)."""

    def __init__(
        self,
        *,
        runner: CycleRunner,
        groups: Sequence[Group],
        cycle_log: CycleLog,
        stop: StopControl,
        first_cycle: int = 1,
        cycles: int | None = None,
        deadline_wall: float | None = None,
        past_durations: Sequence[float] = (),
        say: Say | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not groups:
            raise PermanentError("no failure groups")
        self.runner = runner
        self.groups = list(groups)
        self.cycle_log = cycle_log
        self.stop = stop
        self.first_cycle = first_cycle
        self.cycles = cycles
        self.say = say or (lambda msg: log.info("%s", msg))
        self._monotonic = monotonic
        self._wall = wall
        # The deadline is a wall-clock time so it survives a resume; within this process it
        # is turned into a monotonic one.
        self._deadline: float | None = None
        if deadline_wall is not None:
            self._deadline = monotonic() + (deadline_wall - wall())
        self._durations = list(past_durations)[-20:]

    def _why_stop(self, cycle: int) -> str | None:
        if self.cycles is not None and cycle > self.cycles:
            return f"{self.cycles} cycles done"
        reason = self.stop.reason
        if reason is not None:
            return reason
        if self._deadline is not None:
            now = self._monotonic()
            if now >= self._deadline:
                return "duration reached"
            if self._durations:
                expected = sum(self._durations) / len(self._durations)
                if now + expected > self._deadline:
                    return (
                        f"duration reached: {self._deadline - now:.0f}s left, a cycle takes "
                        f"about {expected:.0f}s"
                    )
        return None

    def run(self) -> RunResult:
        result = RunResult("", self.first_cycle, self.first_cycle - 1)
        cycle = self.first_cycle
        seen: dict[str, list[float]] = {}  # seconds per phase, for the live display
        try:
            while True:
                reason = self._why_stop(cycle)
                if reason is not None:
                    result.reason = reason
                    break
                group = group_for_cycle(self.groups, cycle)
                # a group chosen at each cycle has no nodes yet: the runner says them
                what = str(group) if group.nodes else "its group chosen from where the pods are"
                progress.cycle(f"cycle {cycle}: {what}", _running_stats(seen))
                try:
                    record = self.runner.run_cycle(cycle, group)
                except SteadyStateLost as exc:
                    result.reason = str(exc)
                    result.failed = True
                    break
                if record is None:
                    result.reason = self.stop.reason or "stopped before the cycle started"
                    break
                self.cycle_log.append(record.to_json())
                self._durations = [*self._durations[-19:], record.duration_s]
                result.last_cycle = cycle
                result.statuses[record.status] = result.statuses.get(record.status, 0) + 1
                self.say(_summary_line(record))
                for phase, took in record.phases.items():
                    if took is not None:
                        seen.setdefault(phase, []).append(took)
                progress.cycle(f"cycle {cycle}: {record.status}", _running_stats(seen))
                if record.status == "failed":
                    result.reason = (
                        f"cycle {cycle} could not restore the steady state: {record.reason}"
                    )
                    result.failed = True
                    break
                cycle += 1
        except KeyboardInterrupt as exc:
            result.interrupted = True
            result.reason = (
                f"interrupted during cycle {cycle} ({exc or type(exc).__name__}); "
                "that cycle is not recorded"
            )
            self._write_stop(result)
            raise
        except PowercutError as exc:
            result.error = str(exc)
            result.reason = f"error during cycle {cycle}: {exc}"
            self._write_stop(result)
            raise
        result.interrupted = self.stop.by_signal
        if self.stop.stop_file is not None and result.reason.startswith("stop file"):
            self.stop.consume_stop_file()
        self._write_stop(result)
        return result

    def _write_stop(self, result: RunResult) -> None:
        record: dict[str, Any] = {
            "type": "run",
            "event": "stop",
            "at": round(self._wall(), 3),
            "reason": result.reason,
            "last_cycle": result.last_cycle,
            "failed": result.failed,
            "interrupted": result.interrupted,
            "pid": os.getpid(),
        }
        if result.error:
            record["error"] = result.error
        try:
            self.cycle_log.append(record)
        except OSError as exc:
            log.error("could not record why the run stopped: %s", exc)


def _running_stats(seen: dict[str, list[float]]) -> dict[str, str]:
    """``{"evacuation": "p50 41.2s  max 44.0s  (n=12)"}`` over the cycles so far."""
    out: dict[str, str] = {}
    for phase, values in seen.items():
        ordered = sorted(values)
        p50 = ordered[(len(ordered) - 1) // 2]
        out[phase] = f"p50 {p50:.1f}s  max {ordered[-1]:.1f}s  (n={len(ordered)})"
    return out
