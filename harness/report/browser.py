"""Headless Chromium (Debian ``chromium``) for screenshots and DOM checks of a report.

The report's data is embedded base64 and drawn by JavaScript, so the raw HTML does not
contain scenario names; what a reader sees is only in the DOM after the app has run. These
helpers load a ``file://`` page with a virtual time budget (time runs as fast as the page
lets it, without waiting in real time) and return the rendered DOM or a PNG.

Chromium is started in its own process group, which is killed on timeout (Chromium starts
helper processes that would otherwise outlive it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness.report.html import INSTALL_COMMAND, ReportError, ReportToolMissing
from harness.settings import Settings, or_environment

#: Flags for a quiet, offline, sandbox-free (root in containers) headless run.
CHROMIUM_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
DEFAULT_BUDGET_MS = 5000


def find_chromium(settings: Settings | None = None) -> Path:
    """``$POWERCUT_CHROMIUM`` (docs/settings.md), else ``chromium`` on PATH."""
    named = or_environment(settings).chromium
    env = str(named) if named is not None else None
    found = env or shutil.which("chromium")
    if not found or not Path(found).is_file():
        raise ReportToolMissing(
            "chromium (Debian package, headless report checks)",
            f"{INSTALL_COMMAND}  (or apt-get install chromium)",
            env or "chromium on PATH",
        )
    return Path(found)


def _run(args: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.Popen(
        list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise ReportError(
            f"chromium did not finish within {timeout_s:g}s",
            command=args,
            output=err.decode(errors="replace"),
        ) from None
    return subprocess.CompletedProcess(list(args), proc.returncode, out, err)


def _command(url: str, profile: Path, budget_ms: int, extra: Sequence[str]) -> list[str]:
    return [
        str(find_chromium()),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={budget_ms}",
        *extra,
        url,
    ]


def dump_dom(url: str, *, budget_ms: int = DEFAULT_BUDGET_MS, timeout_s: float = 120.0) -> str:
    """The page's DOM (``outerHTML``) after ``budget_ms`` of virtual time."""
    with tempfile.TemporaryDirectory(prefix="powercut-chromium-") as profile:
        cmd = _command(url, Path(profile), budget_ms, ["--dump-dom"])
        done = _run(cmd, timeout_s)
    if done.returncode != 0 or not done.stdout.strip():
        raise ReportError(
            f"chromium --dump-dom exited {done.returncode}",
            command=cmd,
            output=done.stderr.decode(errors="replace"),
        )
    return done.stdout.decode("utf-8", errors="replace")


def screenshot(
    url: str,
    png: Path,
    *,
    width: int = 1400,
    height: int = 900,
    budget_ms: int = DEFAULT_BUDGET_MS,
    timeout_s: float = 120.0,
) -> Path:
    """Save a PNG of the page after ``budget_ms`` of virtual time; return its path."""
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="powercut-chromium-") as profile:
        extra = [f"--screenshot={png.resolve()}", f"--window-size={width},{height}"]
        cmd = _command(url, Path(profile), budget_ms, extra)
        done = _run(cmd, timeout_s)
    if done.returncode != 0 or not png.is_file():
        raise ReportError(
            f"chromium --screenshot exited {done.returncode} without writing {png}",
            command=cmd,
            output=done.stderr.decode(errors="replace"),
        )
    return png
