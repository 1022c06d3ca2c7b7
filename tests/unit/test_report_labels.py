"""Allure epic, story and severity labels from Gherkin tags (steps/support/labels.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd.parser import FeatureParser

from harness.steps.support.labels import EPIC_TAG, EPICS, epic_of, story_of

REPO = Path(__file__).resolve().parents[2]
FEATURES = sorted((REPO / "features").rglob("*.feature"))

FEATURE = """\
@epic:node-failure @disruptive
Feature: Power loss of a worker

  @critical
  Scenario: Worker w1 loses power
    Given a cluster
    Then it is fine

  @story:pods-move-elsewhere
  Scenario Outline: Worker <node> loses power
    Given a cluster
    Then it is fine

    Examples:
      | node |
      | w2   |
      | w3   |
"""

STEPS = """\
from pytest_bdd import given, scenarios, then

scenarios("power.feature")


@given("a cluster")
def cluster():
    pass


@then("it is fine")
def fine():
    pass
"""


def test_epic_from_its_tag() -> None:
    assert epic_of({"disruptive", "epic:node-failure"}) == "Node failure"
    assert epic_of({"epic:control-plane"}) == "Control plane"
    assert epic_of({"epic:storage-outage"}) == "Storage outage"  # not in the table: its words
    assert epic_of({"critical"}) is None


def test_story_from_its_tag_else_the_scenario_name() -> None:
    assert story_of({"story:pods-move"}, "Worker w1 loses power") == "Pods move"
    assert story_of({"critical"}, "Worker w1 loses power") == "Worker w1 loses power"


@pytest.mark.parametrize("path", FEATURES, ids=lambda p: p.name)
def test_every_feature_of_the_library_names_one_known_epic(path: Path) -> None:
    feature = FeatureParser(str(path.parent), path.name).parse()
    epics = [t for t in feature.tags if t.startswith(EPIC_TAG)]
    assert len(epics) == 1, f"{path.name}: tag the feature with one @epic:<slug>: {epics}"
    assert epics[0][len(EPIC_TAG) :] in EPICS, f"{path.name}: {epics[0]} is not in EPICS"
    for scenario in feature.scenarios.values():
        assert not any(t.startswith(EPIC_TAG) for t in scenario.tags), scenario.name


def labels(result: dict[str, Any], name: str) -> list[str]:
    return [label["value"] for label in result["labels"] if label["name"] == name]


def test_allure_results_carry_epic_story_feature_and_severity(tmp_path: Path) -> None:
    """A real pytest-bdd run under allure-pytest-bdd: the hooks come from powercut's pytest
    plugin (steps), with no conftest of the project's own."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "power.feature").write_text(FEATURE)
    (project / "test_power.py").write_text(STEPS)
    results = tmp_path / "allure-results"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:allure_pytest",
            "-p",
            "no:cacheprovider",
            "--strict-markers",
            "-o",
            "markers=disruptive\ncritical",
            "--alluredir",
            str(results),
            "-q",
            str(project),
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    found = {}
    for path in results.glob("*-result.json"):
        data = json.loads(path.read_text())
        found[data["name"]] = data
    assert set(found) == {
        "Worker w1 loses power",
        "Worker w2 loses power",
        "Worker w3 loses power",
    }
    for result in found.values():
        assert labels(result, "epic") == ["Node failure"]
        assert labels(result, "feature") == ["Power loss of a worker"]
        assert "epic:node-failure" not in labels(result, "tag")  # a label, not a marker
    one = found["Worker w1 loses power"]
    assert labels(one, "story") == ["Worker w1 loses power"]
    assert labels(one, "severity") == ["critical"]
    for node in ("w2", "w3"):
        assert labels(found[f"Worker {node} loses power"], "story") == ["Pods move elsewhere"]
