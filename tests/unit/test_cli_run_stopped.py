"""``powercut run`` when a stop condition stopped a scenario: the run ends there and exits 5
(restored), and the report puts the scenario in its own category."""

from __future__ import annotations

import json
from pathlib import Path

from harness.cli import main
from harness.cli.run import EXIT_STOPPED
from harness.report.allure_env import STOPPED, classify
from tests.unit.test_cli_run import env  # noqa: F401 - the fixture

FEATURE = """\
Feature: Two scenarios

  Scenario: The first is stopped
    Then the outcome is stopped

  Scenario: The second never runs
    Then the outcome is pass
"""

STEPS = """\
import os
from pathlib import Path

import pytest
from pytest_bdd import parsers, scenarios, then

from harness.session import StoppedByCondition

scenarios("fake.feature")


@pytest.fixture
def disruption():
    yield
    Path(os.environ["FAKE_DIR"], "restored").write_text("yes")


@then(parsers.parse("the outcome is {what}"))
def outcome(what, disruption):
    Path(os.environ["FAKE_DIR"], what).write_text("ran")
    if what == "stopped":
        raise StoppedByCondition("SLO api-available", 'sum(up{job="apiserver"}) = 1 on {}')
"""


def test_a_stopped_scenario_ends_the_run_with_exit_5(tmp_path: Path, env: Path) -> None:  # noqa: F811
    steps = tmp_path / "steps"
    steps.mkdir()
    (steps / "fake.feature").write_text(FEATURE)
    (steps / "test_fake.py").write_text(STEPS)
    # the hook that ends the run comes with the SLO steps, through powercut's pytest plugin
    out = tmp_path / "out"
    argv = ["run", "-i", str(env), "--steps", str(steps), "--out", str(out), "--no-html"]
    assert main(argv) == EXIT_STOPPED
    assert (tmp_path / "stopped").exists() and (tmp_path / "restored").exists()
    assert not (tmp_path / "pass").exists(), "the run went on after the stop"
    results = [json.loads(p.read_text()) for p in (out / "allure-results").glob("*-result.json")]
    [stopped] = [r for r in results if r["name"] == "The first is stopped"]
    message = stopped["statusDetails"]["message"]
    assert classify(stopped["status"], message) == STOPPED, message
