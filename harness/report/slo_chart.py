"""Draw one SLO over a scenario as an SVG chart: its series, its threshold, its breaches and
the harness's actions (the disruption's phases), with the verdict in the title.

Input is the JSON form of ``harness.slo.evaluate.SloResult.to_json()`` plus an ``actions``
list (``{"wall", "name", "transition"}``), so this module imports nothing of the harness but
its vocabulary (:mod:`harness.kube.names`) and the report can redraw a chart from an
attachment. Output is deterministic and every piece
of text is XML-escaped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from xml.sax.saxutils import escape

from harness.kube.names import BACK_AT, DOWN_FROM, downs

__all__ = ["slo_chart_svg"]

WIDTH = 760
HEIGHT = 300
LEFT = 64
RIGHT = 16
TOP = 40
BOTTOM = 56
FONT = "DejaVu Sans, Arial, Helvetica, sans-serif"
SERIES_COLOURS = ("#2563eb", "#0d9488", "#9333ea", "#ca8a04", "#db2777", "#4b5563")
#: Actions that start a disruption phase and those that end it, for the shaded bands: a
#: power-off, partition or kubelet stop until the power-on, heal or kubelet start; a
#: reboot as :mod:`harness.failures.reboot` says (:func:`harness.kube.names.downs`).
PHASE_STARTS = DOWN_FROM
PHASE_ENDS = BACK_AT


def _num(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else None
    return None  # "nan", "inf", None: not drawn


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out = []
    v = first
    while v <= hi + step * 1e-9:
        out.append(round(v, 10))
        v += step
    return out


def _series_label(labels: Mapping[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return "{" + inner + "}" if inner else "value"


def _phases(actions: Sequence[Mapping[str, Any]], end: float) -> list[tuple[str, float, float]]:
    """(node, from, to) where a node was down: from a power-off, partition, kubelet stop or
    power cycle to its end, as :func:`harness.kube.names.downs` defines them."""
    timed = [
        (str(a.get("name", "")), str(a.get("transition", "")), float(wall))
        for a in sorted(actions, key=lambda a: float(a.get("wall", 0.0)))
        if isinstance(wall := a.get("wall"), int | float)
    ]
    out = [(d.node, d.since, end if d.back is None else d.back) for d in downs(timed)]
    return sorted(out, key=lambda p: p[1])


def slo_chart_svg(doc: Mapping[str, Any]) -> str:
    """The chart of one SLO result (see the module's docstring for the input)."""
    start, end = float(doc["start"]), float(doc["end"])
    span = max(end - start, 1e-6)
    threshold = float(doc["threshold"])
    held = bool(doc.get("held"))
    series = doc.get("series") or []
    values = [v for s in series for _, raw in s.get("points") or () if (v := _num(raw)) is not None]
    lo = min([*values, threshold])
    hi = max([*values, threshold])
    pad = (hi - lo) * 0.1 or max(abs(hi) * 0.1, 1.0)
    lo, hi = lo - pad, hi + pad
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + (min(max(t, start), end) - start) / span * plot_w

    def y(v: float) -> float:
        return TOP + (hi - v) / (hi - lo) * plot_h

    verdict = "held" if held else "BREACHED"
    colour = "#16a34a" if held else "#dc2626"
    title = f"SLO {doc.get('name')}: {verdict}"
    subtitle = f"{doc.get('expr')} {doc.get('comparison')} {_fmt(threshold)}"
    if doc.get("for_s"):
        subtitle += f"  (breaches shorter than {_fmt(float(doc['for_s']))} s allowed)"
    if len(subtitle) > 120:
        subtitle = subtitle[:117] + "..."
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{FONT}" font-size="11">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<text x="{LEFT}" y="14" font-size="12" font-weight="bold" fill="{colour}">'
        f"{escape(title)}</text>",
        f'<text x="{LEFT}" y="29" fill="#374151">{escape(subtitle)}</text>',
    ]
    # disruption phases: shaded bands, then the action markers
    for i, (node, since, until) in enumerate(_phases(doc.get("actions") or [], end)):
        x0, x1 = x(since), x(until)
        out.append(
            f'<rect x="{x0:.1f}" y="{TOP}" width="{max(x1 - x0, 1):.1f}" height="{plot_h}" '
            f'fill="#f97316" fill-opacity="0.12"><title>{escape(node)} down</title></rect>'
        )
        out.append(
            f'<text x="{x0 + 2:.1f}" y="{TOP + 12 + 12 * (i % 3)}" fill="#c2410c">'
            f"{escape(node)} down</text>"
        )
    for a in doc.get("actions") or []:
        wall = a.get("wall")
        if not isinstance(wall, int | float) or not start <= wall <= end:
            continue
        xa = x(float(wall))
        label = f"{a.get('name')} {a.get('transition')} at +{float(wall) - start:.1f} s"
        out.append(
            f'<line x1="{xa:.1f}" y1="{TOP}" x2="{xa:.1f}" y2="{TOP + plot_h}" '
            f'stroke="#9ca3af" stroke-dasharray="2,3"><title>{escape(label)}</title></line>'
        )
    # breaches
    for b in doc.get("breaches") or []:
        x0, x1 = x(float(b["start"])), x(float(b["end"]))
        out.append(
            f'<rect x="{x0 - 1:.1f}" y="{TOP}" width="{max(x1 - x0, 0) + 2:.1f}" '
            f'height="{plot_h}" fill="#dc2626" fill-opacity="0.15"><title>breach of '
            f"{escape(str(b.get('series')))}: worst {escape(str(b.get('worst')))}</title></rect>"
        )
    # axes
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#d1d5db"/>'
    )
    for v in _ticks(lo, hi):
        yv = y(v)
        out.append(
            f'<line x1="{LEFT}" y1="{yv:.1f}" x2="{LEFT + plot_w}" y2="{yv:.1f}" stroke="#f3f4f6"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{yv + 4:.1f}" text-anchor="end" fill="#374151">'
            f"{escape(_fmt(v))}</text>"
        )
    for t in _ticks(0.0, span, 8):
        xt = x(start + t)
        out.append(
            f'<text x="{xt:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle" '
            f'fill="#374151">{_fmt(t)}</text>'
        )
    out.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 22}" text-anchor="middle" '
        'fill="#374151">seconds from the baseline (cluster found healthy)</text>'
    )
    # threshold
    yt = y(threshold)
    out.append(
        f'<line x1="{LEFT}" y1="{yt:.1f}" x2="{LEFT + plot_w}" y2="{yt:.1f}" stroke="#dc2626" '
        f'stroke-width="1.5" stroke-dasharray="6,4"><title>threshold {_fmt(threshold)}'
        "</title></line>"
    )
    # series
    legend_x = LEFT
    for i, s in enumerate(series):
        colour_i = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        runs: list[list[str]] = [[]]
        for t, raw in s.get("points") or ():
            v = _num(raw)
            if v is None:
                runs.append([])
                continue
            runs[-1].append(f"{x(float(t)):.1f},{y(v):.1f}")
        for run in runs:
            if len(run) == 1:
                cx, cy = run[0].split(",")
                out.append(f'<circle cx="{cx}" cy="{cy}" r="2" fill="{colour_i}"/>')
            elif run:
                out.append(
                    f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour_i}" '
                    'stroke-width="1.5"/>'
                )
        label = _series_label(s.get("labels") or {})[:60]
        out.append(
            f'<text x="{legend_x}" y="{HEIGHT - 6}" fill="{colour_i}">{escape(label)}</text>'
        )
        legend_x += int(len(label) * 6.2) + 16
        if legend_x > WIDTH - 80:
            break
    out.append("</svg>")
    return "\n".join(out) + "\n"
