"""Sign-off rules, trends, the sign-off page, the staged results and compare
(harness.report.gates, trends, signoff_page, stage, compare)."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ConfigError
from harness.report.compare import compare_html, compare_text, load_run, rows
from harness.report.gates import (
    BLOCKER_CRITICAL,
    NO_DATA_LOST,
    NO_HARNESS_ERROR,
    NO_OVER_BUDGET,
    NO_REGRESSION,
    NO_SLO_BREACH,
    GatesConfig,
    SignOff,
    TrendsConfig,
    evaluate,
    load_signoff,
    signoff_for,
)
from harness.report.history import Phase, Run, Scenario, Slo, append_run
from harness.report.signoff import allure_ids, sign_off
from harness.report.signoff_page import closest_phase, phase_rows, signoff_html
from harness.report.stage import stage_results
from harness.report.trends import regressions, sparkline_svg


def scenario(name: str, status: str = "passed", severity: str = "normal", **kw: Any) -> Scenario:
    return Scenario(name=name, status=status, severity=severity, epic="E", feature="F", **kw)


def run(*scenarios: Scenario, run_id: str = "20261126T160000Z-000000") -> Run:
    return Run(
        run_id, "lab", "2026-11-26T16:00:00Z", "2026-11-26T16:05:00Z", "passed", scenarios=scenarios
    )


def by_name(results: Any) -> dict[str, Any]:
    return {r.name: r for r in results}


# -- the sign-off file ---------------------------------------------------------------------


def test_defaults_without_a_file(tmp_path: Path) -> None:
    inv = tmp_path / "lab.yaml"
    inv.write_text("x")
    so = signoff_for(inv)
    assert so.source == ""
    assert so.gates.no_phase_over_budget and so.gates.max_skipped is None
    (tmp_path / "signoff.yaml").write_text("gates:\n  max_skipped: 2\ntrends:\n  runs: 5\n")
    beside = signoff_for(inv)
    assert beside.gates.max_skipped == 2 and beside.trends.runs == 5
    assert beside.source.endswith("signoff.yaml")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gates:\n  max_skiped: 1\n", "gates.max_skiped: unknown key; valid keys here: "),
        ("gates:\n  max_skipped: -1\n", "gates.max_skipped: "),
        ("trends:\n  margin_percent: lots\n", "trends.margin_percent: "),
        ("- a\n", "expected a mapping"),
        ("gates: [\n", "line "),
    ],
)
def test_a_bad_signoff_file_names_file_field_and_valid_values(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "signoff.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_signoff(path)
    assert str(path) in str(err.value)
    assert says in str(err.value)
    if "unknown key" in says:
        assert "max_skipped" in str(err.value)  # the valid keys are listed
    with pytest.raises(ConfigError, match="not found"):
        load_signoff(tmp_path / "none.yaml")


# -- gates ---------------------------------------------------------------------------------


def test_every_gate_passes_on_a_clean_run() -> None:
    r = run(
        scenario(
            "a",
            severity="critical",
            phases={"p": Phase(1, 2)},
            slos={"s": Slo(True, 1)},
            data_ok=True,
        ),
        scenario("b", status="skipped"),
    )
    ev = evaluate(r, SignOff(gates=GatesConfig(max_skipped=1, no_regression=True)))
    assert ev.passed, [g for g in ev.results if not g.passed]
    assert len(ev.results) == 7


def test_a_gate_with_nothing_to_judge_reads_not_judged() -> None:
    r = run(scenario("a", phases={"p": Phase(1, 2)}))  # no SLO, no data check, no critical
    ev = evaluate(r, SignOff())
    by = {g.name: g for g in ev.results}
    assert by[NO_DATA_LOST].detail == "not judged (no data checks)"
    assert not by[NO_DATA_LOST].judged and by[NO_DATA_LOST].passed  # it fails nothing
    assert by[NO_SLO_BREACH].detail == "not judged (no SLO checks)"
    assert by[NO_OVER_BUDGET].judged and by[NO_OVER_BUDGET].detail.startswith("0 of 1")
    page = signoff_html(r, evaluation=ev)
    assert "not judged (no data checks)" in page and "0 of 0" not in page
    assert ev.passed


def test_each_gate_fails_naming_what_broke_it() -> None:
    r = run(
        scenario("crit", "failed", "critical"),
        scenario("slow", phases={"evac": Phase(95.0, 90.0), "ok": Phase(1, 90)}),
        scenario("slo", slos={"availability": Slo(False, 0.9)}),
        scenario("lost", data_ok=False),
        scenario("skip1", "skipped"),
        scenario("skip2", "skipped"),
        scenario("bmc", "broken"),
    )
    cfg = SignOff(gates=GatesConfig(max_skipped=1, no_regression=True))
    from harness.report.gates import Regression

    reg = Regression("slow", "evac", 95.0, 50.0, 60.0, 5)
    ev = evaluate(r, cfg, harness_errors=["bmc"], regressions=[reg])
    got = by_name(ev.results)
    assert not ev.passed
    assert got[BLOCKER_CRITICAL].scenarios == ("crit",)
    assert "0 of 1 passed; not passed: crit" in got[BLOCKER_CRITICAL].detail
    assert got[NO_OVER_BUDGET].scenarios == ("slow",)
    assert "slow: evac 95.0s / 90s" in got[NO_OVER_BUDGET].detail
    assert got[NO_SLO_BREACH].scenarios == ("slo",)
    assert got[NO_DATA_LOST].scenarios == ("lost",)
    assert got[NO_HARNESS_ERROR].scenarios == ("bmc",)
    assert not got["at most 1 skipped"].passed
    assert got["at most 1 skipped"].actual == "2"
    assert got[NO_REGRESSION].scenarios == ("slow",)
    assert all(not g.passed for g in ev.results)
    assert [g.name for g in ev.failed] == [g.name for g in ev.results]


def test_gates_turned_off_are_not_evaluated() -> None:
    off = GatesConfig(
        blocker_and_critical_passed=False,
        no_phase_over_budget=False,
        no_slo_breached=False,
        no_data_lost=False,
        no_harness_error=False,
    )
    ev = evaluate(run(scenario("x", "failed", "blocker")), SignOff(gates=off))
    assert ev.results == () and ev.passed


# -- trends --------------------------------------------------------------------------------


def history(values: list[float], *, complete: bool = True) -> list[Run]:
    return [
        run(
            scenario("s", phases={"p": Phase(v, 100.0, complete=complete)}),
            run_id=f"20261126T1{i:02d}000Z-00000{i % 10}",
        )
        for i, v in enumerate(values)
    ]


def test_a_regression_is_beyond_the_baselines_p95_plus_margin() -> None:
    cfg = TrendsConfig(baseline_runs=5, margin_percent=20, min_runs=3)
    prev = history([10, 50, 12, 10, 11, 10, 11, 12])  # the 50 is before the last 5
    assert regressions(run(scenario("s", phases={"p": Phase(14.3, 100)})), prev, cfg) == []
    found = regressions(run(scenario("s", phases={"p": Phase(14.5, 100)})), prev, cfg)
    assert len(found) == 1
    assert (found[0].baseline_p95_s, found[0].runs) == (12.0, 5)
    assert found[0].limit_s == pytest.approx(14.4)
    # too few previous figures, or only lower bounds: no verdict
    assert regressions(run(scenario("s", phases={"p": Phase(99, 100)})), prev[:2], cfg) == []
    partial = history([1, 1, 1, 1], complete=False)
    assert regressions(run(scenario("s", phases={"p": Phase(99, 100)})), partial, cfg) == []
    # a phase whose end was not seen is not judged either
    lower = run(scenario("s", phases={"p": Phase(99, 100, complete=False)}))
    assert regressions(lower, prev, cfg) == []


def test_sparkline() -> None:
    svg = sparkline_svg([1.0, 2.0, 3.0], budget=4.0, title="t", flagged_last=True)
    assert svg.startswith("<svg") and svg.count("<polyline") == 1
    assert 'stroke-dasharray="3,2"' in svg and "#c0392b" in svg
    assert sparkline_svg([]) == ""


# -- the page ------------------------------------------------------------------------------


class Cells(HTMLParser):
    """Rows of the tables under an element id: their data-* attributes and cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict[str, str | None], list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append((dict(attrs), []))
        elif tag == "td":
            self._cell = []

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self.rows:
            self.rows[-1][1].append("".join(self._cell).strip())
            self._cell = None


def section(page: str, ident: str) -> str:
    m = re.search(rf'<div id="{ident}">(.*?)</div>', page, re.S)
    assert m, ident
    return m.group(1)


def test_the_page_orders_phases_closest_first_and_shows_their_figures() -> None:
    prev = history([10, 11, 12, 10])
    now = run(
        scenario("s", phases={"p": Phase(40.0, 100.0)}, slos={"avail": Slo(True, 0.999)}),
        replace(
            scenario("t", "failed", "blocker", phases={"q": Phase(31.0, 30.0), "r": Phase(1, 10)}),
            epic="Rack",
            feature="Rack outage",
        ),
        run_id="20261126T170000Z-abcdef",
    )
    regs = regressions(now, prev, TrendsConfig())
    rows_ = phase_rows(now, prev, TrendsConfig(), regs)
    assert [(r.scenario.name, r.phase) for r in rows_] == [("t", "q"), ("s", "p"), ("t", "r")]
    assert rows_[1].trend == (10, 11, 12, 10, 40.0) and rows_[1].regression is not None
    page = signoff_html(now, previous=prev, regressions=regs, tr_ids={"s": "abc123"})
    cells = Cells()
    cells.feed(section(page, "phases"))
    body = [(a, c) for a, c in cells.rows if a.get("data-phase")]
    assert [a["data-phase"] for a, _ in body] == ["q", "p", "r"]
    first = body[0][1]
    assert first[2:6] == ["31.0", "-", "30", "103%"]  # measured, model (none here), budget
    assert 'data-tr="abc123" href="#abc123"' in page
    assert "regressed" in page and "Rack outage" in page
    assert page.index("Rack outage") < page.index("<h2>Phases")  # grouped by epic/feature
    assert closest_phase(now.scenarios[1]) == ("q", Phase(31.0, 30.0))


def test_the_page_escapes_names() -> None:
    page = signoff_html(run(scenario("<script>alert(1)</script>", phases={"<b>": Phase(1, 2)})))
    assert "<script>alert" not in page and "&lt;script&gt;" in page


def test_the_page_says_what_the_run_is_when_titled() -> None:
    """``powercut run --title`` (the demo set says it is one): a line under the verdict,
    escaped; without a title there is no such line."""
    titled = signoff_html(run(scenario("s")), title="demo set: 8 of 30 <scenarios>")
    assert '<div class="meta" id="title"><b>demo set: 8 of 30 &lt;scenarios&gt;</b></div>' in titled
    assert titled.index('id="verdict"') < titled.index('id="title"') < titled.index('id="meta"')
    assert 'id="title"' not in signoff_html(run(scenario("s")))


# -- from allure-results, staged results ---------------------------------------------------


def write_result(results: Path, name: str, status: str = "passed", **extra: Any) -> str:
    results.mkdir(parents=True, exist_ok=True)
    uid = str(uuid.uuid4())
    doc = {
        "uuid": uid,
        "historyId": name,
        "name": name,
        "status": status,
        "start": 0,
        "stop": 1000,
        "labels": [{"name": "severity", "value": "critical"}],
        "parameters": [
            {"name": "seed", "value": "7"},
            {"name": "w1 NotReady (s)", "value": "8.4"},
            {"name": "w1 NotReady budget (s)", "value": "20"},
        ],
        "steps": [{"name": "s", "parameters": [{"name": "evac (s)", "value": "95"}], "steps": []}],
        **extra,
    }
    (results / f"{uid}-result.json").write_text(json.dumps(doc))
    return uid


def test_staged_results_carry_one_phase_table_and_the_signoff_page(tmp_path: Path) -> None:
    results = tmp_path / "allure-results"
    uid = write_result(results, "Worker", description="Why it matters")
    (results / "x-attachment.txt").write_text("x")
    staged = stage_results(results, tmp_path / "staged", signoff_html="<p>page</p>")
    doc = json.loads((staged / f"{uid}-result.json").read_text())
    assert [p["name"] for p in doc["parameters"]] == ["seed"]
    assert doc["steps"][0]["parameters"] == []
    assert doc["descriptionHtml"].startswith("<p>Why it matters</p><table")
    assert 'data-phase="w1 NotReady"' in doc["descriptionHtml"]
    assert "42%" in doc["descriptionHtml"]
    globals_doc = json.loads(next(staged.glob("*-globals.json")).read_text())
    (att,) = globals_doc["attachments"]
    assert att["name"] == "Sign-off" and (staged / att["source"]).read_text() == "<p>page</p>"
    # the run's own results are untouched
    raw = json.loads((results / f"{uid}-result.json").read_text())
    assert len(raw["parameters"]) == 3 and "descriptionHtml" not in raw


def test_sign_off_of_results_and_allure_ids(tmp_path: Path) -> None:
    results = tmp_path / "allure-results"
    uid = write_result(results, "Worker", "failed")
    res = sign_off(
        results,
        SignOff(),
        run_id="20261126T160000Z-000001",
        target="lab",
        started="a",
        finished="b",
        powercut_version="1",
        inventory="lab.yaml",
    )
    assert res.run.verdict == "failed"
    assert res.run.seed == 7
    assert {g.name: g.passed for g in res.run.gates}[BLOCKER_CRITICAL] is False
    import hashlib

    assert allure_ids(results) == {
        "Worker": hashlib.md5(uid.encode(), usedforsecurity=False).hexdigest()
    }
    assert f'data-tr="{allure_ids(results)["Worker"]}"' in res.page
    assert res.gates_for_allure[0]["scenarios"] == ["Worker"]


# -- compare -------------------------------------------------------------------------------


def test_compare_side_by_side(tmp_path: Path) -> None:
    a = run(
        scenario("s", phases={"p": Phase(10.0, 30.0)}, slos={"v": Slo(True, 0.99)}),
        run_id="20261126T150000Z-aaaaaa",
    )
    b = run(
        scenario("s", "failed", phases={"p": Phase(15.0, 30.0)}, slos={"v": Slo(False, 0.9)}),
        scenario("new"),
        run_id="20261126T160000Z-bbbbbb",
    )
    table = {(r.scenario, r.what): r for r in rows(a, b)}
    assert table[("s", "p")].delta == "+5.0s (+50%)" and table[("s", "p")].worse
    assert table[("s", "verdict")].worse
    assert table[("s", "SLO v")].worse and table[("s", "SLO v")].b.startswith("BREACHED")
    assert table[("new", "verdict")].a == "-"
    text = compare_text(a, b)
    assert "20261126T150000Z-aaaaaa" in text and "+5.0s (+50%)" in text
    page = compare_html(a, b)
    assert page.count('class="worse"') == 3
    # by id from a store's history, by prefix, and the errors
    store = tmp_path / "store"
    for r in (a, b):
        append_run(store / "lab" / "history.jsonl", r)
    assert load_run("20261126T15", store=store, target="lab") == a
    with pytest.raises(ConfigError, match="no run '2027'"):
        load_run("2027", store=store, target="lab")
    with pytest.raises(ConfigError, match="--store DIR and --target"):
        load_run("20261126T15")
    (store / "lab" / "runs" / b.run_id).mkdir(parents=True)
    assert load_run(str(store / "lab" / "runs" / b.run_id)) == b
    with pytest.raises(ConfigError, match=r"no \*-result.json"):
        load_run(str(tmp_path))


def test_compare_marks_only_moves_beyond_noise_or_past_the_model_and_keeps_every_delta() -> None:
    long = "a scenario whose name is far longer than forty characters, as Gherkin's are"
    phases_a = {
        "w1 NotReady": Phase(20.0, 75.0, model_s=57.0, model_setting="node-monitor-grace-period"),
        "web-0 rescheduled": Phase(10.0, 20.0),
        "a phase whose name is also longer than forty characters": Phase(3.0, 30.0),
        "w1 unreachable taint": Phase(4.0, 30.0, model_s=8.0),
    }
    phases_b = {
        "w1 NotReady": Phase(20.5, 75.0, model_s=57.0),  # +0.5 s on 20: noise
        "web-0 rescheduled": Phase(14.0, 20.0),  # +40%: beyond noise
        "a phase whose name is also longer than forty characters": Phase(3.4, 30.0),
        "w1 unreachable taint": Phase(8.5, 30.0, model_s=8.0),  # newly past the model
    }
    a = run(scenario(long, phases=phases_a), run_id="20261126T150000Z-aaaaaa")
    b = run(scenario(long, phases=phases_b), run_id="20261126T160000Z-bbbbbb")
    table = {r.what: r for r in rows(a, b)}
    assert not table["w1 NotReady"].worse and table["w1 NotReady"].model == "<=57s"
    assert table["web-0 rescheduled"].worse
    assert not table["a phase whose name is also longer than forty characters"].worse
    assert table["w1 unreachable taint"].worse and table["w1 unreachable taint"].model == "<=8s DEV"
    text = compare_text(a, b, width=100)
    lines = [line for line in text.splitlines() if "s" in line and "+" in line]
    # every delta is there, whole, however long the names
    for delta in ("+0.5s (+2%)", "+4.0s (+40%)", "+0.4s (+13%)", "+4.5s (+112%)"):
        assert any(line.endswith(delta) for line in lines), delta
    table_lines = text.splitlines()[3:-2]
    assert all(len(line) <= 100 for line in table_lines)
    marked = [line for line in table_lines if line.startswith("!")]
    assert len(marked) == 2 and "model" in text.splitlines()[3]


def test_the_page_puts_what_did_not_pass_first() -> None:
    now = run(
        replace(scenario("a passed one"), epic="A epic"),
        replace(scenario("z failed one", "failed"), epic="Z epic"),
        replace(scenario("m skipped one", "skipped"), epic="M epic"),
    )
    page = signoff_html(now)
    first, failed, skipped = (
        page.index(x) for x in ("a passed one", "z failed one", "m skipped one")
    )
    assert page.index("Did not pass (2)") < failed < skipped < page.index("Passed (1)") < first


# -- powercut report: the sign-off of results re-rendered ----------------------------------


def test_report_signs_off_re_rendered_results_against_the_runs_before_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    rendered: list[dict[str, Any]] = []

    def render_report(results: Path, out: Path, **kw: Any) -> Path:
        rendered.append(kw)
        return out / "index.html"

    monkeypatch.setattr("harness.report.html.render_report", render_report)
    store = tmp_path / "store"
    (tmp_path / "store" / "lab").mkdir(parents=True)
    earlier, this, later = (f"20261126T1{h}0000Z-00000{h}" for h in (5, 6, 7))
    for run_id in (earlier, this, later):
        append_run(store / "lab" / "history.jsonl", run(scenario("Worker"), run_id=run_id))
    results = store / "lab" / "runs" / this / "allure-results"
    write_result(results, "Worker", "failed")
    rc = main(["report", str(results), "-o", str(tmp_path / "out"),
               "--store", str(store), "--target", "lab"])  # fmt: skip
    assert rc == 1
    err = capsys.readouterr().err
    assert BLOCKER_CRITICAL in err
    (kw,) = rendered
    assert kw["signoff_html"] and this in kw["signoff_html"]
    assert kw["history_path"] == store / "lab" / "allure-history.jsonl"
    failed = {g["name"] for g in kw["gates"] if not g["passed"]}
    assert BLOCKER_CRITICAL in failed
    # the later run is not this run's past; the earlier one is
    assert "compared with 1 earlier run(s) of this target" in kw["signoff_html"]
    # without sign-off rules or a store: the report as before, exit 0 whatever the results
    rendered.clear()
    assert main(["report", str(results), "-o", str(tmp_path / "out2")]) == 0
    assert rendered[0]["signoff_html"] is None
    capsys.readouterr()
    assert main(["report", str(results), "-o", str(tmp_path / "o3"), "--store", str(store)]) == 2
    assert "--store and --target go together" in capsys.readouterr().err


def test_a_scenarios_phase_table_shows_the_model_and_flags_a_deviation() -> None:
    from harness.report.stage import phases_table_html

    table = phases_table_html(
        {
            "w1 NotReady": Phase(12.0, 20.0, model_s=15.0, model_setting="grace (kubeadm)"),
            "w1 unreachable taint": Phase(9.0, 25.0, model_s=5.0, model_setting="rate"),
            "harness time": Phase(0.2),
        }
    )
    cells = Cells()
    cells.feed(table)
    body = {a["data-phase"]: c for a, c in cells.rows if a.get("data-phase")}
    assert body["w1 NotReady"][:4] == ["w1 NotReady", "12.000", "≤ 15", "20"]
    assert "deviation" not in " ".join(body["w1 NotReady"])
    assert (
        body["w1 unreachable taint"][2] == "≤ 5" and "deviation" in body["w1 unreachable taint"][5]
    )
    assert body["harness time"][2] == ""


def test_the_page_shows_the_model_beside_the_budget_and_a_deviation_apart() -> None:
    now = run(
        scenario(
            "s",
            phases={
                "w1 NotReady": Phase(12.0, 20.0, model_s=15.0, model_setting="grace 12 s"),
                "w1 unreachable taint": Phase(9.0, 25.0, model_s=5.0, model_setting="rate"),
            },
        )
    )
    cells = Cells()
    cells.feed(section(signoff_html(now), "phases"))
    body = {a["data-phase"]: (a, c) for a, c in cells.rows if a.get("data-phase")}
    attrs, row = body["w1 unreachable taint"]
    assert row[2:5] == ["9.0", "≤ 5 deviation", "25"]  # within its budget, beyond the model
    assert attrs["class"] == "bad"
    attrs, row = body["w1 NotReady"]
    assert row[2:5] == ["12.0", "≤ 15", "20"]
    assert attrs["class"] == ""
