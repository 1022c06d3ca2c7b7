"""Feature files outside pytest's rootdir (#22 item 1), without a cluster.

A user's project directory has its own pytest configuration (``pyproject.toml`` with
``[tool.pytest.ini_options]``, or ``pytest.ini``) and holds the inventory; the features live in
another tree. allure-pytest-bdd computes each scenario's title path relative to the rootdir and
raised ``ValueError: '.../x.feature' is not in the subpath of '...'`` before the first step,
so every such scenario broke. Both ways in are run for real (a pytest child with
allure-pytest-bdd writing results): the user's plain ``pytest`` with a one-line test module,
and ``powercut run``. The steps of the throwaway feature need no cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.cli.run import EXIT_PASSED
from tests.fakes.project import INVENTORY

REPO = Path(__file__).resolve().parents[2]


FEATURE = """\
Feature: Shared elsewhere

  Scenario: Nothing needs a cluster
    Given nothing needs a cluster
"""

#: The user's own test module: the features from another tree, a step of its own.
TEST_MODULE = """\
from pytest_bdd import given, scenarios

scenarios({features!r})


@given("nothing needs a cluster")
def nothing():
    pass
"""

#: A setting that would break any run reading it: the project's configuration must not
#: leak into `powercut run`'s child.
POISON = "--no-such-option-from-the-users-project"


def write_project(tmp_path: Path, config: str, *, addopts: str = "-ra") -> dict[str, Path]:
    """The four trees: the project (configuration, inventory), the shared features, the
    test module's directory, and the output."""
    project = tmp_path / "project"
    shared = tmp_path / "shared" / "feats" / "power"
    for d in (project, shared):
        d.mkdir(parents=True)
    if config == "pyproject.toml":
        (project / "pyproject.toml").write_text(
            f'[tool.pytest.ini_options]\naddopts = "{addopts}"\n'
        )
    else:
        (project / "pytest.ini").write_text(f"[pytest]\naddopts = {addopts}\n")
    (project / "inventory.yaml").write_text(INVENTORY)
    (shared / "x.feature").write_text(FEATURE)
    return {"project": project, "features": tmp_path / "shared" / "feats"}


def results(alluredir: Path) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]
    assert found, f"no Allure result in {alluredir}"
    return found


@pytest.fixture
def child_env(tmp_path: Path) -> dict[str, str]:
    """This checkout's harness in the child; a state directory of the test's own."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "POWERCUT_STATE_DIR": str(tmp_path / "state"),
    }


def plain_pytest(
    project: Path, env: dict[str, str], *more: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *more],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize("config", ["pyproject.toml", "pytest.ini"])
def test_plain_pytest_runs_a_feature_outside_its_rootdir(
    tmp_path: Path, child_env: dict[str, str], config: str
) -> None:
    trees = write_project(tmp_path, config)
    project = trees["project"]
    (project / "test_features.py").write_text(TEST_MODULE.format(features=str(trees["features"])))
    out = plain_pytest(project, child_env, "--alluredir", str(tmp_path / "allure"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"rootdir: {project}" in out.stdout  # the project's configuration is pytest's
    (result,) = results(tmp_path / "allure")
    assert result["status"] == "passed", result.get("statusDetails")
    # the directory holding the file, the feature's name (as in Allure's fullName)
    assert result["titlePath"] == ["power", "Shared elsewhere"]


def test_without_powercuts_plugin_the_same_run_breaks_as_reported(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """The reproduction stays honest: allure-pytest-bdd alone still breaks the scenario this
    way (should a release of it fix this, this test says the wrapper can go)."""
    trees = write_project(tmp_path, "pyproject.toml")
    project = trees["project"]
    (project / "test_features.py").write_text(TEST_MODULE.format(features=str(trees["features"])))
    out = plain_pytest(project, child_env, "-p", "no:powercut", "--alluredir", str(tmp_path / "a"))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "is not in the subpath of" in out.stdout


def test_a_feature_under_the_rootdir_keeps_allures_own_title_path(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    trees = write_project(tmp_path, "pyproject.toml")
    project = trees["project"]
    inside = project / "features" / "racks"
    inside.mkdir(parents=True)
    (inside / "x.feature").write_text(FEATURE)
    (project / "test_features.py").write_text(TEST_MODULE.format(features="features"))
    out = plain_pytest(project, child_env, "--alluredir", str(tmp_path / "allure"))
    assert out.returncode == 0, out.stdout + out.stderr
    (result,) = results(tmp_path / "allure")
    assert result["titlePath"] == ["features", "racks", "Shared elsewhere"]


@pytest.mark.parametrize("config", ["pyproject.toml", "pytest.ini"])
def test_powercut_run_from_a_project_with_its_own_pytest_configuration(
    tmp_path: Path,
    child_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    config: str,
) -> None:
    """Run from inside the project (its configuration would break any pytest reading it),
    the inventory there, the features and the test module each in a tree of their own."""
    trees = write_project(tmp_path, config, addopts=POISON)
    steps = tmp_path / "elsewhere" / "steps"
    steps.mkdir(parents=True)
    (steps / "test_shared.py").write_text(TEST_MODULE.format(features=str(trees["features"])))
    for key in ("PYTHONPATH", "POWERCUT_STATE_DIR"):
        monkeypatch.setenv(key, child_env[key])
    monkeypatch.chdir(trees["project"])
    out = tmp_path / "out"
    argv = ["run", "-i", "inventory.yaml", "--steps", str(steps), "--out", str(out)]
    assert main([*argv, "--no-html", "--progress", "off"]) == EXIT_PASSED, out / "run.log"
    assert "1 passed" in capfd.readouterr().out
    (result,) = results(out / "allure-results")
    assert result["status"] == "passed"
    assert result["titlePath"] == ["power", "Shared elsewhere"]
    log = (out / "run.log").read_text()
    assert POISON not in log
    assert not (steps / ".pytest_cache").exists()  # the package may be read-only
    # the dry run too: node ids relative to the test modules' directory
    assert main(["run", "-i", "inventory.yaml", "--steps", str(steps), "--dry-run"]) == 0
    assert "test_shared.py::test_nothing_needs_a_cluster" in capfd.readouterr().out
