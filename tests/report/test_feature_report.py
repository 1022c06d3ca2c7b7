"""The feature run's HTML report, checked as a person would see it (headless Chromium).

Run by scripts/features.sh (``make features``) right after ``powercut run``, with
POWERCUT_REPORT_DIR pointing at its output directory.
"""

from __future__ import annotations

import html
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd.parser import FeatureParser

from harness.report import browser
from tests.report.dom import embedded, visible_text

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
    of a Scenario Outline (what pytest-bdd collects from ``features/``), but the demo set's
    own shortened ones (``@demo_only``: deselected unless the run selects ``-m demo``)."""
    total = 0
    for path in sorted(FEATURES.rglob("*.feature")):
        if any(part.startswith("kind") for part in path.relative_to(FEATURES).parts[:-1]):
            continue  # the kind feature sets (kind/, kind-volumes/): real kubelets only
        feature = FeatureParser(str(path.parent), path.name).parse()
        for scenario in feature.scenarios.values():
            if "demo_only" in scenario.tags | feature.tags:
                continue
            examples = [ex for ex in scenario.examples if "demo_only" not in ex.tags]
            rows = sum(len(ex.examples) for ex in examples)
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


def _page_text(url: str) -> str:
    """The page's visible text. Allure's page reads its data with fetch(); at load 13-17 a
    headless Chromium's virtual-time budget sometimes ended before that fetch did, and the
    page said "Failed to fetch" (2026-11-28, one page of 31): asked again with a longer
    budget, up to three times, so that only a page that never loads fails the test."""
    text = ""
    for attempt in range(3):
        budget = browser.DEFAULT_BUDGET_MS * (attempt + 1)
        text = visible_text(browser.dump_dom(url, budget_ms=budget))
        if "Failed to fetch" not in text:
            break
    return text


def test_scenario_names_and_verdicts_are_shown(report: Path, results: list[dict[str, Any]]) -> None:
    url = (report / "index.html").as_uri()
    text = _page_text(url + "#/")  # the Results tab, not the sign-off
    passed = sum(r["status"] == "passed" for r in results)
    assert f"Total {len(results)}" in text and f"Passed {passed}" in text, text[:3000]
    # The tree starts collapsed (grouped by suite): open each scenario's own page instead.
    for r in results:
        page = _page_text(f"{url}#/{r['id']}")
        assert r["name"] in page, page[:2000]
        assert STATUS.get(r["status"], r["status"]).capitalize() in page or r["status"] in page


#: A phase's row: its name, measured, (Kubernetes' model, its setting as the title), budget.
_ROW = re.compile(
    r'<tr data-phase="([^"]*)"[^>]*><td>[^<]*</td><td[^>]*>([^<]*)</td>'
    r'<td align="right" title=".*?">[^<]*</td><td[^>]*>([^<]*)</td>'
)


def _measured(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scenarios that measured phases (the chaos and longevity ones report otherwise):
    their phases are one table at the top of their page (harness/report/stage.py)."""
    return [r for r in results if "powercut-phases" in (r.get("descriptionHtml") or "")]


def _raw_phases(report: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """Per scenario, the phases the steps recorded as parameters in the run's own
    allure-results: phase -> (seconds, budget) as written."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for path in (report / "allure-results").glob("*-result.json"):
        doc = json.loads(path.read_text())
        params: list[tuple[str, str]] = []
        stack = [doc]
        while stack:
            node = stack.pop()
            params += [(p["name"], str(p["value"])) for p in node.get("parameters") or ()]
            stack += node.get("steps") or []
        values = dict(reversed(params))  # the first of a name wins, as the readers do
        mine = out.setdefault(doc["name"], {})
        for name, value in values.items():
            if name.endswith(" budget (s)"):
                phase = name[: -len(" budget (s)")]
                if f"{phase} (s)" in values:
                    mine[phase] = (values[f"{phase} (s)"], value)
    return out


def test_durations_sit_next_to_their_budgets(report: Path, results: list[dict[str, Any]]) -> None:
    """Each measured scenario's page has one table of its phases (measured, budget, percent),
    and its figures are those the steps recorded."""
    measured = _measured(results)
    assert len(measured) >= 10, [r["name"] for r in results]
    raw = _raw_phases(report)
    for r in measured:
        rows = {p: (v, b) for p, v, b in _ROW.findall(html.unescape(r["descriptionHtml"]))}
        recorded = raw.get(r["name"], {})
        if any(b for _, b in recorded.values()):
            # (a scenario whose only phase has no budget, as longevity's harness time, shows
            # its table without one)
            assert any(b for _, b in rows.values()), f"{r['name']}: no phase with its budget"
        for phase, (value, budget) in recorded.items():
            assert phase in rows, (r["name"], phase, sorted(rows))
            assert float(rows[phase][0]) == pytest.approx(float(value), abs=5e-4), phase
            assert float(rows[phase][1]) == pytest.approx(float(budget)), phase
        names = {p["name"] for p in r.get("parameters", [])}
        assert not any(n.endswith(" budget (s)") for n in names), "phase parameters left"


def test_the_report_opens_on_the_signoff_page(report: Path, results: list[dict[str, Any]]) -> None:
    """The first page is the sign-off page: the verdict, every scenario with its verdict,
    and the phases closest to budget with the figures the steps recorded."""
    dom = browser.dump_dom((report / "index.html").as_uri())
    assert 'id="powercut-signoff"' in dom, visible_text(dom)[:3000]
    page = dom[dom.index('id="powercut-signoff"') :]
    text = visible_text(page)
    assert "Sign-off: PASSED" in text, text[:3000]
    for r in results:
        # Chromium writes an attribute's value with only & and " escaped
        name = r["name"].replace("&", "&amp;").replace('"', "&quot;")
        assert f'data-scenario="{name}" data-status="{r["status"]}"' in page
    raw = _raw_phases(report)
    shown = re.findall(
        r'data-scenario="([^"]+)" data-phase="([^"]+)" data-value="([^"]+)" '
        r'data-budget="([^"]+)"',
        page,
    )
    assert len(shown) >= 10, text[:3000]
    ratios = []
    for scenario, phase, value, budget in shown:
        want = raw[html.unescape(scenario)][html.unescape(phase)]
        assert float(value) == pytest.approx(float(want[0]), abs=5e-4)
        assert float(budget) == pytest.approx(float(want[1]))
        ratios.append(float(value) / float(budget))
    assert ratios[:25] == sorted(ratios[:25], reverse=True)  # closest to budget first


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
