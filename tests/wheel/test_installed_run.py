"""What `powercut run` from the installed wheel left, run by scripts/wheel-test.sh
(``make wheel-test``) with POWERCUT_WHEEL_OUT (its output directory) and POWERCUT_WHEEL_VENV
(the fresh virtualenv)."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.report.dom import embedded

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def out() -> Path:
    value = os.environ.get("POWERCUT_WHEEL_OUT")
    if not value:
        pytest.skip("run by scripts/wheel-test.sh (POWERCUT_WHEEL_OUT unset)")
    return Path(value)


def test_the_installed_package_is_not_this_checkout() -> None:
    venv = os.environ.get("POWERCUT_WHEEL_VENV")
    if not venv:
        pytest.skip("run by scripts/wheel-test.sh (POWERCUT_WHEEL_VENV unset)")
    where = subprocess.run(
        [f"{venv}/bin/python", "-c", "import harness, harness.steps; print(harness.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    ).stdout.strip()
    assert Path(where).is_relative_to(Path(venv)), where
    assert not Path(where).resolve().is_relative_to(ROOT)


def test_the_built_in_scenario_and_the_users_feature_ran_and_passed(out: Path) -> None:
    cases = list(ET.parse(out / "junit.xml").getroot().iter("testcase"))  # noqa: S314 (ours)
    names = [f"{c.get('classname')}::{c.get('name')}" for c in cases]
    assert len(cases) == 2, names
    for case in cases:
        assert not list(case), f"{case.get('name')}: {[e.tag for e in case]}"  # no failure
    builtin = os.environ.get("POWERCUT_WHEEL_BUILTIN", "")
    assert any(builtin in n for n in names), names
    assert any("stateful_pod_loses_power_and_comes_back" in n for n in names), names


def test_the_html_report_holds_both_with_their_steps(out: Path) -> None:
    data = embedded(out / "index.html")
    results: list[dict[str, Any]] = [
        json.loads(v) for k, v in data.items() if k.startswith("data/test-results/")
    ]
    by_name = {r["name"]: r for r in results}
    assert len(by_name) == 2, sorted(by_name)
    for name, result in by_name.items():
        assert result["status"] == "passed", name
        assert result.get("steps"), f"{name}: no steps in the report"
    assert "A worker with a stateful pod loses power and comes back" in by_name


def test_the_run_kept_its_log(out: Path) -> None:
    log = (out / "run.log").read_text()
    assert "2 passed" in log


def test_outside_pytests_rootdir_the_users_feature_is_grouped_by_its_directory(
    out: Path,
) -> None:
    """Run from a project with its own pyproject.toml, the features in another tree: the
    feature's title path is its directory and name, not a ValueError."""
    paths = {
        r["name"]: r.get("titlePath")
        for r in (json.loads(p.read_text()) for p in (out / "allure-results").glob("*-result.json"))
    }
    mine = "A worker with a stateful pod loses power and comes back"
    assert paths[mine] == ["features", "A worker survives losing its power"], paths


def test_plain_pytest_under_a_pytest_ini_ran_the_shared_feature() -> None:
    value = os.environ.get("POWERCUT_WHEEL_PLAIN")
    if not value:
        pytest.skip("run by scripts/wheel-test.sh (POWERCUT_WHEEL_PLAIN unset)")
    plain = Path(value)
    cases = list(ET.parse(plain / "junit.xml").getroot().iter("testcase"))  # noqa: S314 (ours)
    assert len(cases) == 1 and not list(cases[0]), [c.get("name") for c in cases]
    (result,) = [
        json.loads(p.read_text()) for p in (plain / "allure-results").glob("*-result.json")
    ]
    assert result["status"] == "passed", result.get("statusDetails")
    assert result["titlePath"] == ["features", "A worker survives losing its power"]
