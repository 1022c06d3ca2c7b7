"""What a Ctrl-C must not cut half-way in a power driver: a BMC session's log-in and
log-out, and the sockets an interrupted request leaves behind.

BMCs cap their sessions (iDRAC, iLO, Supermicro; docs/bmc.md), and a leaked one locks
automation out until it times out. A SIGINT (``KeyboardInterrupt``) or SIGTERM that lands
while a session is being opened (the BMC may have made it without the client learning its
token) or deleted leaks it. :func:`held_signals` holds those signals while such a step runs
and hands them on when it ends. A second signal is handed on at once: a user who insists
stops at once. The step itself is bounded by its request timeouts, so a held Ctrl-C waits
a few seconds at most; the hold never makes a process hang.

A request interrupted while it connects leaves its socket, connected but never used, in
the frames of the HTTP and TLS libraries (urllib3 and ``ssl`` close it on an ``OSError``
only). It stays open as long as the exception lives, i.e. through the log-out that
follows. A BMC that performs its TLS handshakes one at a time (many embedded servers do;
the lab's cheroot does them in its accept thread) then serves nobody until that connection
times out, the log-out included. :func:`close_sockets_left_by` closes them.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Final

log = logging.getLogger(__name__)

#: The signals :func:`held_signals` holds.
HELD: Final[tuple[int, ...]] = (signal.SIGINT, signal.SIGTERM)

_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers


class _Hold:
    """The handler installed for one :func:`held_signals` block."""

    def __init__(self, what: str, previous: dict[int, _Handler]) -> None:
        self.what = what
        self.previous = previous
        self.pending: int | None = None

    def handler(self, signum: int, _frame: FrameType | None) -> None:
        if self.pending is None:
            self.pending = signum
            log.warning(
                "%s received while %s: finishing that first (send it again to stop now)",
                signal.Signals(signum).name,
                self.what,
            )
            return
        # The second signal: the user insists. Handed on now, the first is not handed again.
        self.pending = None
        self.restore()
        log.warning("%s again: %s stops unfinished", signal.Signals(signum).name, self.what)
        signal.raise_signal(signum)

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


_active = False  # a hold is in place (the main thread's; nested blocks add nothing)


@contextlib.contextmanager
def held_signals(what: str) -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the block runs; hand a signal that arrived on to its
    handler when the block ends (normally or not), as if it arrived then.

    ``what`` says what the block does, for the message logged when a signal is held. A
    second signal during the block is handed on at once (the block ends as it would have
    without the hold). Only the main thread holds signals (Python runs signal handlers
    there: in another thread the block is not interrupted anyway), and only signals whose
    handler is set (the default or a Python function; an ignored one stays ignored).
    """
    global _active
    if _active or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, _Handler] = {}
    for signum in HELD:
        handler = signal.getsignal(signum)
        if handler is not None and handler != signal.SIG_IGN:  # None: not set from Python
            previous[signum] = handler
    hold = _Hold(what, previous)
    for signum in previous:
        signal.signal(signum, hold.handler)
    _active = True
    try:
        yield
    finally:
        _active = False
        hold.restore()
        if hold.pending is not None:
            signal.raise_signal(hold.pending)  # its handler runs now (e.g. KeyboardInterrupt)


def close_sockets_left_by(exc: BaseException) -> int:
    """Close every socket still held by a frame that ``exc`` went through; return how many
    were open. For a request that an exception other than ``OSError`` (a Ctrl-C) ended:
    what it connected is closed now, not when the exception is garbage.

    Only the frames ``exc`` left (its traceback, from where it was caught down to where it
    was raised) are looked at: the request's own, which are over."""
    closed = 0
    tb = exc.__traceback__
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, socket.socket) and value.fileno() != -1:
                with contextlib.suppress(OSError):
                    value.close()
                closed += 1
        tb = tb.tb_next
    return closed
