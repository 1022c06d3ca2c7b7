"""`powercut longevity --store`: a longevity night lands in the results store like a feature
run, one scenario per cycle with its exit status, so the page lists it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from harness.cli import longevity as cli
from harness.errors import ConfigError
from harness.report import history as hist
from harness.report.store_page import render_index


def test_a_night_is_recorded_with_its_cycles_and_exit_status(tmp_path: Path) -> None:
    store = hist.target_store(tmp_path / "store", "rack-b")
    record = cli._StoreRecord(store, "20261127T220000Z-abcdef", "2026-11-27T22:00:00Z", "inv")
    assert record.out == (tmp_path / "store/rack-b/runs/20261127T220000Z-abcdef").resolve()
    results = record.out / "allure-results"
    results.mkdir(parents=True)
    for n, status in enumerate(("passed", "failed"), 1):
        (results / f"c{n}-result.json").write_text(
            json.dumps({"uuid": f"u{n}", "name": f"cycle {n}", "status": status,
                        "start": 1764280800000 + n, "stop": 1764280900000 + n,
                        "labels": [{"name": "feature", "value": "longevity"}]})
        )  # fmt: skip
    record.append(cli.EXIT_FAILED)
    (run,) = hist.read_history(store.history).runs
    assert run.run_id == "20261127T220000Z-abcdef" and run.target == "rack-b"
    assert run.exit_code == 1 and run.verdict == "failed"
    assert [s.status for s in run.scenarios] == ["passed", "failed"]
    page = render_index(tmp_path / "store")
    assert "20261127T220000Z-abcdef" in page and "1 (gate or scenario failed)" in page


def test_a_night_without_results_is_recorded_broken(tmp_path: Path) -> None:
    store = hist.target_store(tmp_path, "rack-b")
    record = cli._StoreRecord(store, "20261127T220000Z-abcdef", "2026-11-27T22:00:00Z", "inv")
    record.append(cli.EXIT_RESTORE_FAILED)
    (run,) = hist.read_history(store.history).runs
    assert run.verdict == "broken" and run.exit_code == 4


def test_store_and_out_together_are_refused(tmp_path: Path) -> None:
    args = argparse.Namespace(
        report=None, resume=None, inventory=tmp_path / "inv.yaml", out=tmp_path / "o",
        store=tmp_path / "s", store_target="x", keep_runs=0, keep_days=0, **dict.fromkeys(
            ("fraction", "groups", "target", "cycles", "duration", "outage", "failure",
             "budget", "keep_timelines", "probe_interval", "settle", "stop_file")),
    )  # fmt: skip
    with pytest.raises(ConfigError, match="either --store DIR or --out DIR"):
        cli.cmd_longevity(args)
