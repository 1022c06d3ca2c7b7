"""``powercut run`` interrupted: SIGINT to the process or its group (a terminal's Ctrl-C),
and SIGKILL, on the throwaway feature of tests/unit/test_cli_run.py whose step hangs until
interrupted and whose undo takes a while.

Real processes, real signals and real time: a fake clock cannot stand in for the kernel
delivering a signal to a process group, or for PR_SET_PDEATHSIG, so these sit here rather
than in tests/unit. Each waits for what it needs (the scenario started, the undo done) with a
generous deadline, never for a fixed time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.run import EXIT_INTERRUPTED
from tests.polling import poll_until
from tests.unit.test_cli_run import env, steps_dir  # noqa: F401 - env is a fixture


@pytest.fixture(autouse=True)
def slow_undo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SLOW_UNDO", "1")


def _interrupt(tmp_path: Path, inv: Path, send: str) -> subprocess.CompletedProcess[str]:
    """Run ``powercut run`` in a process of its own (a terminal's foreground job: its own
    process group), wait until the scenario has started, then send SIGINT ``send``: to the
    ``parent`` process only (as ``kill -INT PID``), or to its ``group`` (as Ctrl-C); or
    ``kill`` the parent with SIGKILL."""
    steps = steps_dir(tmp_path, "hang")
    cmd = [sys.executable, "-m", "harness.cli", "run", "-i", str(inv), "--steps", str(steps)]
    proc = subprocess.Popen(
        [*cmd, "--out", str(tmp_path / "out"), "--no-html"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        poll_until(
            "the scenario to start",
            lambda: (tmp_path / "started").exists() or proc.poll() is not None,
            timeout_s=60,
            every_s=0.05,
        )
        assert proc.poll() is None, proc.communicate()[0]
        if send == "parent":
            os.kill(proc.pid, signal.SIGINT)
        elif send == "kill":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out)


@pytest.mark.parametrize("send", ["parent", "group"])
def test_sigint_is_passed_on_once_and_the_run_exits_3_restored(
    tmp_path: Path,
    env: Path,  # noqa: F811
    send: str,
) -> None:
    done = _interrupt(tmp_path, env, send)
    assert done.returncode == EXIT_INTERRUPTED, done.stdout
    assert (tmp_path / "restored").read_text() == "yes", done.stdout  # the undo ran to its end
    # exactly once: with the child in the terminal's process group as well, a Ctrl-C would
    # reach it twice (from the terminal and passed on), the second during its undos
    assert (tmp_path / "sigints").read_text() == "1", done.stdout
    assert "SIGINT: stopping" in done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_scenarios_stop_and_undo_when_powercut_run_is_killed(
    tmp_path: Path,
    env: Path,  # noqa: F811
) -> None:
    done = _interrupt(tmp_path, env, "kill")
    assert done.returncode == -signal.SIGKILL
    # the child got SIGTERM, and undid
    poll_until(
        "the orphaned scenario to stop and undo",
        lambda: (tmp_path / "restored").exists(),
        timeout_s=30,
        every_s=0.05,
    )
