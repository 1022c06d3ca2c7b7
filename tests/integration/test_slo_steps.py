"""The SLO steps end to end against a real Prometheus: a feature run by pytest-bdd (in a
child pytest, as ``powercut run`` does) with allure-pytest-bdd, whose steps move a gauge
that Prometheus scrapes. A held SLO passes, a dip fails the scenario (a product failure,
with a failed Allure step for that SLO and its chart attached), an SLO with no series and
an unknown SLO name break it (harness errors)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.lab.prometheus import LabExporter, PrometheusServer, ScrapeJob
from harness.report.allure_env import HARNESS_ERRORS, PRODUCT_FAILURES, classify
from tests.integration.test_prometheus import RULES, free_port

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

FEATURE = """\
Feature: SLO steps

  Scenario: The gauge holds
    Given the gauge stays at 1 for 3 seconds
    Then the demo-up SLO held throughout
    And no alert fired

  Scenario: The gauge dips
    Given the gauge dips to 0 for 3 seconds
    Then every SLO held throughout

  Scenario: A typo in the expression
    Given the gauge stays at 1 for 1 seconds
    Then the typo SLO held throughout

  Scenario: An SLO the inventory does not have
    Then the nope SLO held throughout
"""

CONFTEST = """\
import os
import time
from pathlib import Path

import pytest
from pytest_bdd import given, parsers, scenarios

from harness.kube.timeline import Timeline
from harness.slo.client import PrometheusClient
from harness.scenario.expectations.steady_state import Baseline

GAUGE = Path(os.environ["GAUGE_FILE"])


@pytest.fixture
def timeline():
    return Timeline()


@pytest.fixture
def baseline(timeline):
    return Baseline(nodes={}, workloads=(), settled_s=0.0, at_mono=timeline.start_mono)


def _recorded(client, value):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        series = client.query("test_gauge")
        if series and series[0].points[-1][1] == value:
            return
        time.sleep(0.2)
    raise AssertionError(f"Prometheus did not record {value}")


@given(parsers.parse("the gauge stays at 1 for {seconds:d} seconds"))
def stays(seconds, timeline, baseline, prometheus_client: PrometheusClient):
    _recorded(prometheus_client, 1.0)
    time.sleep(seconds)


@given(parsers.parse("the gauge dips to 0 for {seconds:d} seconds"))
def dips(seconds, timeline, baseline, prometheus_client: PrometheusClient):
    time.sleep(1.5)
    timeline.action("w1", "power-off acknowledged")
    GAUGE.write_text("0")
    _recorded(prometheus_client, 0.0)
    time.sleep(seconds)
    GAUGE.write_text("1")
    _recorded(prometheus_client, 1.0)
    timeline.action("w1", "power-on acknowledged")
    time.sleep(1.5)
"""

TESTS = """\
from pytest_bdd import scenarios

scenarios("slo.feature")
"""

INVENTORY = """\
cluster: {{kubeconfig: kube.conf}}
nodes:
  - {{name: w1, role: worker, power: {{driver: kind}}}}
prometheus: {{url: "{url}"}}
slos:
  - name: demo-up
    expr: 'min(test_gauge{{app="demo"}})'
    comparison: ">="
    threshold: 1
    step: 1s
  - {{name: typo, expr: 'test_gauge{{app="dmeo"}}', comparison: ">=", threshold: 1, step: 1s}}
alerts:
  - name: TestGaugeZero
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Run the feature once; its Allure results by scenario name."""
    root = tmp_path_factory.mktemp("slo-steps")
    gauge = root / "gauge"
    gauge.write_text("1")

    def collect() -> dict[str, tuple[str, list[tuple[dict[str, str], float]]]]:
        value = float(gauge.read_text() or "1")
        return {"test_gauge": ("the gauge file", [({"app": "demo"}, value)])}

    exporter = LabExporter(free_port(), collect).start()
    job = ScrapeJob("demo", [f"127.0.0.1:{exporter.port}"])
    try:
        with PrometheusServer(root / "prom", free_port(), [job], rules=RULES) as prom:
            steps = root / "steps"
            steps.mkdir()
            (steps / "slo.feature").write_text(FEATURE)
            (steps / "conftest.py").write_text(CONFTEST)
            (steps / "test_slo.py").write_text(TESTS)
            inv = root / "inv.yaml"
            inv.write_text(INVENTORY.format(url=prom.url))
            results = root / "allure-results"
            env = {
                **os.environ,
                "GAUGE_FILE": str(gauge),
                "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            }
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    str(steps),
                    "-p",
                    "no:allure_pytest",
                    "-p",
                    "no:cacheprovider",
                    "--inventory",
                    str(inv),
                    "--alluredir",
                    str(results),
                    "-q",
                ],
                capture_output=True,
                text=True,
                env=env,
                cwd=root,
                timeout=300,
                check=False,
            )
    finally:
        exporter.stop()
    by_name = {}
    for path in results.glob("*-result.json"):
        data = json.loads(path.read_text())
        by_name[data["name"]] = data
    assert len(by_name) == 4, out.stdout + out.stderr  # every scenario ran
    return by_name


def steps_of(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}

    def walk(steps: list[dict[str, Any]]) -> None:
        for s in steps:
            out[s["name"]] = s
            walk(s.get("steps") or [])

    walk(result.get("steps") or [])
    return out


def test_a_held_slo_passes_with_its_chart(run: dict[str, dict[str, Any]]) -> None:
    result = run["The gauge holds"]
    assert result["status"] == "passed", result.get("statusDetails")
    steps = steps_of(result)
    slo = steps['SLO demo-up: min(test_gauge{app="demo"}) >= 1']
    assert slo["status"] == "passed"
    assert {a["name"] for a in slo["attachments"]} == {"slo-demo-up.json", "slo-demo-up.svg"}
    assert steps["alert TestGaugeZero must not fire"]["status"] == "passed"


def test_a_dip_fails_the_scenario_as_a_product_failure(run: dict[str, dict[str, Any]]) -> None:
    result = run["The gauge dips"]
    message = result["statusDetails"]["message"]
    assert result["status"] == "failed", message
    assert classify(result["status"], message) == PRODUCT_FAILURES
    assert "SLO demo-up breached" in message and "was 0" in message
    slo = steps_of(result)['SLO demo-up: min(test_gauge{app="demo"}) >= 1']
    assert slo["status"] == "failed"
    # the typo SLO is evaluated too: its step is broken, and the message says so
    assert "also not evaluated: SLO typo:" in message
    typo = steps_of(result)['SLO typo: test_gauge{app="dmeo"} >= 1']
    assert typo["status"] == "broken"


def test_no_series_and_an_unknown_name_are_harness_errors(
    run: dict[str, dict[str, Any]],
) -> None:
    typo = run["A typo in the expression"]
    assert typo["status"] == "broken"
    assert "returned no series" in typo["statusDetails"]["message"]
    assert classify(typo["status"], typo["statusDetails"]["message"]) == HARNESS_ERRORS
    unknown = run["An SLO the inventory does not have"]
    assert unknown["status"] == "broken"
    assert (
        "unknown SLO 'nope'; the inventory's slos are: demo-up, typo"
        in (unknown["statusDetails"]["message"])
    )
