"""Exception types shared by the whole harness.

The type decides what happens next: a ``TemporaryError`` may be retried until a deadline,
a ``PermanentError`` ends the operation at once. Exceptions carry named fields and never
contain secrets.
"""

from __future__ import annotations


class PowercutError(Exception):
    """Base class of every error the harness raises on purpose."""


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
