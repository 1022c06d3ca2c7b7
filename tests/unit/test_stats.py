"""Per-phase statistics (nearest-rank percentiles)."""

from __future__ import annotations

import math

import pytest

from harness.budgets import profile
from harness.stats import PhaseRecorder, format_table, percentile, phase_stats, summarize


def test_nearest_rank_percentiles_of_one_to_hundred() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 95) == 95.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile(values, 0) == 1.0


def test_nearest_rank_is_always_an_observed_value() -> None:
    values = [1.0, 2.0, 10.0, 11.0]
    # ceil(0.5 * 4) = rank 2 -> 2.0 (linear interpolation would invent 6.0)
    assert percentile(values, 50) == 2.0
    assert percentile(values, 95) == 11.0


def test_single_sample() -> None:
    stats = phase_stats("drain", [4.2])
    assert (stats.count, stats.min, stats.p50, stats.p99, stats.max) == (1, 4.2, 4.2, 4.2, 4.2)
    assert stats.mean == 4.2


def test_phase_stats_unsorted_input_and_budget_misses() -> None:
    stats = phase_stats("node_not_ready", [30.0, 10.0, 20.0, 20.0, 50.0], budget=20.0)
    assert stats.count == 5
    assert stats.min == 10.0
    assert stats.max == 50.0
    assert stats.p50 == 20.0
    assert stats.p95 == 50.0
    assert math.isclose(stats.mean, 26.0)
    assert stats.budget_misses == 2  # strictly greater than the budget: 30 and 50
    assert math.isclose(stats.miss_rate, 0.4)


def test_no_budget_means_no_misses() -> None:
    assert phase_stats("x", [1.0, 2.0]).budget_misses == 0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_bad_durations_are_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="'x'"):
        phase_stats("x", [1.0, bad])


def test_empty_phase_is_refused() -> None:
    with pytest.raises(ValueError, match="no samples"):
        phase_stats("x", [])
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summarize_uses_budgets_by_phase_name() -> None:
    budgets = profile("fast")
    stats = summarize(
        {
            "node-not-ready": [budgets.node_not_ready + 1, 1.0],
            "cycle": [100.0],
            "never": [],
        },
        budgets,
    )
    assert set(stats) == {"node-not-ready", "cycle"}
    assert stats["node-not-ready"].budget == budgets.node_not_ready
    assert stats["node-not-ready"].budget_misses == 1
    assert stats["cycle"].budget is None


def test_summarize_with_a_plain_mapping_of_budgets() -> None:
    stats = summarize({"a": [1.0, 5.0]}, {"a": 2.0})
    assert stats["a"].budget_misses == 1


def test_recorder_collects_across_cycles() -> None:
    recorder = PhaseRecorder()
    for cycle in range(10):
        recorder.add("power_ack", 0.1 * (cycle + 1))
        recorder.add("node_not_ready", 10.0 + cycle)
    assert recorder.phases() == ["power_ack", "node_not_ready"]
    assert recorder.samples("node_not_ready")[0] == 10.0
    stats = recorder.stats(profile("fast"))
    assert stats["node_not_ready"].p50 == 14.0
    assert stats["node_not_ready"].budget_misses == 0
    with pytest.raises(ValueError):
        recorder.add("x", -1.0)


def test_format_table() -> None:
    lines = format_table(summarize({"drain": [1.0, 2.0], "x": [3.0]}, {"drain": 1.5}))
    assert lines[0].split() == [
        "phase",
        "n",
        "min",
        "p50",
        "p95",
        "p99",
        "max",
        "mean",
        "budget",
        "misses",
    ]
    assert lines[1].split() == ["drain", "2", "1.0", "1.0", "2.0", "2.0", "2.0", "1.5", "1.5", "1"]
    assert lines[2].split()[-2:] == ["-", "-"]
