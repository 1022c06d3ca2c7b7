"""SIGTERM / SIGINT while undos run: :func:`install_signal_handlers` turns SIGTERM into
:class:`Terminated` (a ``KeyboardInterrupt``), and :func:`shield_signals` defers a signal
that arrives while undos run until they are done.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Final

from harness.errors import PermanentError

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# In-process undo
# --------------------------------------------------------------------------------------------


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM (see :func:`install_signal_handlers`), so the
    stack unwinds through ``finally`` blocks and undos exactly as on Ctrl-C."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


class _SignalShield:
    """Defers :class:`Terminated` while undos run, so a SIGTERM cannot abort them halfway."""

    def __init__(self) -> None:
        self.depth = 0
        self.deferred: int | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.depth:
            log.warning(
                "%s received while undoing; finishing the undos first",
                signal.Signals(signum).name,
            )
            self.deferred = signum
            return
        raise Terminated(signum)


_SHIELD: Final = _SignalShield()


def install_signal_handlers(
    signums: tuple[int, ...] = (signal.SIGTERM,),
) -> Callable[[], None]:
    """Make SIGTERM (and the other ``signums``) raise :class:`Terminated` in the main thread.

    ``Terminated`` is a ``KeyboardInterrupt``: it is not caught by ``except Exception``, and
    it unwinds through :class:`UndoStack` and ``Journal.disruption`` so undos run. While an
    :class:`UndoStack` runs its undos the signal is deferred and raised afterwards. Returns a
    function that restores the previous handlers. Must be called from the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        raise PermanentError("signal handlers can only be installed from the main thread")
    previous = {s: signal.signal(s, _SHIELD.handler) for s in signums}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore


@contextlib.contextmanager
def shield_signals() -> Iterator[None]:
    """Defer :class:`Terminated` until the block ends (then raise it). Ctrl-C still works."""
    _SHIELD.depth += 1
    try:
        yield
    finally:
        _SHIELD.depth -= 1
        if not _SHIELD.depth and _SHIELD.deferred is not None:
            signum, _SHIELD.deferred = _SHIELD.deferred, None
            raise Terminated(signum)
