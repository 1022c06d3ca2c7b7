"""One-screen text summaries from allure-results and JUnit XML (harness.report.summary)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.report.allure_env import BUDGET_OVERRUNS, HARNESS_ERRORS, PRODUCT_FAILURES
from harness.report.summary import (
    PhaseTiming,
    RunSummary,
    ScenarioResult,
    format_summary,
    load,
    load_allure_results,
    load_junit,
    phases_from,
    summarize,
)


def write_result(
    results: Path,
    name: str,
    status: str,
    *,
    message: str = "",
    params: dict[str, Any] | None = None,
    step_params: dict[str, Any] | None = None,
    history_id: str | None = None,
    start: int = 1_000_000,
    stop: int = 1_042_500,
) -> None:
    results.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "uuid": str(uuid.uuid4()),
        "historyId": history_id or name,
        "name": name,
        "fullName": f"features/power.feature:{name}",
        "status": status,
        "start": start,
        "stop": stop,
        "parameters": [{"name": k, "value": str(v)} for k, v in (params or {}).items()],
        "steps": [
            {
                "name": "Then pods move",
                "status": status,
                "parameters": [
                    {"name": k, "value": repr(v)} for k, v in (step_params or {}).items()
                ],
                "steps": [],
            }
        ],
    }
    if message:
        data["statusDetails"] = {"message": message, "trace": "Traceback ..."}
    (results / f"{data['uuid']}-result.json").write_text(json.dumps(data))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "allure-results"
    write_result(
        out,
        "Worker w1 loses power",
        "passed",
        params={
            "node": "w1",
            "evacuation (s)": 42.1,
            "evacuation budget (s)": 90,
            "detection (s)": 40.2,
            "detection budget (s)": 50,
        },
    )
    write_result(
        out,
        "Worker w2 loses power",
        "failed",
        message="harness.checks.base.CheckFailed: evacuation: over budget: expected within "
        "90s; seen 95.2s\nsecond line",
        params={"evacuation (s)": "95.2", "evacuation budget (s)": "90"},
    )
    write_result(
        out,
        "BMC unreachable",
        "broken",
        message="harness.kube.client.Unreachable: connection refused",
    )
    # a retried scenario: the first attempt failed, the last one passed
    write_result(out, "Flaky rack", "failed", message="AssertionError: x", stop=1_000_100)
    write_result(
        out,
        "Flaky rack",
        "passed",
        start=1_000_200,
        stop=1_003_000,
        step_params={"cleanup (s)": 3.5},
    )
    (out / "environment.properties").write_text("a=b\n")
    (out / "abc-attachment.svg").write_text("<svg/>")
    return out


def test_load_allure_results(results: Path) -> None:
    summary = load_allure_results(results)
    by_name = {s.name: s for s in summary.scenarios}
    assert set(by_name) == {
        "Worker w1 loses power",
        "Worker w2 loses power",
        "BMC unreachable",
        "Flaky rack",
    }
    w1 = by_name["Worker w1 loses power"]
    assert w1.verdict == "passed"
    assert w1.duration_s == pytest.approx(42.5)
    assert set(w1.phases) == {
        PhaseTiming("evacuation", 42.1, 90.0),
        PhaseTiming("detection", 40.2, 50.0),
    }
    assert w1.slowest_phase == PhaseTiming("detection", 40.2, 50.0)  # 80% of its budget
    w2 = by_name["Worker w2 loses power"]
    assert w2.category == BUDGET_OVERRUNS
    assert w2.slowest_phase is not None and w2.slowest_phase.over_budget
    assert by_name["BMC unreachable"].category == HARNESS_ERRORS
    flaky = by_name["Flaky rack"]
    assert (flaky.verdict, flaky.retries) == ("passed", 1)
    assert flaky.phases == (PhaseTiming("cleanup", 3.5, None),)  # from a step, quoted repr
    assert summary.verdict == "failed"
    assert not summary.ok


def test_format_fits_one_screen(results: Path) -> None:
    text = format_summary(load(results), width=100)
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert lines[0] == "powercut: FAILED  4 scenarios: 2 passed, 1 failed, 1 broken"
    assert lines[2] == "  1 harness or infrastructure errors, 1 budget overruns"
    body = "\n".join(lines)
    assert "BROKEN   BMC unreachable" in body
    assert "evacuation 95.2s / 90s (106%) OVER" in body
    assert "detection 40.2s / 50s (80%)" in body
    assert "cleanup 3.5s (no budget)" in body
    assert "[1 retry]" in body
    assert f"{HARNESS_ERRORS}: harness.kube.client.Unreachable: connection refused" in body
    assert "second line" not in body
    # failures first
    order = [ln.split()[0] for ln in lines if ln.startswith("  ") and ln.split()[0].isupper()]
    assert order[:2] == ["BROKEN", "FAILED"]


def test_rows_are_limited(tmp_path: Path) -> None:
    out = tmp_path / "r"
    for i in range(30):
        write_result(out, f"scenario {i:02d}", "passed")
    text = summarize(out, max_rows=5, width=60)
    assert "... and 25 more" in text
    assert len(text.splitlines()) <= 10
    assert text.startswith("powercut: PASSED  30 scenarios: 30 passed")


def test_empty_results(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    summary = load(tmp_path / "empty")
    assert summary.verdict == "no results"
    assert "NO RESULTS  0 scenarios" in format_summary(summary)


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
  <testcase classname="features.test_power" name="test_worker_loses_power[w1]" time="61.2">
    <properties>
      <property name="evacuation (s)" value="42.1"/>
      <property name="evacuation budget (s)" value="90"/>
      <property name="node" value="w1"/>
    </properties>
  </testcase>
  <testcase classname="features.test_power" name="test_worker_loses_power[w2]" time="95.9">
    <properties>
      <property name="evacuation (s)" value="95.2"/>
      <property name="evacuation budget (s)" value="90"/>
    </properties>
    <failure message="harness.checks.base.CheckFailed: expected pods moved; seen Terminating">
      trace</failure>
  </testcase>
  <testcase classname="features.test_power" name="test_rack" time="0.1">
    <error message="harness.errors.ConfigError: inventory.yaml: racks: unknown rack r9">x</error>
  </testcase>
  <testcase classname="features.test_power" name="test_skip" time="0">
    <skipped message="needs BMC"/>
  </testcase>
</testsuite></testsuites>
"""


def test_load_junit(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    summary = load(path)
    verdicts = {s.name: s.verdict for s in summary.scenarios}
    assert verdicts == {
        "features.test_power::test_worker_loses_power[w1]": "passed",
        "features.test_power::test_worker_loses_power[w2]": "failed",
        "features.test_power::test_rack": "broken",
        "features.test_power::test_skip": "skipped",
    }
    w2 = summary.scenarios[1]
    assert w2.phases == (PhaseTiming("evacuation", 95.2, 90.0),)
    assert w2.category == PRODUCT_FAILURES
    assert summary.scenarios[2].category == HARNESS_ERRORS
    text = format_summary(load_junit(path))
    assert "powercut: FAILED  4 scenarios: 1 passed, 1 failed, 1 broken, 1 skipped" in text
    assert "61.2s" in text


def test_a_skipped_scenario_says_why(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    text = format_summary(load_junit(path))
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if "SKIPPED" in line)
    assert lines[row + 1].strip() == "needs BMC"


def test_load_rejects_other_files(tmp_path: Path) -> None:
    other = tmp_path / "x.txt"
    other.write_text("")
    with pytest.raises(ValueError, match="allure-results directory or a JUnit"):
        load(other)


def test_unreadable_result_names_the_file(tmp_path: Path) -> None:
    out = tmp_path / "r"
    out.mkdir()
    (out / "bad-result.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"bad-result\.json"):
        load(out)


def test_phases_from_ignores_non_numbers() -> None:
    assert phases_from(
        [("evacuation (s)", "n/a"), ("detection (s)", "'12.5'"), ("detection budget (s)", True)]
    ) == (PhaseTiming("detection", 12.5, None),)


def test_slowest_phase_prefers_budget_ratio() -> None:
    s = ScenarioResult(
        "x",
        "passed",
        phases=(
            PhaseTiming("long but unbudgeted", 500.0),
            PhaseTiming("short", 9.0, 10.0),
            PhaseTiming("long", 60.0, 300.0),
        ),
    )
    assert s.slowest_phase is not None and s.slowest_phase.name == "short"
    assert RunSummary("x", (s,)).ok
