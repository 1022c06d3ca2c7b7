"""PNG plots of a longevity run (matplotlib's Agg canvas: no display, no pyplot state).

* ``plots/phases.png``: one panel per phase, its duration over the cycles with its budget,
  p50 and p95; misses as red dots, lower bounds (the phase did not complete) as open
  triangles. Above :data:`BIN_ABOVE` cycles each panel shows, per bin of consecutive
  cycles, the min-max band and the median (every miss is still drawn).
* ``plots/histograms.png``: one histogram per phase, with its budget and percentiles.
* ``plots/slos.png``: one panel per SLO of the inventory, its worst value in each cycle with
  its threshold; breached cycles as red dots.

Per failure group, ``stats.json`` has the same statistics (``groups``).

Two figures with fixed margins and few ticks, the series extracted once, histograms counted
here in plain Python and handed to matplotlib as one path each (``stairs``): matplotlib's
cost is per axis, tick, drawn path and converted Python list, and the 10,000-cycle
benchmark (``bench/longevity_bench.py``) must stay under 5 s.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from harness.longevity.records import PHASES, CycleRecord

__all__ = ["BIN_ABOVE", "PLOTS_DIR", "write_plots"]

PLOTS_DIR = "plots"
#: Above this many cycles a phase is drawn as a per-bin min-max band and median line: a
#: thousand-pixel-wide plot cannot show more, and 10,000 zigzags are slow to draw.
BIN_ABOVE = 600
BINS = 300
_OK = "#1f77b4"
_MISS = "#d62728"
_BUDGET = "#7f7f7f"
_P50 = "#2ca02c"
_P95 = "#ff7f0e"
_DPI = 90


@dataclass(frozen=True, slots=True)
class Series:
    """One phase over the cycles."""

    xs: list[int]
    ys: list[float]
    missed: list[bool]
    lower: list[bool]


def _series(cycles: Sequence[CycleRecord], phase: str) -> Series:
    xs: list[int] = []
    ys: list[float] = []
    missed: list[bool] = []
    lower: list[bool] = []
    for c in cycles:
        v = c.phases.get(phase)
        if v is None:
            continue
        xs.append(c.cycle)
        ys.append(v)
        missed.append(phase in c.misses)
        lower.append(phase in c.incomplete)
    return Series(xs, ys, missed, lower)


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    tmp = path.with_name(path.stem + ".tmp.png")
    # zlib level 1: a third of the encoding time for files about 20% larger
    fig.savefig(tmp, dpi=_DPI, format="png", pil_kwargs={"compress_level": 1})
    os.replace(tmp, path)
    return path


def _binned(s: Series) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per bin of consecutive cycles: centre, min, median, max."""
    size = max(1, -(-len(s.xs) // BINS))
    cx: list[float] = []
    lo: list[float] = []
    mid: list[float] = []
    hi: list[float] = []
    for i in range(0, len(s.xs), size):
        chunk = sorted(s.ys[i : i + size])
        cx.append((s.xs[i] + s.xs[min(i + size, len(s.xs)) - 1]) / 2)
        lo.append(chunk[0])
        mid.append(chunk[len(chunk) // 2])
        hi.append(chunk[-1])
    return cx, lo, mid, hi


def _reference_lines(ax: Axes, st: Mapping[str, Any], *, vertical: bool) -> None:
    line = ax.axvline if vertical else ax.axhline
    budget = st.get("budget")
    if isinstance(budget, int | float):
        line(budget, color=_BUDGET, linestyle="--", linewidth=1, label="budget")
    line(st["p50"], color=_P50, linestyle=":", linewidth=1, label="p50")
    line(st["p95"], color=_P95, linestyle=":", linewidth=1, label="p95")


def _figures(st: Mapping[str, Any]) -> str:
    """``p50 1.2s, p95 3.4s, max 5.6s, budget 9s (2 over)`` for a title."""
    budget = st.get("budget")
    over = f", budget {budget:g}s ({st['budget_misses']} over)" if budget is not None else ""
    return f"p50 {st['p50']:.1f}s, p95 {st['p95']:.1f}s, max {st['max']:.1f}s{over}"


def _phase_axes(ax: Axes, phase: str, s: Series, st: Mapping[str, Any], *, legend: bool) -> None:
    if len(s.xs) > BIN_ABOVE:
        cx, lo, mid, hi = _binned(s)
        ax.fill_between(cx, lo, hi, color=_OK, alpha=0.25, linewidth=0, label="min-max per bin")
        ax.plot(cx, mid, color=_OK, linewidth=0.9, label="median per bin")
    else:
        ax.plot(s.xs, s.ys, color=_OK, linewidth=0.8, marker=".", markersize=4)
    rows = zip(s.xs, s.ys, s.missed, s.lower, strict=True)
    done = [(x, y) for x, y, missed, lower in rows if missed and not lower]
    if done:
        ax.plot(*zip(*done, strict=True), "o", color=_MISS, markersize=3, label="over budget")
    waited = [(x, y) for x, y, lo_ in zip(s.xs, s.ys, s.lower, strict=True) if lo_]
    if waited:
        ax.plot(
            *zip(*waited, strict=True),
            "^",
            markerfacecolor="none",
            markeredgecolor=_MISS,
            markersize=4,
            label="did not complete (time waited)",
        )
    _reference_lines(ax, st, vertical=False)
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.set_title(f"{phase} (n={st['count']}): {_figures(st)}", fontsize="medium", loc="left")
    ax.grid(True, alpha=0.3)
    if legend:
        ax.legend(loc="upper right", fontsize="x-small", ncols=4)


def _phases(
    series: Mapping[str, Series], stats: Mapping[str, Any], title: str, path: Path
) -> Path | None:
    phases = [p for p in PHASES if p in stats and series[p].xs]
    if not phases:
        return None
    fig = Figure(figsize=(11, 2.3 * len(phases) + 0.8))
    axes = fig.subplots(len(phases), 1, sharex=True, squeeze=False)[:, 0]
    for i, (ax, phase) in enumerate(zip(axes, phases, strict=True)):
        _phase_axes(ax, phase, series[phase], stats[phase], legend=i == 0)
    axes[-1].set_xlabel("cycle")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(f"Phase durations over the cycles{title}")
    height = fig.get_figheight()
    fig.subplots_adjust(
        left=0.07, right=0.98, top=1 - 0.8 / height, bottom=0.45 / height, hspace=0.45
    )
    return _save(fig, path)


def _histogram(
    values: Sequence[float], bins: int, min_width: float = 0.0
) -> tuple[list[int], list[float]]:
    """Counts and bin edges (``len(edges) == len(counts) + 1``), equal-width bins at least
    ``min_width`` wide (nearly equal durations make one visible bar, not a hairline)."""
    lo, hi = min(values), max(values)
    if (hi - lo) / bins < min_width:
        bins = max(1, min(bins, int((hi - lo) / min_width) + 1))
        if (hi - lo) / bins < min_width:
            pad = (min_width * bins - (hi - lo)) / 2
            lo, hi = max(0.0, lo - pad), max(0.0, lo - pad) + min_width * bins
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    return counts, [lo + i * width for i in range(bins + 1)]


def _histograms(
    series: Mapping[str, Series], stats: Mapping[str, Any], title: str, path: Path
) -> Path | None:
    phases = [p for p in PHASES if p in stats and series[p].ys]
    if not phases:
        return None
    cols = 3
    rows = math.ceil(len(phases) / cols)
    fig = Figure(figsize=(12, 3.4 * rows + 0.6))
    flat = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax, phase in zip(flat, phases, strict=False):
        ys = series[phase].ys
        st = stats[phase]
        budget = st.get("budget")
        span = max(max(ys), budget if isinstance(budget, int | float) else 0.0, 1.0)
        counts, edges = _histogram(ys, min(50, max(5, len(ys) // 4)), min_width=span / 60)
        ax.stairs(counts, edges, fill=True, color=_OK, alpha=0.85)
        _reference_lines(ax, st, vertical=True)
        ax.set_title(
            f"{phase} (n={st['count']})\np50 {st['p50']:.1f}s, p95 {st['p95']:.1f}s",
            fontsize="medium",
        )
        ax.set_xlabel("seconds")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
    for ax in flat[len(phases) :]:
        ax.set_visible(False)
    handles, labels = flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", fontsize="small", ncols=3)
    fig.suptitle(f"Phase durations{title}")
    height = fig.get_figheight()
    fig.subplots_adjust(
        left=0.06, right=0.98, top=1 - 0.7 / height, bottom=0.5 / height, hspace=0.7, wspace=0.25
    )
    return _save(fig, path)


def slo_names(cycles: Sequence[CycleRecord]) -> list[str]:
    """The SLOs the cycles evaluated, sorted."""
    return sorted({n for c in cycles for n in (c.detail.get("slos") or {})})


def _slos(
    cycles: Sequence[CycleRecord], stats: Mapping[str, Any], suffix: str, path: Path
) -> Path | None:
    names = slo_names(cycles)
    if not names:
        return None
    slo_stats: Mapping[str, Any] = stats.get("slos") or {}
    height = 0.6 + 1.9 * len(names)
    fig = Figure(figsize=(11, height), dpi=_DPI)
    FigureCanvasAgg(fig)
    for i, name in enumerate(names):
        ax = fig.add_subplot(len(names), 1, i + 1)
        xs: list[int] = []
        ys: list[float] = []
        bad_x: list[int] = []
        bad_y: list[float] = []
        for c in cycles:
            v = (c.detail.get("slos") or {}).get(name) or {}
            worst = v.get("worst")
            if not isinstance(worst, int | float) or isinstance(worst, bool):
                continue
            if not math.isfinite(worst):
                continue
            xs.append(c.cycle)
            ys.append(float(worst))
            if v.get("held") is False:
                bad_x.append(c.cycle)
                bad_y.append(float(worst))
        info = slo_stats.get(name) or {}
        ax.plot(xs, ys, color=_OK, linewidth=0.8)
        if bad_x:
            ax.scatter(bad_x, bad_y, color=_MISS, s=9, zorder=3, label="breached")
        threshold = info.get("threshold")
        if isinstance(threshold, int | float) and not isinstance(threshold, bool):
            ax.axhline(float(threshold), color=_BUDGET, linestyle="--", linewidth=1)
        breached = len(info.get("breached_cycles") or ())
        ax.set_title(
            f"SLO {name} ({info.get('comparison')} {threshold}): worst per cycle, "
            f"{info.get('held', 0)} of {info.get('cycles', 0)} held, {breached} breached",
            fontsize=9,
            loc="left",
        )
        ax.xaxis.set_major_locator(MaxNLocator(8, integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(4))
        ax.tick_params(labelsize=8)
    fig.suptitle(f"SLOs per cycle{suffix}", fontsize=10)
    fig.subplots_adjust(
        left=0.07, right=0.98, top=1 - 0.5 / height, bottom=0.4 / height, hspace=0.8
    )
    return _save(fig, path)


def write_plots(
    out: Path, cycles: Sequence[CycleRecord], stats: Mapping[str, Any], *, title: str = ""
) -> list[Path]:
    """Write every plot under ``out/plots``; returns the files written."""
    folder = out / PLOTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    ordered = sorted(cycles, key=lambda c: c.cycle)
    phase_stats: Mapping[str, Any] = stats.get("phases") or {}
    series = {p: _series(ordered, p) for p in PHASES}
    suffix = f" ({title})" if title else ""
    written = [
        _phases(series, phase_stats, suffix, folder / "phases.png"),
        _histograms(series, phase_stats, suffix, folder / "histograms.png"),
        _slos(ordered, stats, suffix, folder / "slos.png"),
    ]
    kept = [p for p in written if p is not None]
    for stale in folder.glob("*.png"):  # from an earlier powercut or an earlier rebuild
        if stale not in kept:
            stale.unlink()
    return kept
