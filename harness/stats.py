"""Per-phase statistics across cycles: count, min, p50, p95, p99, max, mean, budget misses.

Pure Python (no numpy); fine for the durations of a longevity run (thousands of cycles per
phase). Sorting dominates: about 0.3 s per million samples.

Percentiles use the **nearest-rank** method: the p-th percentile of n sorted samples is the
sample at 1-based rank ``ceil(p/100 * n)`` (rank 1 for p = 0). It is always a duration that
was actually observed, so a report can say "p95 was cycle 17's 42.1 s", and it never
interpolates between two cycles that behaved differently. With few samples the high
percentiles are the maximum (p99 of 20 samples is the largest): that is the honest answer.

A budget miss is a duration strictly greater than the phase's budget.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence

from harness.budgets import Budgets
from harness.errors import ConfigError

__all__ = [
    "PhaseRecorder",
    "PhaseStats",
    "format_table",
    "percentile",
    "phase_stats",
    "summarize",
]


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile ``p`` (0-100) of already **sorted** ``sorted_values``."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be within 0-100, got {p}")
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclasses.dataclass(frozen=True, slots=True)
class PhaseStats:
    """Statistics of one phase's durations, in seconds."""

    phase: str
    count: int
    min: float
    p50: float
    p95: float
    p99: float
    max: float
    mean: float
    budget: float | None = None
    budget_misses: int = 0

    @property
    def miss_rate(self) -> float:
        return self.budget_misses / self.count if self.count else 0.0

    def as_dict(self) -> dict[str, str | int | float | None]:
        return dataclasses.asdict(self)


def _check(phase: str, value: float) -> float:
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"phase {phase!r}: {value!r} is not a duration (finite, >= 0)")
    return number


def phase_stats(phase: str, durations: Iterable[float], budget: float | None = None) -> PhaseStats:
    """Statistics of ``durations`` (seconds). Raises ``ValueError`` for no samples or for a
    negative / NaN / infinite duration."""
    values = sorted(_check(phase, d) for d in durations)
    if not values:
        raise ValueError(f"phase {phase!r} has no samples")
    misses = sum(1 for v in values if v > budget) if budget is not None else 0
    return PhaseStats(
        phase=phase,
        count=len(values),
        min=values[0],
        p50=percentile(values, 50),
        p95=percentile(values, 95),
        p99=percentile(values, 99),
        max=values[-1],
        mean=math.fsum(values) / len(values),
        budget=budget,
        budget_misses=misses,
    )


def _budget_of(phase: str, budgets: Budgets | Mapping[str, float] | None) -> float | None:
    if budgets is None:
        return None
    if isinstance(budgets, Budgets):
        try:
            return budgets.get(phase)
        except ConfigError:
            return None  # a phase with no budget of its own (e.g. "cycle")
    return budgets.get(phase)


def summarize(
    samples: Mapping[str, Iterable[float]],
    budgets: Budgets | Mapping[str, float] | None = None,
) -> dict[str, PhaseStats]:
    """Statistics per phase. Phases named like a budget (``node_not_ready``,
    ``node-not-ready``) are checked against it; phases without samples are left out."""
    out: dict[str, PhaseStats] = {}
    for phase, durations in samples.items():
        values = list(durations)
        if values:
            out[phase] = phase_stats(phase, values, _budget_of(phase, budgets))
    return out


class PhaseRecorder:
    """Collects durations per phase across cycles, in the order phases first appear."""

    def __init__(self) -> None:
        self._samples: dict[str, list[float]] = {}

    def add(self, phase: str, duration: float) -> None:
        self._samples.setdefault(phase, []).append(_check(phase, duration))

    def samples(self, phase: str) -> list[float]:
        return list(self._samples.get(phase, ()))

    def phases(self) -> list[str]:
        return list(self._samples)

    def stats(self, budgets: Budgets | Mapping[str, float] | None = None) -> dict[str, PhaseStats]:
        return summarize(self._samples, budgets)


def format_table(stats: Mapping[str, PhaseStats] | Iterable[PhaseStats]) -> list[str]:
    """A plain-text table, one line per phase (seconds, one decimal)."""
    rows = list(stats.values()) if isinstance(stats, Mapping) else list(stats)
    header = ["phase", "n", "min", "p50", "p95", "p99", "max", "mean", "budget", "misses"]
    table: list[list[str]] = [header]
    for s in rows:
        numbers = [f"{v:.1f}" for v in (s.min, s.p50, s.p95, s.p99, s.max, s.mean)]
        budget = f"{s.budget:.1f}" if s.budget is not None else "-"
        misses = str(s.budget_misses) if s.budget is not None else "-"
        table.append([s.phase, str(s.count), *numbers, budget, misses])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = []
    for row in table:
        cells = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines
