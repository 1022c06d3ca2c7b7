"""`powercut run` end to end on a throwaway test module (no cluster): the progress lines
reach the terminal while pytest captures the test's output, pytest's own output and the
libraries' warnings go to DIR/run.log, and `-v` puts pytest's output back on the terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

STEPS = """
import logging
import time
import warnings

from harness import progress
from harness.errors import WaitTimeout
from harness.kube.timeline import Timeline


def test_a_long_wait():
    progress.scenario("Demo: a wait that lasts")
    progress.step("When nothing happens for a while")
    print("the test's own output")
    logging.getLogger("sushy.connector").warning("third-party noise")
    warnings.warn("Unverified HTTPS request is being made", UserWarning)
    try:
        Timeline().wait_for(lambda t: False, time.monotonic() + 5.0, "node w1 NotReady")
    except WaitTimeout:
        pass
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "test_demo.py").write_text(STEPS)
    (tmp_path / "inv.yaml").write_text(
        "cluster: {kubeconfig: kubeconfig}\nnodes:\n  - {name: w1, role: worker, power: "
        "{driver: kind}}\n"
    )
    return tmp_path


def run(project: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            *extra,
            "run",
            "-i",
            "inv.yaml",
            "--steps",
            "steps",
            "--out",
            "out",
            "--no-html",
        ],
        capture_output=True,
        text=True,
        cwd=project,
        timeout=120,
    )


def test_progress_on_the_terminal_pytest_and_the_libraries_in_the_log(project: Path) -> None:
    result = run(project)
    assert result.returncode == 0, result.stdout + result.stderr
    err = result.stderr
    assert "scenario: Demo: a wait that lasts" in err
    assert "  step: When nothing happens for a while" in err
    assert "waiting for node w1 NotReady (budget 5.0s)" in err
    assert "timeout: node w1 NotReady after 5." in err
    shown = result.stdout + err
    for quiet in ("Unverified HTTPS request", "third-party noise", "1 passed"):
        assert quiet not in shown, quiet
    assert f"log:    {Path('out') / 'run.log'}" in result.stdout
    log = (project / "out" / "run.log").read_text()
    assert "UserWarning: Unverified HTTPS request is being made" in log
    assert "1 passed" in log


def test_verbose_puts_pytests_output_on_the_terminal(project: Path) -> None:
    result = run(project, "-v")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Unverified HTTPS request" in result.stdout + result.stderr
    assert "waiting for node w1 NotReady" in result.stderr  # plain progress too
    assert not (project / "out" / "run.log").exists()
