"""Showing progress events (:mod:`harness.progress`): live on a terminal, lines in a CI log.

``RichRenderer`` (a terminal) keeps a small live panel: the scenario, its step, each wait
in progress with its time so far against its budget, and for longevity the cycle and the
running statistics per phase; what finished scrolls above it. ``PlainRenderer`` (not a
terminal: CI logs) writes lines: each scenario and step as it starts, a wait once it has
lasted :data:`ANNOUNCE_AFTER_S` (so every long wait says what it waits for), again every
:data:`REMIND_EVERY_S`, and how it ended.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Final, Literal

from harness import progress
from harness.progress import Event

if TYPE_CHECKING:
    from rich.console import RenderableType

__all__ = [
    "ANNOUNCE_AFTER_S",
    "PlainRenderer",
    "RichRenderer",
    "choose_mode",
    "renderer_for",
    "showing",
]

#: A plain-mode wait is announced once it has lasted this long.
ANNOUNCE_AFTER_S: Final = 3.0
#: ... and said again this often while it goes on.
REMIND_EVERY_S: Final = 30.0

Mode = Literal["rich", "plain", "off"]


def choose_mode(requested: str, stream: IO[str]) -> Mode:
    """``auto``: rich on a terminal (unless ``TERM=dumb`` or ``NO_COLOR``-only CI), else plain."""
    if requested in ("rich", "plain", "off"):
        return requested  # type: ignore[return-value]
    tty = hasattr(stream, "isatty") and stream.isatty()
    if tty and os.environ.get("TERM", "") != "dumb" and not os.environ.get("CI"):
        return "rich"
    return "plain"


def _secs(value: float) -> str:
    return f"{value:.0f}s" if value >= 10 else f"{value:.1f}s"


@dataclass
class _State:
    scenario: str = ""
    step: str = ""
    waits: dict[int, Event] = field(default_factory=dict)
    cycle: str = ""
    stats: dict[str, str] = field(default_factory=dict)


class PlainRenderer:
    """Lines for a log: ``[  12.3s] step: ...`` (time since the run started)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._state = _State()
        self._announced: dict[int, float] = {}  # wait key -> when last said
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def _line(self, text: str) -> None:
        stamp = time.monotonic() - self._start
        self.stream.write(f"[{stamp:7.1f}s] {text}\n")
        self.stream.flush()

    def __call__(self, event: Event) -> None:
        with self._lock:
            s = self._state
            if event.kind == "scenario":
                s.scenario, s.step = event.text, ""
                self._line(f"scenario: {event.text}")
            elif event.kind == "scenario-end":
                self._line(f"scenario {event.outcome}: {event.text}")
            elif event.kind == "step":
                s.step = event.text
                self._line(f"  step: {event.text}")
            elif event.kind == "step-end" and event.outcome not in ("passed", ""):
                self._line(f"  step {event.outcome}: {event.text}")
            elif event.kind == "wait":
                s.waits[event.key] = event
            elif event.kind == "wait-end":
                begun = s.waits.pop(event.key, None)
                if self._announced.pop(event.key, None) is not None and begun is not None:
                    took = event.at - begun.at
                    self._line(f"    {event.outcome}: {event.text} after {_secs(took)}")
            elif event.kind == "cycle":
                s.cycle, s.stats = event.text, dict(event.stats)
                self._line(event.text)
                if event.stats and event.text.endswith(("passed", "missed", "failed")):
                    for phase, value in event.stats.items():
                        self._line(f"  {phase:24} {value}")
            elif event.kind == "note":
                self._line(f"  {event.text}")

    def tick(self, now: float | None = None) -> None:
        """Announce the waits that have gone on long enough (called by the ticker)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            for key, wait in self._state.waits.items():
                ran = now - wait.at
                last = self._announced.get(key)
                budget = f" (budget {_secs(wait.budget_s)})" if wait.budget_s else ""
                if last is None and ran >= ANNOUNCE_AFTER_S:
                    self._announced[key] = now
                    self._line(f"    waiting for {wait.text}{budget}")
                elif last is not None and now - last >= REMIND_EVERY_S:
                    self._announced[key] = now
                    self._line(f"    still waiting for {wait.text}: {_secs(ran)}{budget}")

    def start(self) -> None:
        def run() -> None:
            while not self._stop.wait(0.5):
                self.tick()

        self._ticker = threading.Thread(target=run, name="powercut-progress", daemon=True)
        self._ticker.start()

    def stop(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()


class RichRenderer:
    """A live panel on a terminal (rich), redrawn four times a second."""

    def __init__(self, stream: IO[str], *, redirect: bool = False) -> None:
        from rich.console import Console

        self.console = Console(file=stream, force_terminal=True, highlight=False)
        self.redirect = redirect
        self._lock = threading.Lock()
        self._state = _State()
        self._live: object | None = None

    def __call__(self, event: Event) -> None:
        line = ""
        with self._lock:
            s = self._state
            if event.kind == "scenario":
                s.scenario, s.step = event.text, ""
            elif event.kind == "scenario-end":
                colour = {"passed": "green", "failed": "red", "skipped": "yellow"}.get(
                    event.outcome, "magenta"
                )
                line = f"[{colour}]{event.outcome:8}[/] {event.text}"
            elif event.kind == "step":
                s.step = event.text
            elif event.kind == "wait":
                s.waits[event.key] = event
            elif event.kind == "wait-end":
                s.waits.pop(event.key, None)
            elif event.kind == "cycle":
                s.cycle, s.stats = event.text, dict(event.stats)
                if event.text.endswith(("passed", "missed", "failed")):
                    line = event.text
            elif event.kind == "note":
                line = f"  {event.text}"
        if line:
            # Outside our lock: printing takes the live display's lock, whose refresh
            # thread takes ours to render (the other order would deadlock).
            self.console.print(line)

    def render(self) -> RenderableType:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic()
        with self._lock:
            s = self._state
            rows: list[RenderableType] = []
            if s.scenario:
                rows.append(Text.assemble(("scenario ", "bold"), s.scenario))
            if s.step:
                rows.append(Text.assemble(("  step ", "bold"), s.step))
            if s.cycle:
                rows.append(Text.assemble(("longevity ", "bold"), s.cycle))
            if s.stats:
                table = Table.grid(padding=(0, 2))
                for phase, value in s.stats.items():
                    table.add_row(f"  {phase}", value)
                rows.append(table)
            waits = sorted(s.waits.values(), key=lambda w: w.at)
        grid = Table.grid(padding=(0, 1))
        shown = 0
        for wait in waits:
            ran = now - wait.at
            if ran < 0.5:
                continue  # a wait that is over at once is not news
            shown += 1
            if wait.budget_s:
                bar = ProgressBar(total=wait.budget_s, completed=min(ran, wait.budget_s), width=20)
                limit = f"{_secs(ran)} / {_secs(wait.budget_s)}"
            else:
                bar, limit = ProgressBar(total=None, width=20), _secs(ran)
            grid.add_row("  waiting for", Text(wait.text, overflow="ellipsis"), bar, limit)
        if shown:
            rows.append(grid)
        return Group(*rows)

    def start(self) -> None:
        from rich.live import Live

        class _View:
            def __init__(self, renderer: RichRenderer) -> None:
                self.renderer = renderer

            def __rich__(self) -> RenderableType:
                return self.renderer.render()

        live = Live(
            _View(self),
            console=self.console,
            refresh_per_second=4,
            transient=True,
            # Under pytest, never: it owns them (its capture, its terminal writer). In the
            # CLI's own process, prints then scroll above the panel.
            redirect_stdout=self.redirect,
            redirect_stderr=self.redirect,
        )
        live.start()
        self._live = live

    def stop(self) -> None:
        live = self._live
        if live is not None:
            live.stop()  # type: ignore[attr-defined]
            self._live = None


def renderer_for(
    mode: Mode, stream: IO[str], *, redirect: bool = False
) -> PlainRenderer | RichRenderer | None:
    if mode == "rich":
        return RichRenderer(stream, redirect=redirect)
    if mode == "plain":
        return PlainRenderer(stream)
    return None


@contextlib.contextmanager
def showing(requested: str, stream: IO[str]) -> Iterator[None]:
    """Show the progress events of the block (a command running in this process:
    ``powercut longevity``); what it prints scrolls above a live panel."""
    renderer = renderer_for(choose_mode(requested, stream), stream, redirect=True)
    if renderer is None:
        yield
        return
    with progress.listen(renderer):
        renderer.start()
        try:
            yield
        finally:
            renderer.stop()
