"""Quiet by default: the terminal gets powercut's own warnings and errors, one line each;
every library's warnings and log records (sushy, urllib3, paramiko, ...) go to a log file;
``powercut -v`` shows everything, at debug level, on the terminal.

``powercut run`` keeps a log of its own run (``DIR/run.log``: pytest's output, in which the
libraries' warnings land); the other commands append to :func:`default_log_file`.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import warnings
from pathlib import Path
from typing import TextIO

from harness.settings import Settings, or_environment

__all__ = ["configure_logging", "default_log_file"]

OURS = "harness"
FORMAT = "%(levelname)s %(name)s: %(message)s"


def default_log_file(settings: Settings | None = None) -> Path:
    """``$POWERCUT_LOG``, else ``$POWERCUT_CACHE/log/powercut.log`` (docs/settings.md)."""
    return or_environment(settings).log_file


class _Ours(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.name == OURS or record.name.startswith(OURS + ".")


def _is_ours(category: type[Warning]) -> bool:
    module = getattr(category, "__module__", "")
    return module == OURS or module.startswith(OURS + ".")


def configure_logging(
    verbose: bool, *, log_file: Path | None = None, stream: TextIO | None = None
) -> Path | None:
    """Set up the root logger and warnings for one command; return the log file (None
    when ``verbose``: everything goes to the terminal)."""
    stream = stream if stream is not None else sys.stderr
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    terminal = logging.StreamHandler(stream)
    terminal.setFormatter(logging.Formatter(FORMAT))
    if verbose:
        root.setLevel(logging.DEBUG)
        terminal.setLevel(logging.DEBUG)
        root.addHandler(terminal)
        logging.captureWarnings(True)
        return None
    root.setLevel(logging.INFO)
    terminal.setLevel(logging.WARNING)
    terminal.addFilter(_Ours())
    root.addHandler(terminal)
    path: Path | None = log_file or default_log_file()
    try:
        assert path is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        file = logging.handlers.RotatingFileHandler(
            path, maxBytes=5_000_000, backupCount=2, encoding="utf-8"
        )
    except OSError:
        path = None  # nowhere to write: the libraries' records are dropped, ours still show
    else:
        file.setFormatter(logging.Formatter("%(asctime)s " + FORMAT))
        file.setLevel(logging.INFO)
        root.addHandler(file)
    library = logging.getLogger("py.warnings")

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if _is_ours(category):
            # Ours (an inline password in the inventory): one line, where it was found.
            stream.write(f"powercut: warning: {filename}:{lineno}: {message}\n")
        else:
            library.warning("%s:%s: %s: %s", filename, lineno, category.__name__, message)

    warnings.showwarning = show
    return path
