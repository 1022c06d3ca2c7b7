"""powercut's settings from the environment: every ``POWERCUT_*`` variable, in one place.

The front ends read them once (``powercut``'s ``main`` and the pytest plugin) and pass the
:class:`Settings` down; a library function that takes ``settings=None`` reads the
environment as it is at that moment through :func:`from_environment` (a library caller, a
test that sets a variable). No other module of ``harness/`` reads a ``POWERCUT_*`` variable
(``tests/unit/test_settings.py`` checks it). The table of variables is :data:`VARIABLES`;
docs/settings.md shows it (``tests/unit/test_settings.py`` checks the two agree).

A bad value is refused before anything is touched, naming the variable, what it held and
what is valid. An empty variable counts as unset, as it always has.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final

from harness.errors import ConfigError

PREFIX: Final = "POWERCUT_"
_BIN_PREFIX: Final = PREFIX + "BIN_"


@dataclass(frozen=True, slots=True)
class Variable:
    """One environment variable: its name, its type, its default and what it means."""

    name: str
    kind: str
    default: str
    meaning: str


STATE_DIR: Final = Variable(
    "POWERCUT_STATE_DIR",
    "directory",
    "~/.local/state/powercut",
    "where sessions keep their state: each inventory's journal (`powercut recover` reads it)",
)
CACHE: Final = Variable(
    "POWERCUT_CACHE",
    "directory",
    "~/.cache/powercut",
    "the cache: the lab's binaries, builds, the Allure install, the default log",
)
LOG: Final = Variable(
    "POWERCUT_LOG",
    "file",
    "$POWERCUT_CACHE/log/powercut.log",
    "the `powercut` command's log file (libraries' records, warnings)",
)
LAB_DIR: Final = Variable(
    "POWERCUT_LAB_DIR",
    "directory",
    "$POWERCUT_CACHE/lab",
    "`powercut lab`'s state directory when `--state-dir` is not given (one lab per directory)",
)
KIND_DIR: Final = Variable(
    "POWERCUT_KIND_DIR",
    "directory",
    "$POWERCUT_CACHE/kind-state",
    "`powercut kind`'s state directory when `--state-dir` is not given",
)
ALLURE: Final = Variable(
    "POWERCUT_ALLURE",
    "executable",
    "the cached pinned Allure 3 (`$POWERCUT_CACHE/node/allure-<version>`)",
    "the Allure Report 3 binary that renders the HTML report",
)
CHROMIUM: Final = Variable(
    "POWERCUT_CHROMIUM",
    "executable",
    "`chromium` on PATH",
    "the headless Chromium that checks a rendered report",
)
INVENTORY: Final = Variable(
    "POWERCUT_INVENTORY",
    "file",
    "none",
    "the chaostoolkit extension's inventory when the experiment's configuration names none",
)
PROGRESS: Final = Variable(
    "POWERCUT_PROGRESS",
    "one of auto, rich, plain, off",
    "off",
    "the pytest plugin's default for `--powercut-progress` (`powercut run` sets it)",
)
PROGRESS_FD: Final = Variable(
    "POWERCUT_PROGRESS_FD",
    "file descriptor (integer >= 0)",
    "pytest's stderr",
    "where the pytest plugin draws its progress display (`powercut run` hands its terminal over)",
)
BIN_DIR: Final = Variable(
    "POWERCUT_BIN_DIR",
    "directory",
    "none (build or use the cache)",
    "a directory holding the lab's binaries (kube-apiserver, etcd, kwok, ...) to use as they are",
)
BIN: Final = Variable(
    _BIN_PREFIX + "<NAME>",
    "executable",
    "none",
    "one lab binary to use as it is (`<NAME>`: the binary's name upper-cased, `-` as `_`, "
    "e.g. `POWERCUT_BIN_KUBE_APISERVER`)",
)

#: Every variable, in the order docs/settings.md lists them.
VARIABLES: Final = (
    STATE_DIR,
    CACHE,
    LOG,
    LAB_DIR,
    KIND_DIR,
    ALLURE,
    CHROMIUM,
    INVENTORY,
    PROGRESS,
    PROGRESS_FD,
    BIN_DIR,
    BIN,
)

PROGRESS_MODES: Final = ("auto", "rich", "plain", "off")


def bin_variable(binary: str) -> str:
    """The variable that names one lab binary: ``kube-apiserver`` -> POWERCUT_BIN_KUBE_APISERVER."""
    return _BIN_PREFIX + binary.upper().replace("-", "_")


def _empty() -> Mapping[str, Path]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Settings:
    """powercut's settings, parsed and checked: one field per variable of :data:`VARIABLES`."""

    #: POWERCUT_STATE_DIR: each inventory's journal lives under ``state_dir/journals``.
    state_dir: Path
    #: POWERCUT_CACHE: the cache root.
    cache_dir: Path
    #: POWERCUT_LOG: the command's log file.
    log_file: Path
    #: POWERCUT_LAB_DIR: the lab's default state directory.
    lab_dir: Path
    #: POWERCUT_KIND_DIR: kind's default state directory.
    kind_dir: Path
    #: POWERCUT_ALLURE: the Allure binary named, as given (checked where it is used).
    allure: Path | None = None
    #: POWERCUT_CHROMIUM: the Chromium binary named, as given.
    chromium: Path | None = None
    #: POWERCUT_INVENTORY: the chaostoolkit extension's inventory.
    inventory: Path | None = None
    #: POWERCUT_PROGRESS: one of :data:`PROGRESS_MODES`.
    progress: str = "off"
    #: POWERCUT_PROGRESS_FD: the display's file descriptor.
    progress_fd: int | None = None
    #: POWERCUT_BIN_DIR: the directory of ready lab binaries.
    bin_dir: Path | None = None
    #: POWERCUT_BIN_<NAME>: one ready binary per variable, keyed by the variable's name.
    bins: Mapping[str, Path] = field(default_factory=_empty)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, home: Path | None = None) -> Settings:
        """Parse ``environ``; raise :class:`ConfigError` naming the variable on a bad value."""
        home = home if home is not None else Path.home()
        get = _Reader(environ)
        cache = get.path(CACHE) or home / ".cache" / "powercut"
        return cls(
            state_dir=get.path(STATE_DIR) or home / ".local" / "state" / "powercut",
            cache_dir=cache,
            log_file=get.path(LOG) or cache / "log" / "powercut.log",
            lab_dir=get.path(LAB_DIR) or cache / "lab",
            kind_dir=get.path(KIND_DIR) or cache / "kind-state",
            allure=get.path(ALLURE),
            chromium=get.path(CHROMIUM),
            inventory=get.path(INVENTORY),
            progress=get.choice(PROGRESS, PROGRESS_MODES) or "off",
            progress_fd=get.fd(PROGRESS_FD),
            bin_dir=get.path(BIN_DIR),
            bins=MappingProxyType(
                {
                    name: Path(value)
                    for name, value in sorted(environ.items())
                    if name.startswith(_BIN_PREFIX) and name != BIN_DIR.name and value
                }
            ),
        )

    def bin(self, binary: str) -> Path | None:
        """The ready binary POWERCUT_BIN_<NAME> names for ``binary``, if any."""
        return self.bins.get(bin_variable(binary))

    def progress_environ(self, mode: str, fd: int | None) -> dict[str, str]:
        """The variables ``powercut run`` hands its pytest child: the display's mode and
        terminal (the plugin reads them back with :func:`from_environment`)."""
        env = {PROGRESS.name: _choice(PROGRESS, mode, PROGRESS_MODES)}
        if fd is not None:
            env[PROGRESS_FD.name] = str(fd)
        return env


class _Reader:
    """Reads one variable at a time, refusing a bad value with the variable's name."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def raw(self, var: Variable) -> str | None:
        return self._environ.get(var.name) or None  # empty counts as unset

    def path(self, var: Variable) -> Path | None:
        value = self.raw(var)
        if value is None:
            return None
        if "\0" in value:
            raise ConfigError(
                f"{value!r} is not a path (a NUL byte); valid: a {var.kind} path",
                field=var.name,
            )
        return Path(value).expanduser()

    def choice(self, var: Variable, valid: tuple[str, ...]) -> str | None:
        value = self.raw(var)
        return None if value is None else _choice(var, value, valid)

    def fd(self, var: Variable) -> int | None:
        value = self.raw(var)
        if value is None:
            return None
        if not value.strip().isdigit():
            raise ConfigError(
                f"{value!r} is not valid; valid: a file descriptor, an integer >= 0",
                field=var.name,
            )
        return int(value)


def _choice(var: Variable, value: str, valid: tuple[str, ...]) -> str:
    if value not in valid:
        raise ConfigError(f"{value!r} is not valid; valid: {', '.join(valid)}", field=var.name)
    return value


def from_environment() -> Settings:
    """The settings of this process's environment as it is now: the one reader of it."""
    return Settings.from_environ(os.environ)


def or_environment(settings: Settings | None) -> Settings:
    """``settings`` as passed down, else read from the environment now."""
    return settings if settings is not None else from_environment()


def attached(args: object) -> Settings | None:
    """The settings a front end read once and attached to its parsed arguments
    (``args.settings``), if any: what a command passes down."""
    found = getattr(args, "settings", None)
    return found if isinstance(found, Settings) else None


def markdown_table() -> str:
    """:data:`VARIABLES` as the Markdown table docs/settings.md shows."""
    rows = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for var in VARIABLES:
        rows.append(f"| `{var.name}` | {var.kind} | {var.default} | {var.meaning} |")
    return "\n".join(rows) + "\n"
