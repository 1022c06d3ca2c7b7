"""stats.json, cycles.csv, plots and Allure results, rebuilt from the JSONL alone."""

from __future__ import annotations

import csv
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from harness.longevity.records import CYCLES_FILE, PHASES, CycleLog, CycleRecord
from harness.longevity.report import write_report
from harness.report.summary import load_allure_results

BUDGETS = {
    "not_ready": 20.0,
    "evacuation": 55.0,
    "recovery": 85.0,
    "service_outage": 25.0,
    "volume_reattach": 20.0,
    "cleanup": 90.0,
}
GROUPS = [("g1", ["w-a1", "w-b1"]), ("g2", ["w-a2", "w-b2"])]


def nearest_rank(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[max(1, math.ceil(p / 100 * len(s))) - 1]


def make_run(out: Path, n: int = 40) -> list[CycleRecord]:
    cycles = []
    with CycleLog(out / CYCLES_FILE) as log:
        log.append(
            {
                "type": "run",
                "event": "start",
                "at": 1.0,
                "run_id": "r1",
                "inventory": "/x/lab.yaml",
                "inventory_name": "lab",
                "options": {"fraction": 0.5, "outage_s": 10.0},
                "groups": [{"name": g, "nodes": ns} for g, ns in GROUPS],
                "budgets": BUDGETS,
            }
        )
        for i in range(1, n + 1):
            group, nodes = GROUPS[(i - 1) % 2]
            recovery = 10.0 + (i % 7) * 3 + (80.0 if i == 13 else 0.0)
            phases: dict[str, float | None] = {
                "not_ready": 8.0 + (i % 5) * 0.25,
                "evacuation": 18.0 + i % 3,
                "recovery": recovery,
                "service_outage": 0.0 if i % 4 else 2.5,
                "volume_reattach": None if group == "g1" else 1.0 + i / 100,
                "cleanup": 5.0 + i % 2,
            }
            misses = [p for p, v in phases.items() if v is not None and v > BUDGETS[p]]
            rec = CycleRecord(
                cycle=i,
                group=group,
                nodes=nodes,
                status="missed" if misses else "passed",
                started_at=1_700_000_000.0 + i * 100,
                ended_at=1_700_000_060.0 + i * 100,
                phases=phases,
                budgets=dict(BUDGETS),
                misses=misses,
                incomplete=["cleanup"] if i == 20 else [],
                reason="; ".join(misses),
                detail={
                    "nodes": {nodes[0]: {"not_ready_s": phases["not_ready"]}},
                    "workloads": {
                        "lab/Deployment/web": {"affected": True, "recovery_s": recovery},
                        "lab/StatefulSet/quorum": {"affected": False, "recovery_s": None},
                    },
                    "services": {"web": {"longest_outage_s": phases["service_outage"]}},
                },
            )
            cycles.append(rec)
            log.append(rec.to_json())
        log.append({"type": "run", "event": "stop", "at": 2.0, "reason": "40 cycles done"})
    return cycles


def test_statistics_match_the_records(tmp_path: Path) -> None:
    cycles = make_run(tmp_path)
    files = write_report(tmp_path, plots=False, allure=False)
    stats = json.loads(files.stats.read_text())
    assert stats["run"]["cycles"] == 40
    assert stats["run"]["statuses"] == {"passed": 39, "missed": 1, "failed": 0}
    assert stats["run"]["stop_reason"] == "40 cycles done"
    for phase in PHASES:
        values = [v for c in cycles if (v := c.phases[phase]) is not None]
        st = stats["phases"][phase]
        assert st["count"] == len(values)
        assert st["min"] == pytest.approx(min(values), abs=1e-3)
        assert st["max"] == pytest.approx(max(values), abs=1e-3)
        assert st["mean"] == pytest.approx(sum(values) / len(values), abs=1e-3)
        for p in (50, 95, 99):
            assert st[f"p{p}"] == pytest.approx(nearest_rank(values, p), abs=1e-3)
        assert st["budget"] == BUDGETS[phase]
    assert stats["phases"]["recovery"]["budget_misses"] == 1
    assert stats["phases"]["cleanup"]["incomplete"] == 1
    g2 = stats["groups"]["g2"]
    assert g2["cycles"] == 20 and g2["nodes"] == ["w-a2", "w-b2"]
    assert g2["phases"]["volume_reattach"]["count"] == 20
    assert "volume_reattach" not in stats["groups"]["g1"]["phases"]
    # only affected workloads are counted
    assert set(stats["workloads"]) == {"lab/Deployment/web"}
    assert stats["workloads"]["lab/Deployment/web"]["recovery"]["budget_misses"] == 1
    assert stats["services"]["web"]["service_outage"]["max"] == 2.5


def test_csv_has_one_row_per_cycle(tmp_path: Path) -> None:
    make_run(tmp_path)
    files = write_report(tmp_path, plots=False, allure=False)
    rows = list(csv.DictReader(files.csv.open()))
    assert len(rows) == 40
    assert rows[12]["cycle"] == "13" and rows[12]["status"] == "missed"
    assert rows[12]["misses"] == "recovery" and float(rows[12]["recovery_s"]) == 108.0
    assert rows[0]["volume_reattach_s"] == ""


def test_plots_are_png_files(tmp_path: Path) -> None:
    make_run(tmp_path)
    files = write_report(tmp_path, allure=False)
    assert sorted(p.name for p in files.plots) == ["histograms.png", "phases.png"]
    for p in files.plots:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert p.stat().st_size > 10_000


def test_allure_results_one_per_cycle_and_a_summary(tmp_path: Path) -> None:
    make_run(tmp_path)
    files = write_report(tmp_path, plots=False)
    assert files.allure is not None
    results = sorted(files.allure.glob("*-result.json"))
    assert len(results) == 41
    summary = load_allure_results(files.allure)
    by_name = {s.name: s for s in summary.scenarios}
    cycle13 = by_name["cycle 13: fail g1 (w-a1, w-b1)"]
    assert cycle13.verdict == "failed" and "budget missed" in cycle13.message
    assert cycle13.slowest_phase is not None and cycle13.slowest_phase.name == "recovery"
    assert cycle13.slowest_phase.over_budget
    overall = by_name["Longevity on lab: 40 cycles"]
    assert overall.verdict == "failed" and "recovery 1x" in overall.message
    assert {p.name for p in overall.phases} >= {"recovery p95", "not_ready p95"}
    assert (files.allure / "environment.properties").exists()
    assert (files.allure / "categories.json").exists()
    data = orjson.loads(next(p for p in results if "summary" in p.read_text()).read_bytes())
    assert {a["name"] for a in data["attachments"]} == {"stats.json", "cycles.csv"}


def test_rebuilding_is_deterministic(tmp_path: Path) -> None:
    make_run(tmp_path)
    first = {p.name for p in write_report(tmp_path, plots=False).allure.iterdir()}  # type: ignore[union-attr]
    again = {p.name for p in write_report(tmp_path, plots=False).allure.iterdir()}  # type: ignore[union-attr]
    assert first == again


def test_cli_report_rebuilds_from_the_jsonl_alone(tmp_path: Path) -> None:
    make_run(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "longevity", "--report", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "40 cycle(s): 39 passed, 1 missed a budget, 0 failed to recover" in out.stdout
    assert "recovery" in out.stdout and (tmp_path / "stats.json").exists()
    assert (tmp_path / "plots" / "phases.png").exists()


def test_histogram_of_nearly_equal_durations_is_one_visible_bar() -> None:
    from harness.longevity.plots import _histogram

    counts, edges = _histogram([0.608, 0.623], 5, min_width=20 / 60)
    assert counts == [2] and edges[1] - edges[0] == pytest.approx(20 / 60)
    assert edges[0] <= 0.608 and edges[1] >= 0.623
    counts, edges = _histogram([1.0, 2, 3, 4, 5, 9], 5, min_width=0.1)
    assert counts == [2, 2, 1, 0, 1] and edges[0] == 1.0 and edges[-1] == 9.0


def test_slos_get_csv_columns_a_plot_and_the_signoff_page(tmp_path: Path) -> None:
    from harness.report.stage import find_signoff

    cycles = make_run(tmp_path, n=14)
    lines = (tmp_path / CYCLES_FILE).read_text().splitlines()
    docs = [json.loads(line) for line in lines]
    for doc in docs:
        if doc.get("type") == "cycle":
            worst = 0.999 if doc["cycle"] != 7 else 0.95
            doc["detail"]["slos"] = {
                "availability": {
                    "held": doc["cycle"] != 7,
                    "worst": worst,
                    "comparison": ">=",
                    "threshold": 0.99,
                    "breaches": int(doc["cycle"] == 7),
                }
            }
    (tmp_path / CYCLES_FILE).write_text("".join(json.dumps(d) + "\n" for d in docs))
    files = write_report(tmp_path)
    rows = list(csv.DictReader(files.csv.open()))
    assert rows[6]["slo_availability_held"] == "no" and rows[6]["slo_availability_worst"] == "0.95"
    assert rows[0]["slo_availability_held"] == "yes"
    assert sorted(p.name for p in files.plots) == ["histograms.png", "phases.png", "slos.png"]
    assert files.allure is not None
    page = find_signoff(files.allure)
    assert page is not None
    assert "Longevity sign-off: <span" in page and "FAILED" in page
    missed = [c.cycle for c in cycles if c.status != "passed"]
    assert [int(c) for c in re.findall(r'<tr class="bad" data-cycle="(\d+)"', page)] == missed
    recovery = files.stats_data["phases"]["recovery"]
    assert (
        f'data-phase="recovery" data-p50="{recovery["p50"]}" data-p95="{recovery["p95"]}"' in page
    )
    assert 'data-slo="availability" data-held="13" data-cycles="14"' in page
    assert ">7</td>" in page  # the breached cycle
