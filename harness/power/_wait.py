"""Shared helpers of the power drivers: bounded waits with an injectable clock, and secrets.

A wait has a description, a deadline and a last observation. ``wait_until`` polls a probe
until a condition holds; a ``TemporaryError`` from the probe is remembered as the last
observation and retried with backoff, a ``PermanentError`` ends the wait at once, and
running out of time raises ``WaitTimeout`` saying what was expected, what was last seen
and how long it waited. Deadlines use the monotonic clock, never the wall clock.

``Secret`` keeps a password out of ``repr()``, ``str()``, f-strings and pickles; the
drivers store every credential in one and call ``reveal()`` only where the protocol
library needs the value.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Final, NoReturn, Protocol, TypeVar, final

from harness import progress
from harness.clock import SYSTEM_CLOCK as _REAL_CLOCK
from harness.errors import PermanentError, PowercutError, TemporaryError, WaitTimeout, not_acted

T = TypeVar("T")

#: Longest pause between two attempts after a ``TemporaryError``.
MAX_BACKOFF_S: Final = 5.0

#: First pause of a driver's read-back after a power command (then doubling up to its
#: ``poll_s``): the lab's BMCs read the new state within milliseconds of answering, real
#: ones usually within a second; a few more reads early cost a BMC little.
READBACK_FIRST_POLL_S: Final = 0.05


class Clock(Protocol):
    """What a wait needs from time: a monotonic reading and a way to pause."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


@final
class SystemClock:
    """The real clock: ``time.monotonic``, and :data:`harness.clock.SYSTEM_CLOCK` to pause."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        _REAL_CLOCK.sleep(seconds)


SYSTEM_CLOCK: Final[Clock] = SystemClock()


@final
class Deadline:
    """A point in monotonic time, ``timeout_s`` after creation."""

    def __init__(self, timeout_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        if timeout_s < 0:
            raise ValueError(f"timeout_s must be >= 0, got {timeout_s}")
        self.timeout_s = timeout_s
        self.clock = clock
        self._start = clock.monotonic()

    def elapsed(self) -> float:
        return self.clock.monotonic() - self._start

    def remaining(self) -> float:
        return max(0.0, self.timeout_s - self.elapsed())

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def __repr__(self) -> str:
        return f"Deadline(timeout_s={self.timeout_s}, remaining={self.remaining():.3f})"


def wait_until(
    probe: Callable[[], T],
    done: Callable[[T], bool],
    *,
    expected: str,
    deadline: Deadline,
    poll_s: float,
    describe: Callable[[T], str] = str,
    max_backoff_s: float = MAX_BACKOFF_S,
    first_poll_s: float | None = None,
) -> T:
    """Call ``probe`` until ``done(value)`` holds, and return that value.

    The probe runs at least once, and once more when the deadline is reached, so a slow
    poll interval never hides a state reached just before the deadline. Between two
    probes the wait pauses ``poll_s`` (after a value) or an exponential backoff starting
    at ``poll_s`` and capped at ``max_backoff_s`` (after a ``TemporaryError``), never
    beyond the deadline. With ``first_poll_s`` the pauses after a value start there and
    double up to ``poll_s``: a read-back right after a command, whose state usually comes
    within milliseconds, is not held up by a whole ``poll_s`` step.

    Raises:
        PermanentError: raised by the probe; it ends the wait at once.
        WaitTimeout: ``done`` did not hold before the deadline.
    """
    if poll_s <= 0:
        raise ValueError(f"poll_s must be > 0, got {poll_s}")
    if first_poll_s is not None and first_poll_s <= 0:
        raise ValueError(f"first_poll_s must be > 0, got {first_poll_s}")
    first = poll_s if first_poll_s is None else min(first_poll_s, poll_s)
    with progress.waiting(expected, deadline.remaining()):
        return _wait_until(probe, done, expected, deadline, poll_s, first, describe, max_backoff_s)


def _wait_until(
    probe: Callable[[], T],
    done: Callable[[T], bool],
    expected: str,
    deadline: Deadline,
    poll_s: float,
    first_poll_s: float,
    describe: Callable[[T], str],
    max_backoff_s: float,
) -> T:
    last_seen = "nothing (no attempt finished)"
    backoff = poll_s
    step = first_poll_s  # the pause after a value: ramps up to poll_s
    while True:
        pause = step
        try:
            value = probe()
        except Throttled as exc:
            last_seen = f"{type(exc).__name__}: {exc}"
            pause = exc.retry_after_s
            if pause > deadline.remaining():
                last_seen += (
                    f" (it asked to retry after {pause:g} s, beyond the deadline: "
                    f"{deadline.remaining():.1f} s left)"
                )
                _timeout(expected, last_seen, deadline)
        except TemporaryError as exc:
            last_seen = f"{type(exc).__name__}: {exc}"
            pause = backoff
            backoff = min(backoff * 2, max(max_backoff_s, poll_s))
        else:
            if done(value):
                return value
            last_seen = describe(value)
            backoff = poll_s
            step = min(step * 2, poll_s)
        remaining = deadline.remaining()
        if remaining <= 0.0:
            _timeout(expected, last_seen, deadline)
        deadline.clock.sleep(min(pause, remaining))


class Throttled(TemporaryError):
    """The peer is busy and said when to come back (HTTP 503 or 429 with ``Retry-After``):
    the next attempt waits ``retry_after_s``, if the deadline leaves that long."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


def retry(
    operation: Callable[[], T],
    *,
    action: str,
    deadline: Deadline,
    poll_s: float,
    max_backoff_s: float = MAX_BACKOFF_S,
) -> T:
    """Run ``operation`` until it stops raising ``TemporaryError``, within ``deadline``."""
    return wait_until(
        operation,
        lambda _value: True,
        expected=action,
        deadline=deadline,
        poll_s=poll_s,
        max_backoff_s=max_backoff_s,
    )


@contextlib.contextmanager
def before_acting() -> Iterator[None]:
    """Errors raised in the block came before anything that acts was sent (reads, session
    set-up, a BMC refusing the command itself): the action changed nothing."""
    try:
        yield
    except PowercutError as exc:
        not_acted(exc)
        raise


@contextlib.contextmanager
def refusal_acted_on_nothing() -> Iterator[None]:
    """A ``PermanentError`` raised in the block is the target refusing the request (bad
    credentials, a command it does not take): nothing acted. Other errors (a timeout
    waiting for the answer) may have acted."""
    try:
        yield
    except PermanentError as exc:
        not_acted(exc)
        raise


def _timeout(expected: str, last_seen: str, deadline: Deadline) -> NoReturn:
    raise WaitTimeout(expected=expected, last_seen=last_seen, waited_s=deadline.elapsed())


@final
class Secret:
    """A credential that never shows itself: ``repr``, ``str`` and pickling are safe."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value itself, for the protocol library that needs it. Do not log it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __format__(self, format_spec: str) -> str:
        return repr(self)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret cannot be pickled")


def redact(text: str, *secrets: Secret) -> str:
    """``text`` with every non-empty secret replaced by ``********``.

    Drivers pass third-party error messages through this before putting them into their
    own exceptions, as a second line of defence.
    """
    for secret in secrets:
        value = secret.reveal()
        if value:
            text = text.replace(value, "********")
    return text
