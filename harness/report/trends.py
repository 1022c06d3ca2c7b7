"""Trends across runs of one target: per phase and per SLO, the last runs' figures, a small
chart of them, and regressions against a baseline.

A phase *regresses* when its figure in this run is beyond the p95 (nearest rank, see
:mod:`harness.stats`) of its figures in the previous ``baseline_runs`` runs by more than
``margin_percent``, and there are at least ``min_runs`` previous figures. Only complete
figures count (a phase whose end was not seen is a lower bound, not a figure), and only runs
where the same scenario measured the same phase (phases are keyed by scenario and phase).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from harness.report.gates import Regression, TrendsConfig
from harness.report.history import Run
from harness.stats import percentile


@dataclass(frozen=True)
class Point:
    run_id: str
    value: float
    complete: bool = True


def phase_series(runs: Sequence[Run], scenario: str, phase: str) -> list[Point]:
    """The phase's figure in each run that measured it, oldest first."""
    out = []
    for run in runs:
        s = run.scenario(scenario)
        p = s.phases.get(phase) if s is not None else None
        if p is not None:
            out.append(Point(run.run_id, p.value_s, p.complete))
    return out


def slo_series(runs: Sequence[Run], scenario: str, slo: str) -> list[Point]:
    """The SLO's worst value in each run that checked it (None worst values left out)."""
    out = []
    for run in runs:
        s = run.scenario(scenario)
        v = s.slos.get(slo) if s is not None else None
        if v is not None and v.worst is not None:
            out.append(Point(run.run_id, v.worst, v.ok))
    return out


def baseline_limit(previous: Sequence[float], margin_percent: float) -> tuple[float, float]:
    """(p95 of the previous figures, that p95 plus the margin)."""
    p95 = percentile(sorted(previous), 95)
    return p95, p95 * (1 + margin_percent / 100.0)


def regressions(run: Run, previous: Sequence[Run], cfg: TrendsConfig) -> list[Regression]:
    """Every phase of ``run`` beyond its baseline (``previous``: older runs, oldest first)."""
    window = list(previous)[-cfg.baseline_runs :]
    out = []
    for s in run.scenarios:
        for key, p in s.phases.items():
            if not p.complete:
                continue
            figures = [pt.value for pt in phase_series(window, s.name, key) if pt.complete]
            if len(figures) < cfg.min_runs:
                continue
            p95, limit = baseline_limit(figures, cfg.margin_percent)
            if p.value_s > limit:
                out.append(Regression(s.name, key, p.value_s, p95, limit, len(figures)))
    return out


def sparkline_svg(
    values: Sequence[float],
    *,
    budget: float | None = None,
    model: float | None = None,
    width: int = 120,
    height: int = 28,
    title: str = "",
    flagged_last: bool = False,
) -> str:
    """A small inline SVG line chart of ``values`` (oldest first), the last point marked
    (red when ``flagged_last``), a dashed red line at ``budget`` and a dotted grey one at
    ``model`` (Kubernetes' own bound for the phase) when given."""
    if not values:
        return ""
    top = max(max(values), budget or 0.0, model or 0.0) or 1.0
    pad = 3.0
    n = len(values)

    def x(i: int) -> float:
        return pad + (width - 2 * pad) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * (v / top)

    pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spark" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    if title:
        parts.append(f"<title>{html.escape(title)}</title>")
    if budget is not None and budget > 0:
        yb = y(budget)
        parts.append(
            f'<line x1="0" x2="{width}" y1="{yb:.1f}" y2="{yb:.1f}" stroke="#c0392b" '
            'stroke-dasharray="3,2" stroke-width="1"/>'
        )
    if model is not None and model > 0:
        ym = y(model)
        parts.append(
            f'<line class="model" x1="0" x2="{width}" y1="{ym:.1f}" y2="{ym:.1f}" '
            'stroke="#57606a" stroke-dasharray="1,2" stroke-width="1"/>'
        )
    parts.append(f'<polyline fill="none" stroke="#2c7be5" stroke-width="1.5" points="{pts}"/>')
    colour = "#c0392b" if flagged_last else "#2c7be5"
    parts.append(f'<circle cx="{x(n - 1):.1f}" cy="{y(values[-1]):.1f}" r="2.5" fill="{colour}"/>')
    parts.append("</svg>")
    return "".join(parts)
