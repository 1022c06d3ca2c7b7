"""Longevity statistics per SLO: worst value per cycle and of the run, cycles that breached,
cycles where the SLO could not be evaluated; and the SLO steps of each cycle's result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.longevity.records import CYCLES_FILE, CycleRecord, read_log
from harness.longevity.report import _cycle_steps
from harness.longevity.stats import slo_stats
from harness.session import StoppedByCondition
from tests.unit.test_longevity_engine import FakeRunner, engine


def cycle(n: int, slos: dict[str, Any]) -> CycleRecord:
    return CycleRecord(
        cycle=n,
        group="g1",
        nodes=["w1"],
        status="passed",
        started_at=1000.0 + n * 100,
        ended_at=1060.0 + n * 100,
        phases={},
        budgets={},
        detail={"slos": slos},
    )


def up(held: bool | None, worst: object, breaches: int = 0, **kw: Any) -> dict[str, Any]:
    return {
        "comparison": ">=",
        "threshold": 1.0,
        "held": held,
        "worst": worst,
        "breaches": breaches,
        **kw,
    }


def err(held: bool | None, worst: object, breaches: int = 0) -> dict[str, Any]:
    return {
        "comparison": "<=",
        "threshold": 0.05,
        "held": held,
        "worst": worst,
        "breaches": breaches,
    }


def test_worst_per_cycle_breached_cycles_and_the_run_worst() -> None:
    cycles = [
        cycle(1, {"web": up(True, 1.0), "errors": err(True, 0.01)}),
        cycle(2, {"web": up(False, 0.0, 2), "errors": err(False, 0.2, 1)}),
        cycle(
            3,
            {
                "web": up(None, None, error="Prometheus at x did not answer"),
                "errors": err(True, 0.03),
            },
        ),
        cycle(4, {"web": up(False, 0.5, 1), "errors": err(False, 0.09, 1)}),
    ]
    stats = slo_stats(list(reversed(cycles)))  # order of the records does not matter
    web = stats["web"]
    assert web["cycles"] == 3 and web["held"] == 1
    assert web["breached_cycles"] == [2, 4]
    assert web["not_evaluated"] == [3]
    assert web["worst"] == 0.0 and web["worst_cycle"] == 2  # lowest, for ">="
    assert web["worst_per_cycle"] == {"1": 1.0, "2": 0.0, "4": 0.5}
    errors = stats["errors"]
    assert errors["worst"] == 0.2 and errors["worst_cycle"] == 2  # highest, for "<="
    assert errors["breached_cycles"] == [2, 4]


def test_no_slos_no_statistics() -> None:
    assert slo_stats([cycle(1, {})]) == {}


def test_each_cycle_result_has_a_step_per_slo() -> None:
    c = cycle(2, {"web": up(False, 0.0, 2), "errors": err(None, None)})
    c.detail["slos"]["errors"]["error"] = "no series"
    steps = {s["name"]: s["status"] for s in _cycle_steps(c)}
    assert steps == {
        "SLO web (>= 1.0): BREACHED 2 time(s), worst 0.0": "failed",
        "SLO errors: not evaluated (no series)": "broken",
    }


def test_a_stop_condition_ends_the_run_and_says_why(tmp_path: Path) -> None:
    """The cycle's session raised StoppedByCondition (its nodes already back on): the run
    stops, the stop record says which condition, and the error reaches the CLI (exit 5)."""
    runner = FakeRunner()

    def breach() -> None:
        raise StoppedByCondition("SLO api-available", 'sum(up{job="apiserver"}) = 1 on {}')

    runner.hooks[2] = breach
    eng, log, _ = engine(tmp_path, runner, cycles=5)
    with pytest.raises(StoppedByCondition):
        eng.run()
    log.close()
    assert [c for c, _ in runner.ran] == [1, 2]
    run_log = read_log(tmp_path / CYCLES_FILE)
    assert [c.cycle for c in run_log.cycles] == [1]  # the stopped cycle is not recorded
    stop = run_log.last_stop
    assert stop is not None
    assert "stopped by SLO api-available" in stop["reason"]
