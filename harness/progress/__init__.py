"""Progress events: what a run is doing now, for whoever shows it.

The library reports; it never renders. Waits (the timeline's, the power drivers') call
:func:`waiting`, the pytest plugin reports scenarios and steps, longevity reports its
cycles; a listener added with :func:`listen` (the renderers of
:mod:`harness.progress.display`, which the CLI and the pytest plugin both use) turns them
into a live display on a terminal or plain lines in a CI log. With no listener every call
is a few attribute reads.

Events are small frozen records stamped with ``time.monotonic()``; a listener is called on
the thread that reported, must be quick and must not raise (an exception is logged and the
listener stays).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = [
    "Event",
    "Listener",
    "cycle",
    "listen",
    "note",
    "scenario",
    "scenario_end",
    "step",
    "step_end",
    "waiting",
]

log = logging.getLogger(__name__)

Kind = Literal["scenario", "scenario-end", "step", "step-end", "wait", "wait-end", "cycle", "note"]


@dataclass(frozen=True)
class Event:
    """One thing that happened. ``text`` says it in words; ``budget_s`` is the limit of a
    wait (None: none); ``outcome`` ends a scenario, step or wait (passed, failed, timeout,
    ...); ``stats`` are running statistics (longevity: ``{"evacuation p50": "41.2s"}``);
    ``key`` ties a ``wait-end`` to its ``wait``."""

    kind: Kind
    text: str
    at: float = field(default_factory=time.monotonic)
    budget_s: float | None = None
    outcome: str = ""
    stats: Mapping[str, str] = field(default_factory=dict)
    key: int = 0
    thread: str = field(default_factory=lambda: threading.current_thread().name)


Listener = Callable[[Event], None]

_lock: Final = threading.Lock()
_listeners: list[Listener] = []
_keys = iter(range(1, 1 << 62))


def _emit(event: Event) -> None:
    for listener in tuple(_listeners):
        try:
            listener(event)
        except Exception:  # a display must never break a scenario
            log.exception("progress listener %r failed on %s", listener, event.kind)


@contextlib.contextmanager
def listen(listener: Listener) -> Iterator[None]:
    """Send every event to ``listener`` inside the block."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)


def scenario(name: str) -> None:
    """A scenario starts (``scenario-end`` through :func:`scenario_end`)."""
    if _listeners:
        _emit(Event("scenario", name))


def scenario_end(name: str, outcome: str) -> None:
    if _listeners:
        _emit(Event("scenario-end", name, outcome=outcome))


def step(text: str) -> None:
    """A step starts."""
    if _listeners:
        _emit(Event("step", text))


def step_end(text: str, outcome: str) -> None:
    if _listeners:
        _emit(Event("step-end", text, outcome=outcome))


def cycle(text: str, stats: Mapping[str, str] | None = None) -> None:
    """Longevity: a cycle and its phase (``cycle 12/80: evacuation of w3, w7``), with the
    running statistics so far."""
    if _listeners:
        _emit(Event("cycle", text, stats=dict(stats or {})))


def note(text: str) -> None:
    """Something worth a line of its own (a power action sent, a node chosen)."""
    if _listeners:
        _emit(Event("note", text))


@contextlib.contextmanager
def waiting(what: str, budget_s: float | None = None) -> Iterator[None]:
    """The block waits for ``what`` (``node w3 NotReady``), within ``budget_s``.

    Emits ``wait`` on entry and ``wait-end`` on exit with the outcome: ``done``,
    ``timeout`` (a :class:`~harness.errors.WaitTimeout`), or the exception's type.
    """
    if not _listeners:
        yield
        return
    with _lock:
        key = next(_keys)
    _emit(Event("wait", what, budget_s=budget_s, key=key))
    outcome = "done"
    try:
        yield
    except BaseException as exc:
        outcome = "timeout" if type(exc).__name__ == "WaitTimeout" else type(exc).__name__
        raise
    finally:
        _emit(Event("wait-end", what, budget_s=budget_s, key=key, outcome=outcome))
