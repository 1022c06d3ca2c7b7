"""The sign-off page of a longevity run, from its ``stats.json`` and its cycles.

The same kind of first page as a feature run's (:mod:`harness.report.signoff_page`): the
verdict, the cycles and their statuses, per phase p50/p95/p99 and max against its budget
(the closest to budget first), the cycles that missed, and per SLO its cycles, how many held,
the breached cycles and its worst value per cycle as a small chart. ``write_allure`` of
:mod:`harness.longevity.report` puts it into the run's Allure results as the report's
sign-off attachment.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from harness import __version__
from harness.report.signoff_page import _CSS
from harness.report.trends import sparkline_svg

#: Cycles listed by number before "and N more".
LIST_CYCLES = 100
#: Points of an SLO's chart at most (the worst of each bin of consecutive cycles).
CHART_POINTS = 300


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _f(v: object) -> str:
    return f"{v:.1f}" if isinstance(v, int | float) and not isinstance(v, bool) else ""


def _worst_bins(values: Sequence[float], points: int, higher_is_worse: bool) -> list[float]:
    if len(values) <= points:
        return list(values)
    size = -(-len(values) // points)
    pick = max if higher_is_worse else min
    return [pick(values[i : i + size]) for i in range(0, len(values), size)]


def longevity_html(stats: Mapping[str, Any], missed: Sequence[tuple[int, str, str]] = ()) -> str:
    """The page. ``missed``: (cycle, status, reason) of every cycle that did not pass."""
    run: Mapping[str, Any] = stats.get("run") or {}
    statuses: Mapping[str, int] = run.get("statuses") or {}
    bad = int(statuses.get("missed", 0)) + int(statuses.get("failed", 0))
    any_breach = any((s or {}).get("breached_cycles") for s in (stats.get("slos") or {}).values())
    verdict = "passed" if run.get("cycles") and not bad and not any_breach else "failed"
    meta = [
        ("inventory", run.get("inventory_name") or run.get("inventory") or ""),
        ("run", run.get("run_id") or ""),
        ("cycles", run.get("cycles", 0)),
        ("stopped", run.get("stop_reason") or ""),
        ("powercut", __version__),
    ]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Longevity sign-off</title>"
        f'<style>{_CSS}</style></head><body><div class="pcso" id="signoff">',
        f'<h1>Longevity sign-off: <span id="verdict" class="badge {verdict}">'
        f"{verdict.upper()}</span> {_e(meta[0][1])}</h1>",
        '<div class="meta" id="meta">'
        + " &middot; ".join(f'{k} <b data-key="{k}">{_e(v)}</b>' for k, v in meta)
        + "</div>",
        '<div class="meta">'
        + ", ".join(f"{n} {s}" for s, n in statuses.items())
        + f" &middot; {run.get('cycles_with_misses', 0)} cycle(s) with a budget miss</div>",
        "<h2>Phases against their budgets, closest first</h2>",
    ]
    phases: Mapping[str, Any] = stats.get("phases") or {}

    def closeness(item: tuple[str, Any]) -> float:
        st = item[1] or {}
        budget = st.get("budget")
        return -(st["p95"] / budget) if budget else 0.0

    rows = [(p, st) for p, st in phases.items() if st]
    rows.sort(key=closeness)
    parts.append(
        '<div id="phases"><table><thead><tr><th>phase</th><th>cycles</th><th>p50 (s)</th>'
        "<th>p95 (s)</th><th>p99 (s)</th><th>max (s)</th><th>budget (s)</th>"
        "<th>p95 % of budget</th><th>misses</th><th>lower bounds</th></tr></thead><tbody>"
    )
    for phase, st in rows:
        budget = st.get("budget")
        ratio = st["p95"] / budget if budget else None
        misses = int(st.get("budget_misses", 0))
        parts.append(
            f'<tr class="{"bad" if misses else ""}" data-phase="{_e(phase)}" '
            f'data-p50="{st["p50"]}" data-p95="{st["p95"]}" data-p99="{st["p99"]}" '
            f'data-budget="{"" if budget is None else budget}" data-misses="{misses}">'
            f"<td>{_e(phase)}</td><td class='num'>{st['count']}</td>"
            f"<td class='num'>{_f(st['p50'])}</td><td class='num'>{_f(st['p95'])}</td>"
            f"<td class='num'>{_f(st['p99'])}</td><td class='num'>{_f(st['max'])}</td>"
            f"<td class='num'>{'' if budget is None else f'{budget:g}'}</td>"
            f"<td class='num{' over' if ratio and ratio > 1 else ''}'>"
            f"{'' if ratio is None else f'{ratio * 100:.0f}%'}</td>"
            f"<td class='num{' over' if misses else ''}'>{misses}</td>"
            f"<td class='num'>{st.get('incomplete', 0)}</td></tr>"
        )
    parts.append("</tbody></table></div>")
    parts.append(f"<h2>Cycles that did not pass ({len(missed)})</h2>")
    if missed:
        parts.append('<div id="missed"><table><thead><tr><th>cycle</th><th>status</th>')
        parts.append("<th>why</th></tr></thead><tbody>")
        for cycle, status, reason in list(missed)[:LIST_CYCLES]:
            parts.append(
                f'<tr class="bad" data-cycle="{cycle}"><td class="num">{cycle}</td>'
                f"<td>{_e(status)}</td><td>{_e(reason)}</td></tr>"
            )
        parts.append("</tbody></table></div>")
        if len(missed) > LIST_CYCLES:
            parts.append(f'<p class="dim">and {len(missed) - LIST_CYCLES} more (cycles.csv)</p>')
    else:
        parts.append('<p class="dim">Every cycle passed within its budgets.</p>')
    parts.append("<h2>SLOs</h2>")
    slos: Mapping[str, Any] = stats.get("slos") or {}
    if not slos:
        parts.append('<p class="dim">The inventory checks no SLO.</p>')
    else:
        parts.append(
            '<div id="slos"><table><thead><tr><th>SLO</th><th>objective</th><th>cycles</th>'
            "<th>held</th><th>breached cycles</th><th>worst</th><th>worst per cycle</th>"
            "</tr></thead><tbody>"
        )
        for name, st in sorted(slos.items()):
            per_cycle = st.get("worst_per_cycle") or {}
            ordered = [
                float(v)
                for _, v in sorted(per_cycle.items(), key=lambda kv: int(kv[0]))
                if isinstance(v, int | float) and not isinstance(v, bool)
            ]
            higher_is_worse = str(st.get("comparison") or "").startswith("<")
            chart = sparkline_svg(
                _worst_bins(ordered, CHART_POINTS, higher_is_worse),
                width=220,
                title=f"{name}: worst per cycle",
            )
            breached = list(st.get("breached_cycles") or ())
            shown = ", ".join(str(c) for c in breached[:20]) + (
                f" and {len(breached) - 20} more" if len(breached) > 20 else ""
            )
            parts.append(
                f'<tr class="{"bad" if breached else ""}" data-slo="{_e(name)}" '
                f'data-held="{st.get("held", 0)}" data-cycles="{st.get("cycles", 0)}">'
                f"<td>{_e(name)}</td><td>{_e(st.get('comparison'))} {_e(st.get('threshold'))}"
                f"</td><td class='num'>{st.get('cycles', 0)}</td>"
                f"<td class='num'>{st.get('held', 0)}</td>"
                f"<td class='{'no' if breached else 'ok'}'>{_e(shown) or 'none'}</td>"
                f"<td class='num'>{_e(st.get('worst'))}</td><td>{chart}</td></tr>"
            )
        parts.append("</tbody></table></div>")
    parts.append("</div></body></html>")
    return "".join(parts)
