"""End to end: a pytest-bdd run -> allure-results -> Allure 3 single file -> headless Chromium.

A tiny feature (one passing scenario, a product failure, a budget overrun, a BMC error) runs
in a subprocess under allure-pytest-bdd, with an SVG timeline attached. The results are
rendered with the real Allure Report 3 twice (the second time carrying the first report's
history), and the page is checked three ways: the data embedded in the single file, the DOM
Chromium builds from it (scenario names, verdicts, categories), and a screenshot.

Needs Allure Report 3 and Debian chromium (``bash scripts/install-report-tools.sh``). A
missing tool fails the test with that command; ``POWERCUT_NO_CHROMIUM=1`` skips only the
Chromium checks, saying so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.report import browser
from harness.report.allure_env import (
    BUDGET_OVERRUNS,
    HARNESS_ERRORS,
    PRODUCT_FAILURES,
    carry_history,
    history_file,
    write_categories,
    write_environment,
)
from harness.report.gates import (
    BLOCKER_CRITICAL,
    NO_HARNESS_ERROR,
    NO_OVER_BUDGET,
    GatesConfig,
    SignOff,
)
from harness.report.history import append_run, read_history, target_store
from harness.report.html import (
    ReportToolMissing,
    cached_allure,
    find_allure,
    remote_loads,
    render_report,
)
from harness.report.signoff import SignOffResult, sign_off
from harness.report.summary import summarize
from tests.report.dom import TreeLeaves, embedded, visible_text

pytestmark = pytest.mark.slow

FEATURE = """\
@epic:node-failure
Feature: Power loss of a worker

  Scenario: Worker w1 loses power and its pods move
    Given a cluster with 3 workers
    When node w1 is powered off
    Then its pods run elsewhere within 90 seconds

  Scenario: Pods of w2 stay Terminating
    Given a cluster with 3 workers
    When node w2 is powered off
    Then the pods of w2 are gone within 60 seconds

  Scenario: Evacuation of w3 exceeds its budget
    Given a cluster with 3 workers
    When node w3 is powered off
    Then evacuation took 95.2 seconds against a budget of 90 seconds

  Scenario: The BMC of w4 refuses the connection
    Given a cluster with 3 workers
    When the BMC of w4 refuses the connection
"""

STEPS = """\
import allure
from pytest_bdd import given, parsers, scenarios, then, when

from harness.checks import pods_evicted
from harness.checks.base import CheckFailed
from harness.errors import PermanentError
from harness.kube.timeline import FakeClock, Timeline
from harness.report.allure_env import attach_timeline

scenarios("power.feature")


def timeline(node):
    return [
        {"mono": 10.0, "kind": "Node", "name": node, "transition": "observed",
         "detail": {"ready": "True"}},
        {"mono": 10.0, "kind": "Pod", "namespace": "app", "name": "web-" + node,
         "transition": "observed", "detail": {"node": node, "phase": "Running", "ready": True}},
        {"mono": 11.0, "kind": "Action", "name": node, "transition": "power-off sent",
         "detail": {"driver": "redfish"}},
        {"mono": 11.4, "kind": "Action", "name": node, "transition": "power-off acknowledged",
         "detail": {}},
        {"mono": 51.0, "kind": "Node", "name": node, "transition": "not-ready",
         "detail": {"status": "Unknown"}},
        {"mono": 52.0, "kind": "Pod", "namespace": "app", "name": "web-" + node,
         "transition": "terminating", "detail": {"node": node}},
    ]


@given(parsers.parse("a cluster with {count:d} workers"), target_fixture="cluster")
def cluster(count):
    return {"workers": count}


@when(parsers.parse("node {node} is powered off"))
def power_off(node, cluster):
    cluster["off"] = node
    attach_timeline(timeline(node), name="timeline " + node, title=node + " <power-off> & after")


@then(parsers.parse("its pods run elsewhere within {budget:d} seconds"))
def pods_moved(budget, cluster):
    allure.dynamic.parameter("evacuation (s)", 42.1)
    allure.dynamic.parameter("evacuation budget (s)", budget)


@then(parsers.parse("the pods of {node} are gone within {budget:d} seconds"))
def pods_gone(node, budget):
    raise CheckFailed(
        f"pods of {node} deleted within {budget}s of power-off acknowledged of {node}",
        "app/web-" + node + " still Terminating",
        float(budget),
        check="pods-gone",
    )


@then(parsers.parse("evacuation took {took:g} seconds against a budget of {budget:d} seconds"))
def over_budget(took, budget):
    allure.dynamic.parameter("evacuation (s)", took)
    allure.dynamic.parameter("evacuation budget (s)", budget)
    # the real check, on a timeline where the pod left after its budget
    clock = FakeClock(start=100.0)
    tl = Timeline(clock)
    tl.record("Pod", "web-w3", "observed", namespace="app", detail={
        "uid": "u3", "node": "w3", "phase": "Running", "ready": True, "terminating": False,
        "workload": "Deployment/web"})
    off = tl.action("w3", "power-off acknowledged")
    clock.advance(took)
    tl.record("Pod", "web-w3", "terminating", namespace="app", detail={
        "uid": "u3", "node": "w3", "workload": "Deployment/web"})
    pods_evicted(tl, "w3", since=off, budget_s=budget)


@when(parsers.parse("the BMC of {node} refuses the connection"))
def bmc_refuses(node):
    raise PermanentError(node + ": BMC https://127.0.0.1:8443 refused the connection")
"""

EXPECTED = {
    "Worker w1 loses power and its pods move": "passed",
    "Pods of w2 stay Terminating": "failed",
    "Evacuation of w3 exceeds its budget": "failed",
    "The BMC of w4 refuses the connection": "broken",
}
EXPECTED_CATEGORIES = {
    PRODUCT_FAILURES: {"Pods of w2 stay Terminating"},
    BUDGET_OVERRUNS: {"Evacuation of w3 exceeds its budget"},
    HARNESS_ERRORS: {"The BMC of w4 refuses the connection"},
}
REPO = Path(__file__).resolve().parents[2]

ENVIRONMENT = {
    "Kubernetes version": "v1.36.1",
    "Nodes": 6,
    "Inventory": "integration",
    "Timing profile": "fast",
    "powercut": "0.1.0",
}


def need_allure() -> Path:
    try:
        return find_allure()
    except ReportToolMissing as exc:
        pytest.fail(str(exc), pytrace=False)


def need_chromium() -> Path:
    if os.environ.get("POWERCUT_NO_CHROMIUM") == "1":
        pytest.skip("POWERCUT_NO_CHROMIUM=1: headless Chromium checks of the report are off")
    try:
        return browser.find_chromium()
    except ReportToolMissing as exc:
        pytest.fail(f"{exc} (or set POWERCUT_NO_CHROMIUM=1 to skip)", pytrace=False)


@dataclass(frozen=True)
class Rendered:
    results: Path
    night1: Path
    night2: Path
    render_s: float


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rendered]:
    need_allure()
    base = tmp_path_factory.mktemp("report")
    project = base / "project"
    project.mkdir()
    (project / "power.feature").write_text(FEATURE)
    (project / "test_power.py").write_text(STEPS)
    # no conftest: the features' hooks (severity, epic and story labels) come from
    # powercut's pytest plugin
    results = base / "allure-results"
    write_environment(results, ENVIRONMENT)
    write_categories(results)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:allure_pytest",
            "-p",
            "no:cacheprovider",
            "--alluredir",
            str(results),
            "-q",
            str(project),
        ],
        cwd=project,
        # this checkout's harness and steps, whatever is installed
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr  # some scenarios fail on purpose
    assert "3 failed, 1 passed" in run.stdout, run.stdout
    assert len(list(results.glob("*-result.json"))) == 4

    started = time.monotonic()
    night1 = render_report(results, base / "reports" / "night-1", title="powercut <nightly> 1")
    render_s = time.monotonic() - started
    # the next night: same results in a directory whose name is a glob pattern, history carried
    results2 = base / "night [2] results"
    shutil.copytree(results, results2)
    carry_history(night1.parent, results2)
    night2 = render_report(results2, base / "reports" / "night-2", title="powercut nightly 2")
    print(f"\nrender_report: {render_s:.1f}s")  # shown with -s
    yield Rendered(results, night1, night2, render_s)


def test_report_is_one_self_contained_file(rendered: Rendered) -> None:
    index = rendered.night1
    out = index.parent
    assert sorted(p.name for p in out.iterdir()) == ["history", "index.html"]
    page = index.read_text(encoding="utf-8")
    assert remote_loads(page) == []
    assert "googletagmanager" not in page
    assert "<title> powercut &lt;nightly&gt; 1 </title>" in page
    data = embedded(index)
    results = [json.loads(v) for k, v in data.items() if k.startswith("data/test-results/")]
    assert {r["name"]: r["status"] for r in results} == EXPECTED
    # the labels the features' hooks add (allure-pytest-bdd adds only the feature)
    for r in results:
        found = {(label["name"], label["value"]) for label in r["labels"]}
        assert ("epic", "Node failure") in found, r["labels"]
        assert ("feature", "Power loss of a worker") in found, r["labels"]
        assert ("story", r["name"]) in found, r["labels"]
    # the phase parameters became one table at the top of the scenario's page
    passed = next(r for r in results if r["status"] == "passed")
    params = {p["name"]: p["value"] for p in passed.get("parameters", [])}
    assert "evacuation (s)" not in params and "evacuation budget (s)" not in params
    assert 'data-phase="evacuation"' in passed["descriptionHtml"]
    assert ">42.100<" in passed["descriptionHtml"] and ">47%<" in passed["descriptionHtml"]


def test_timeline_attachment_is_embedded(rendered: Rendered) -> None:
    data = embedded(rendered.night1)
    svgs = [v for k, v in data.items() if k.startswith("data/attachments/") and k.endswith(".svg")]
    assert len(svgs) == 3  # one per powered-off node
    root = ET.fromstring(svgs[0])  # noqa: S314 (our own output)
    lanes = root.findall(".//{http://www.w3.org/2000/svg}g[@class='lane']")
    markers = root.findall(".//{http://www.w3.org/2000/svg}g[@class='marker']")
    assert len(lanes) == 2
    assert len(markers) == 2


def test_categories_and_environment(rendered: Rendered) -> None:
    data = embedded(rendered.night1)
    tree = json.loads(data["widgets/categories.json"])
    nodes: dict[str, Any] = tree["nodes"]

    def leaves(node_id: str) -> set[str]:
        node = nodes[node_id]
        if node["type"] == "tr":
            return {node["name"]}
        return set().union(*(leaves(c) for c in node.get("childrenIds", [])))

    found = {nodes[r]["name"]: leaves(r) for r in tree["roots"]}
    assert found == EXPECTED_CATEGORIES
    env = {e["name"]: e["values"] for e in json.loads(data["widgets/allure_environment.json"])}
    assert env["Kubernetes version"] == ["v1.36.1"]
    assert env["Nodes"] == ["6"]


def test_history_carries_over(rendered: Rendered) -> None:
    lines = history_file(rendered.night2.parent).read_text().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["uuid"] != second["uuid"]
    assert second["name"] == "powercut nightly 2"
    assert len(history_file(rendered.night1.parent).read_text().splitlines()) == 1
    data = embedded(rendered.night2)
    assert [k for k in data if k.startswith("data/history/")] == [
        f"data/history/{first['uuid']}.json"
    ]


def test_rendered_page_shows_scenarios_and_verdicts(rendered: Rendered) -> None:
    need_chromium()
    url = rendered.night1.as_uri()
    dom = browser.dump_dom(url)
    parser = TreeLeaves()
    parser.feed(dom)
    assert dict(parser.leaves) == EXPECTED, visible_text(dom)[:2000]
    text = visible_text(dom)
    assert "powercut <nightly> 1" in text
    # the categories view
    text = visible_text(browser.dump_dom(url + "#/categories"))
    for name, members in EXPECTED_CATEGORIES.items():
        assert f"{name} {len(members)}" in text, text[:2000]
    # the passing scenario's page lists the timeline attachment
    passed = next(
        json.loads(v)
        for k, v in embedded(rendered.night1).items()
        if k.startswith("data/test-results/") and json.loads(v)["status"] == "passed"
    )
    text = visible_text(browser.dump_dom(f"{url}#/{passed['id']}/attachments"))
    assert "timeline w1" in text, text[:2000]
    assert "image/svg+xml" in text, text[:2000]


def test_screenshot(rendered: Rendered) -> None:
    need_chromium()
    png = browser.screenshot(
        rendered.night1.as_uri(), rendered.night1.parent / "screenshot.png", width=1400, height=900
    )
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (1400, 900)
    assert png.stat().st_size > 20_000  # a drawn page, not a blank one
    png.unlink()  # keep the report directory as render_report left it


def test_render_time_is_reasonable(rendered: Rendered) -> None:
    assert rendered.render_s < 120, f"render_report took {rendered.render_s:.1f}s"


def test_install_script_is_fast_when_warm() -> None:
    """Once the tools are installed, the install script is a quick no-op."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "install-report-tools.sh"
    env = dict(os.environ)
    if shutil.which("chromium") is None:  # the Chromium tests above report that; no apt here
        env["POWERCUT_NO_CHROMIUM"] = "1"
    runs = []
    for _ in range(2):  # the first run installs whatever is missing, the second must be warm
        started = time.monotonic()
        done = subprocess.run(
            ["bash", str(script)], capture_output=True, text=True, timeout=900, env=env, check=False
        )
        runs.append(time.monotonic() - started)
        assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == cached_allure()
    assert "tools: installing" not in done.stderr, done.stderr
    assert runs[-1] < 2.0, f"warm install took {runs[-1]:.2f}s"


def test_summary_of_the_same_run(rendered: Rendered) -> None:
    text = summarize(rendered.results)
    assert text.startswith("powercut: FAILED  4 scenarios: 1 passed, 2 failed, 1 broken")
    assert "evacuation 95.2s / 90s (106%) OVER" in text
    assert "evacuation 42.1s / 90s (47%)" in text


# -- the sign-off page, the gates and the history of a target ------------------------------


@dataclass(frozen=True)
class Signed:
    results: Path
    index: Path
    signoff: SignOffResult
    store: Path


@pytest.fixture(scope="module")
def signed(rendered: Rendered, tmp_path_factory: pytest.TempPathFactory) -> Signed:
    """Two runs of one target through a results store, the second signed off against the
    first, as ``powercut run --store`` does."""
    base = tmp_path_factory.mktemp("store")
    store = target_store(base, "integration")
    so = SignOff(gates=GatesConfig(max_skipped=0), source="integration signoff.yaml")
    result = None
    for i in range(2):
        run_id = f"20261126T16{i}000Z-00000{i}"
        result = sign_off(
            rendered.results,
            so,
            run_id=run_id,
            target="integration",
            started=f"2026-11-26T16:{i}0:00Z",
            finished=f"2026-11-26T16:{i}5:00Z",
            powercut_version="0.1.0",
            inventory="inventories/integration.yaml",
            previous=read_history(store.history).runs,
        )
        index = render_report(
            rendered.results,
            store.run_dir(run_id),
            title="powercut: integration",
            history_path=store.allure_history,
            gates=result.gates_for_allure,
            signoff_html=result.page,
        )
        append_run(store.history, result.run)
    assert result is not None
    return Signed(rendered.results, index, result, base)


def test_store_keeps_the_history_of_its_target(signed: Signed) -> None:
    store = target_store(signed.store, "integration")
    runs = read_history(store.history).runs
    assert [r.run_id for r in runs] == ["20261126T160000Z-000000", "20261126T161000Z-000001"]
    assert len(store.allure_history.read_text().splitlines()) == 2  # Allure's own, continued
    assert not (store.run_dir(runs[1].run_id) / "history").exists()
    assert runs[1].verdict == "broken"
    assert {s.name: s.status for s in runs[1].scenarios} == EXPECTED


def test_quality_gates_tab_holds_the_gates(signed: Signed) -> None:
    data = embedded(signed.index)
    gates = json.loads(data["widgets/quality-gate.json"])["default"]
    shown = {g["rule"]: g["success"] for g in gates}
    assert shown == {g.name: g.passed for g in signed.signoff.evaluation.results}
    assert shown[BLOCKER_CRITICAL] is True  # no blocker or critical scenario here
    assert shown[NO_OVER_BUDGET] is False
    assert shown[NO_HARNESS_ERROR] is False
    over = next(g for g in gates if g["rule"] == NO_OVER_BUDGET)
    ids = {json.loads(v)["name"]: k.split("/")[-1][:-5] for k, v in data.items()
           if k.startswith("data/test-results/")}  # fmt: skip
    assert over["testResults"] == [ids["Evacuation of w3 exceeds its budget"]]


def test_the_report_opens_on_the_signoff_page_whose_numbers_are_the_results(
    signed: Signed,
) -> None:
    need_chromium()
    dom = browser.dump_dom(signed.index.as_uri())
    assert 'id="powercut-signoff"' in dom, visible_text(dom)[:2000]
    page = dom[dom.index('id="powercut-signoff"') :]
    text = visible_text(page)
    assert "Sign-off: BROKEN integration" in text, text[:1500]
    assert "20261126T161000Z-000001" in text and "inventories/integration.yaml" in text
    # every gate, as evaluated
    for g in signed.signoff.evaluation.results:
        assert f'data-gate="{g.name}" data-passed="{str(g.passed).lower()}"' in page
    # the phases, closest to budget first, equal to what the steps measured
    rows = re.findall(
        r'<tr class="[^"]*" data-scenario="([^"]+)" data-phase="([^"]+)" data-value="([^"]+)" '
        r'data-budget="([^"]+)">(.*?)</tr>',
        page,
        re.S,
    )
    shown = [(sc, ph, float(v), float(b)) for sc, ph, v, b, _ in rows]
    assert shown == [
        ("Evacuation of w3 exceeds its budget", "evacuation", 95.2, 90.0),
        ("Worker w1 loses power and its pods move", "evacuation", 42.1, 90.0),
    ]
    cells = [visible_text(cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", rows[0][4])]
    # measured, Kubernetes' model (none recorded for these results: "-"), budget, % of budget
    assert cells[2:6] == ["95.2", "-", "90", "106%"], cells
    # the scenario rows: one per failure case with its verdict, and a link to its page
    data = embedded(signed.index)
    ids = {json.loads(v)["name"]: json.loads(v)["id"] for k, v in data.items()
           if k.startswith("data/test-results/")}  # fmt: skip
    for name, status in EXPECTED.items():
        assert f'data-scenario="{name}" data-status="{status}"' in page
        assert f'data-tr="{ids[name]}" href="#{ids[name]}"' in page
    # the second run compared with the first: same figures, no regression, a trend of 2
    assert 'class="reg"' not in page
    assert "compared with 1 earlier run(s)" in text


def test_signoff_screenshot(signed: Signed) -> None:
    need_chromium()
    png = browser.screenshot(
        signed.index.as_uri(), signed.index.parent / "signoff.png", width=1400, height=1000
    )
    assert png.stat().st_size > 40_000
    png.unlink()
