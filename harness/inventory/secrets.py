"""Credentials that are never plain strings in the models: a :class:`Secret` reads its
environment variable or file only when a driver asks for it, and shows as ``***``; an
inline password warns (:class:`InlinePasswordWarning`, naming the node, never the value).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.errors import ConfigError


class InlinePasswordWarning(UserWarning):
    """A BMC password is written in the inventory itself instead of an env var or file.

    The message names the node, never the value.
    """

    def __init__(self, node: str) -> None:
        super().__init__(
            f"node {node}: power.password is written inline in the inventory; "
            "use power.password_env or power.password_file outside a lab"
        )
        self.node = node


# --------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------


class Secret:
    """A credential resolved only when needed, from an environment variable, a file or (labs
    only) an inline value.

    ``str()`` and ``repr()`` are ``***``; the value is returned only by :meth:`reveal`.
    Resolution errors name the owner (``node w1``) and the variable or file, never a value.
    """

    __slots__ = ("_env", "_file", "_owner", "_value")

    def __init__(
        self,
        *,
        env: str | None = None,
        file: Path | None = None,
        value: str | None = None,
        owner: str = "",
    ) -> None:
        if sum(x is not None for x in (env, file, value)) != 1:
            raise ValueError("a Secret needs exactly one of env, file or value")
        self._env = env
        self._file = file
        self._value = value
        self._owner = owner

    @property
    def source(self) -> str:
        """Where the value comes from, safe to print: ``env BMC_PW``, ``file /x``, ``inline``."""
        if self._env is not None:
            return f"env {self._env}"
        if self._file is not None:
            return f"file {self._file}"
        return "inline"

    def reveal(self) -> str:
        """The secret value. Reads the environment or the file on every call (rotation)."""
        who = f"{self._owner}: " if self._owner else ""
        if self._value is not None:
            return self._value
        if self._env is not None:
            value = os.environ.get(self._env)
            if value is None:
                raise ConfigError(f"{who}environment variable {self._env} is not set")
            if not value:
                raise ConfigError(f"{who}environment variable {self._env} is empty")
            return value
        assert self._file is not None
        try:
            text = self._file.read_text(encoding="utf-8")
        except OSError as exc:
            # strerror only: the exception text of a read error holds no content
            raise ConfigError(
                f"{who}cannot read password file {self._file}: {exc.strerror or type(exc).__name__}"
            ) from None
        except UnicodeDecodeError:
            raise ConfigError(f"{who}password file {self._file} is not UTF-8 text") from None
        value = text.rstrip("\r\n")
        if not value:
            raise ConfigError(f"{who}password file {self._file} is empty")
        return value

    def __str__(self) -> str:
        return "***"

    def __repr__(self) -> str:
        return "***"

    def __format__(self, format_spec: str) -> str:
        return "***"

    def __reduce__(self) -> Any:
        raise TypeError("a Secret cannot be pickled")
