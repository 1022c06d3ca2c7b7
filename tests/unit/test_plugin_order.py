"""The built-in features collect whatever order the pytest11 entry points load in.

Entry points load in the order the installed distributions are found (directory order of
site-packages, a stray ``*.egg-info`` in the working directory first): a user's virtualenv
may register powercut's plugin before pytest-bdd's. The feature tags (``@epic:...``) must
still become labels, not unknown markers refused by ``--strict-markers``.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import harness.steps


def test_powercut_first_still_collects_the_built_in_features(tmp_path: Path) -> None:
    dist = importlib.metadata.distribution("powercut")
    info = Path(str(dist._path))  # type: ignore[attr-defined]
    shutil.copytree(info, tmp_path / info.name)  # found first: the working directory
    bdd = Path(harness.steps.__file__).parent
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(bdd),
            "-p",
            "no:allure_pytest",
            "-p",
            "no:cacheprovider",
            "--strict-markers",
            "--collect-only",
            "-q",
            "--trace-config",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    order = [line for line in run.stdout.splitlines() if "PLUGIN registered: <module" in line]
    names = [line.split("'")[1] for line in order]
    assert names.index("harness.pytest_plugin") < names.index("pytest_bdd.plugin"), names
    assert run.returncode == 0, run.stdout[-2000:]
    assert "not found in `markers`" not in run.stdout
