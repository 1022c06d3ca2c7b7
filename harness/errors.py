"""Exception types shared by the whole harness.

The type decides what happens next: a ``TemporaryError`` may be retried until a deadline,
a ``PermanentError`` ends the operation at once. Exceptions carry named fields and never
contain secrets.
"""

from __future__ import annotations

from typing import TypeVar


class PowercutError(Exception):
    """Base class of every error the harness raises on purpose.

    ``acted`` says whether a disruptive action that raised this had changed anything:
    ``False`` when it failed before anything that acts reached its target (a BMC refused
    the credentials before any command, an SSH power-off left the host answering), so the
    journal records it as not done and owes no undo; ``None`` (the default) when it may
    have half-happened.
    """

    acted: bool | None = None


class PermanentError(PowercutError):
    """Retrying cannot help: bad input, refused credentials, unsupported request."""


class TemporaryError(PowercutError):
    """Retrying may help: connection refused during a reboot, 5xx, a timeout."""


class ConfigError(PermanentError):
    """Bad user input: a file, a field and what would have been valid."""

    def __init__(self, message: str, *, source: str = "", field: str = "") -> None:
        self.source = source
        self.field = field
        where = ":".join(p for p in (source, field) if p)
        super().__init__(f"{where}: {message}" if where else message)


class WaitTimeout(PowercutError):
    """A wait ran out: what was expected, what was last seen, how long it waited."""

    def __init__(self, expected: str, last_seen: str, waited_s: float) -> None:
        self.expected = expected
        self.last_seen = last_seen
        self.waited_s = waited_s
        super().__init__(
            f"timed out after {waited_s:.1f}s waiting for {expected}; last seen: {last_seen}"
        )


E = TypeVar("E", bound=PowercutError)


def not_acted(exc: E) -> E:
    """Mark ``exc`` as raised before its action changed anything (see ``acted``)."""
    exc.acted = False
    return exc


def has_acted(exc: BaseException) -> bool:
    """Whether the action that raised ``exc`` may have changed something (the safe default:
    anything but a ``PowercutError`` marked ``acted = False``)."""
    return not (isinstance(exc, PowercutError) and exc.acted is False)
