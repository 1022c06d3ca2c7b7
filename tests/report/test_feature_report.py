"""The feature run's HTML report, checked as a person would see it (headless Chromium).

Run by scripts/features.sh (``make features``) right after ``powercut run``, with
POWERCUT_REPORT_DIR pointing at its output directory.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd.parser import FeatureParser

from harness.report import browser
from tests.reportdom import embedded, visible_text

FEATURES = Path(__file__).resolve().parents[2] / "features"
STATUS = {"passed": "passed", "failed": "failed", "broken": "broken", "skipped": "skipped"}


@pytest.fixture(scope="module")
def report() -> Path:
    out = os.environ.get("POWERCUT_REPORT_DIR")
    if not out:
        pytest.skip("run by scripts/features.sh after `powercut run` (POWERCUT_REPORT_DIR unset)")
    return Path(out).resolve()


@pytest.fixture(scope="module")
def results(report: Path) -> list[dict[str, Any]]:
    data = embedded(report / "index.html")
    return [json.loads(v) for k, v in data.items() if k.startswith("data/test-results/")]


def feature_scenarios() -> int:
    """How many scenarios the feature library has: one per Scenario, one per Examples row
    of a Scenario Outline (what pytest-bdd collects from ``features/``)."""
    total = 0
    for path in sorted(FEATURES.rglob("*.feature")):
        if "kind" in path.relative_to(FEATURES).parts[:-1]:
            continue  # the kind feature set: `make kind-test` runs it on real kubelets
        feature = FeatureParser(str(path.parent), path.name).parse()
        for scenario in feature.scenarios.values():
            rows = sum(len(ex.examples) for ex in scenario.examples)
            total += rows if scenario.examples else 1
    return total


def test_every_scenario_of_the_features_ran_and_passed(
    report: Path, results: list[dict[str, Any]]
) -> None:
    """The lab is built so that every scenario applies: each one the features define was
    collected, ran and passed (a skip, which `powercut run --fail-on-skip` already fails,
    would show up here too)."""
    cases = list(ET.parse(report / "junit.xml").getroot().iter("testcase"))  # noqa: S314 (ours)
    names = sorted(f"{c.get('classname')}::{c.get('name')}" for c in cases)
    if not os.environ.get("POWERCUT_FEATURES_SELECTED"):  # not a -k selection of them
        assert len(cases) == feature_scenarios(), names
    not_passed = {
        f"{c.get('classname')}::{c.get('name')}": f"{el.tag}: {el.get('message')}"
        for c in cases
        for el in c
        if el.tag in ("failure", "error", "skipped")
    }
    assert not not_passed, not_passed
    assert len(results) == len(cases), (len(results), names)
    assert {r["name"]: r["status"] for r in results if r["status"] != "passed"} == {}


def test_scenario_names_and_verdicts_are_shown(report: Path, results: list[dict[str, Any]]) -> None:
    url = (report / "index.html").as_uri()
    text = visible_text(browser.dump_dom(url))
    passed = sum(r["status"] == "passed" for r in results)
    assert f"Total {len(results)}" in text and f"Passed {passed}" in text, text[:3000]
    # The tree starts collapsed (grouped by suite): open each scenario's own page instead.
    for r in results:
        page = visible_text(browser.dump_dom(f"{url}#/{r['id']}"))
        assert r["name"] in page, page[:2000]
        assert STATUS.get(r["status"], r["status"]).capitalize() in page or r["status"] in page


def _measured(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scenarios that measured phases (the chaos and longevity ones report otherwise)."""
    return [
        r
        for r in results
        if any(p["name"].endswith(" budget (s)") for p in r.get("parameters", []))
    ]


def test_durations_sit_next_to_their_budgets(report: Path, results: list[dict[str, Any]]) -> None:
    measured = _measured(results)
    assert len(measured) >= 10, [r["name"] for r in results]
    for r in measured:
        names = {p["name"] for p in r.get("parameters", [])}
        timed = {n[: -len(" (s)")] for n in names if n.endswith(" (s)") and " budget " not in n}
        budgets = {n[: -len(" budget (s)")] for n in names if n.endswith(" budget (s)")}
        assert timed & budgets, f"{r['name']}: no duration with its budget: {sorted(names)}"
    one = next(r for r in measured if r["status"] == "passed")
    url = (report / "index.html").as_uri()
    text = visible_text(browser.dump_dom(f"{url}#/{one['id']}"))
    param = next(p for p in one["parameters"] if p["name"].endswith(" budget (s)"))
    assert param["name"] in text and str(param["value"]) in text, text[:3000]


def test_each_scenario_has_its_timeline_picture(
    report: Path, results: list[dict[str, Any]]
) -> None:
    data = embedded(report / "index.html")
    svgs = [
        k
        for k, v in data.items()
        if k.startswith("data/attachments/") and v.lstrip().startswith(b"<svg")
    ]
    measured = _measured(results)
    assert len(svgs) >= len(measured)
    one = measured[0]
    url = (report / "index.html").as_uri()
    text = visible_text(browser.dump_dom(f"{url}#/{one['id']}/attachments"))
    assert "timeline" in text and "image/svg+xml" in text, text[:3000]
    png = browser.screenshot(url, report / "screenshot.png", width=1400, height=900)
    assert png.stat().st_size > 20_000
