"""The sign-off page: the first page of the report, for a release review.

It answers, from one run's record (:class:`harness.report.history.Run`), its gates and the
target's history: the verdict and every gate; one row per failure case (verdict, severity,
duration, its phase closest to budget, its SLOs and data), grouped by epic and feature;
every phase against its budget, closest first, with the last runs' figures as a small chart
and a regression flag; every SLO's worst value and its trend; the seed, the inventory and
the powercut version. A self-contained HTML page without scripts (Allure shows an HTML
attachment in a sandboxed frame): each scenario's name carries ``data-tr``, the Allure test
result it leads to, which the report's own page script follows (see
:data:`harness.report.html.OPEN_SIGNOFF_SCRIPT`).

Every figure also stands in a ``data-*`` attribute with its full precision, so a browser
test can compare what is shown with the results (``tests/integration``).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.report.gates import Evaluation, Regression, TrendsConfig
from harness.report.history import Phase, Run, Scenario
from harness.report.trends import phase_series, slo_series, sparkline_svg

SEVERITY_ORDER = {"blocker": 0, "critical": 1, "normal": 2, "minor": 3, "trivial": 4}
STATUS_ORDER = {"broken": 0, "failed": 1, "skipped": 2, "passed": 3}
#: Phase rows shown with their charts; the rest at or above :data:`MORE_FROM` of their budget
#: (or regressed) are listed behind "more phases", without charts; those below are counted
#: (each scenario's page has all of its phases).
TOP_PHASES = 25
MORE_FROM = 0.5

#: Every rule under ``.pcso`` (the page's wrapper), so the page keeps its looks and leaves
#: the report's alone when the report's script shows it inside the report's own page.
_CSS = """
.pcso{font:14px system-ui,-apple-system,Segoe UI,sans-serif;color:#1f2328;margin:0 4px 24px}
.pcso h1{font-size:20px;margin:8px 0 4px}.pcso h2{font-size:16px;margin:22px 0 6px}
.pcso h3{font-size:14px;margin:14px 0 4px;color:#57606a}
.pcso .meta{color:#57606a;font-size:12px;margin-bottom:8px}.pcso .meta b{color:#1f2328}
.pcso .badge{display:inline-block;padding:2px 10px;border-radius:10px;color:#fff;
font-weight:700}
.pcso .passed{background:#1a7f37}.pcso .failed{background:#cf222e}
.pcso .broken{background:#bc4c00}.pcso .skipped{background:#6e7781}
.pcso table{border-collapse:collapse;width:100%;margin:4px 0}
.pcso th,.pcso td{padding:3px 8px;border-bottom:1px solid #d8dee4;text-align:left;
vertical-align:middle}
.pcso th{font-size:12px;color:#57606a;font-weight:600}
.pcso td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.pcso tr.bad td{background:#fff1f0}.pcso .over{color:#cf222e;font-weight:700}
.pcso .ok{color:#1a7f37;font-weight:700}.pcso .no{color:#cf222e;font-weight:700}
.pcso .reg{color:#cf222e;font-weight:700}.pcso .dim{color:#8c959f}
.pcso a.sc{color:#0969da;text-decoration:none;cursor:pointer}
.pcso a.sc:hover{text-decoration:underline}
.pcso .bar{display:inline-block;width:80px;height:8px;background:#eaeef2;vertical-align:middle}
.pcso .bar i{display:block;height:8px;background:#2da44e}.pcso .bar i.o{background:#cf222e}
.pcso details summary{cursor:pointer;color:#0969da;margin:6px 0}
"""


@dataclass(frozen=True)
class PhaseRow:
    scenario: Scenario
    phase: str
    figure: Phase
    trend: tuple[float, ...]
    previous: float | None
    regression: Regression | None


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _s(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.0f}%"


def _bar(ratio: float | None) -> str:
    if ratio is None:
        return ""
    width = min(100.0, ratio * 100)
    over = "o" if ratio > 1 else ""
    return f'<span class="bar"><i class="{over}" style="width:{width:.0f}%"></i></span>'


def _scenario_link(s: Scenario, tr_ids: Mapping[str, str]) -> str:
    tr = tr_ids.get(s.name, "")
    return f'<a class="sc" data-tr="{_e(tr)}" href="#{_e(tr)}">{_e(s.name)}</a>'


def closest_phase(s: Scenario) -> tuple[str, Phase] | None:
    """The phase closest to (or furthest over) its budget; None when none has a budget."""
    budgeted = [(k, p) for k, p in s.phases.items() if p.ratio is not None]
    if not budgeted:
        return None
    return max(budgeted, key=lambda kp: (kp[1].ratio or 0.0, kp[0]))


def phase_rows(
    run: Run, previous: Sequence[Run], cfg: TrendsConfig, regressions: Sequence[Regression]
) -> list[PhaseRow]:
    """Every phase with a budget, closest to (or furthest over) its budget first."""
    window = list(previous)[-(cfg.runs - 1) :] if cfg.runs > 1 else []
    flagged = {(r.scenario, r.phase): r for r in regressions}
    rows = []
    for s in run.scenarios:
        for key, p in s.phases.items():
            if p.ratio is None:
                continue
            series = [pt.value for pt in phase_series(window, s.name, key)]
            rows.append(
                PhaseRow(
                    s,
                    key,
                    p,
                    (*series, p.value_s),
                    series[-1] if series else None,
                    flagged.get((s.name, key)),
                )
            )
    rows.sort(key=lambda r: (-(r.figure.ratio or 0.0), r.scenario.name, r.phase))
    return rows


def _delta(now: float, before: float | None) -> str:
    if before is None:
        return '<span class="dim">new</span>'
    d = now - before
    pct = f" ({d / before * 100:+.0f}%)" if before > 0 else ""
    return f"{d:+.1f}s{pct}"


def _model_cell(p: Phase) -> str:
    """The model's bound with its setting as the tooltip; a deviation flagged apart."""
    if p.model_s is None:
        return '<td class="num dim" title="not modelled">-</td>'
    flag = (
        ' <span class="reg" title="longer than Kubernetes\' own model of this cluster allows: '
        'a bug, an overloaded control plane or a misconfiguration">deviation</span>'
        if p.deviation
        else ""
    )
    return (
        f'<td class="num" data-model="{p.model_s}" title="{_e(p.model_setting)}">'
        f"&le; {p.model_s:g}{flag}</td>"
    )


def _phase_table(
    rows: Sequence[PhaseRow], tr_ids: Mapping[str, str], *, charts: bool = True
) -> str:
    out = [
        "<table><thead><tr><th>scenario</th><th>phase</th><th>measured (s)</th>"
        "<th>model (s)</th><th>budget (s)</th><th>% of budget</th><th></th><th>last runs</th>"
        "<th>vs previous run</th></tr></thead><tbody>"
    ]
    for r in rows:
        p = r.figure
        over = p.over_budget
        flag = (
            f' <span class="reg" title="{_e(r.regression.describe())}">regressed</span>'
            if r.regression
            else ""
        )
        chart = (
            sparkline_svg(
                r.trend,
                budget=p.budget_s,
                model=p.model_s,
                title=f"{r.phase}: last {len(r.trend)} runs",
                flagged_last=r.regression is not None,
            )
            if charts
            else ""
        )
        lower = (
            ' <span class="dim" title="its end was not seen">&ge;</span>' if not p.complete else ""
        )
        out.append(
            f'<tr class="{"bad" if over or r.regression or p.deviation else ""}" '
            f'data-scenario="{_e(r.scenario.name)}" '
            f'data-phase="{_e(r.phase)}" data-value="{p.value_s}" data-budget="{p.budget_s}">'
            f"<td>{_scenario_link(r.scenario, tr_ids)}</td><td>{_e(r.phase)}</td>"
            f'<td class="num{" over" if over else ""}">{lower}{_s(p.value_s)}</td>'
            f"{_model_cell(p)}"
            f'<td class="num">{p.budget_s:g}</td>'
            f'<td class="num pct{" over" if over else ""}">{_pct(p.ratio)}</td>'
            f"<td>{_bar(p.ratio)}</td>"
            f"<td>{chart}</td>"
            f'<td class="num">{_delta(p.value_s, r.previous)}{flag}</td></tr>'
        )
    out.append("</tbody></table>")
    return "".join(out)


def _scenario_row(
    s: Scenario,
    feature: str,
    last: Run | None,
    regressed: set[str],
    tr_ids: Mapping[str, str],
) -> str:
    closest = closest_phase(s)
    if closest:
        name, p = closest
        phase = f"{_e(name)}: {_s(p.value_s)} / {p.budget_s:g}s"
        pct = f'<span class="{"over" if p.over_budget else ""}">{_pct(p.ratio)}</span>'
    else:
        phase, pct = '<span class="dim">-</span>', ""
    held = sum(1 for v in s.slos.values() if v.ok)
    slos = (
        f'<span class="{"ok" if held == len(s.slos) else "no"}">{held}/{len(s.slos)} held</span>'
        if s.slos
        else '<span class="dim">-</span>'
    )
    data = {True: '<span class="ok">read back</span>', False: '<span class="no">LOST</span>'}.get(
        s.data_ok,  # type: ignore[arg-type]
        '<span class="dim">-</span>',
    )
    before = last.scenario(s.name) if last else None
    if before is None:
        change = '<span class="dim">new</span>' if last else '<span class="dim">first run</span>'
    elif before.status != s.status:
        change = f"was {_e(before.status)}"
    else:
        change = "same verdict"
    if s.name in regressed:
        change += ' <span class="reg">regressed</span>'
    return (
        f'<tr class="{"bad" if s.status in ("failed", "broken") else ""}" '
        f'data-scenario="{_e(s.name)}" data-status="{_e(s.status)}" '
        f'data-duration="{s.duration_s if s.duration_s is not None else ""}">'
        f"<td>{_e(feature)}</td><td>{_scenario_link(s, tr_ids)}</td>"
        f'<td><span class="badge {_e(s.status)}">{_e(s.status.upper())}</span></td>'
        f"<td>{_e(s.severity)}</td>"
        f'<td class="num">{_s(s.duration_s)}s</td><td>{phase}</td>'
        f'<td class="num">{pct}</td><td>{slos}</td><td>{data}</td>'
        f"<td>{change}</td></tr>"
    )


_SCENARIO_HEAD = (
    "<table><thead><tr><th>feature</th><th>scenario</th><th>verdict</th>"
    "<th>severity</th><th>duration</th><th>closest to budget</th><th>% of budget</th>"
    "<th>SLOs</th><th>data</th><th>vs previous run</th></tr></thead><tbody>"
)


def _scenario_rows(
    run: Run, previous: Sequence[Run], regressions: Sequence[Regression], tr_ids: Mapping[str, str]
) -> str:
    """What did not pass first (worst verdict first), then every passed scenario grouped by
    epic, then feature."""
    last = previous[-1] if previous else None
    regressed = {r.scenario for r in regressions}

    def order(s: Scenario) -> tuple[int, int, str]:
        return (STATUS_ORDER.get(s.status, 0), SEVERITY_ORDER.get(s.severity, 2), s.name)

    out = []
    not_passed = sorted((s for s in run.scenarios if s.status != "passed"), key=order)
    if not_passed:
        out.append(f'<h3 id="not-passed">Did not pass ({len(not_passed)})</h3>')
        out.append(_SCENARIO_HEAD)
        for s in not_passed:
            feature = f"{s.epic or '(no epic)'} / {s.feature or '(no feature)'}"
            out.append(_scenario_row(s, feature, last, regressed, tr_ids))
        out.append("</tbody></table>")
    groups: dict[str, dict[str, list[Scenario]]] = {}
    for s in run.scenarios:
        if s.status == "passed":
            groups.setdefault(s.epic or "(no epic)", {}).setdefault(
                s.feature or "(no feature)", []
            ).append(s)
    if not_passed and groups:
        out.append(f"<h3>Passed ({sum(len(f) for g in groups.values() for f in g.values())})</h3>")
    for epic in sorted(groups):
        out.append(f"<h3>{_e(epic)}</h3>")
        out.append(_SCENARIO_HEAD)
        for feature in sorted(groups[epic]):
            for s in sorted(groups[epic][feature], key=order):
                out.append(_scenario_row(s, feature, last, regressed, tr_ids))
        out.append("</tbody></table>")
    return "".join(out)


def _slo_table(
    run: Run, previous: Sequence[Run], cfg: TrendsConfig, tr_ids: Mapping[str, str]
) -> str:
    window = list(previous)[-(cfg.runs - 1) :] if cfg.runs > 1 else []
    rows = [(s, k, v) for s in run.scenarios for k, v in s.slos.items()]
    if not rows:
        return '<p class="dim">No scenario checked an SLO in this run.</p>'
    rows.sort(key=lambda r: (r[2].ok, r[0].name, r[1]))
    out = [
        "<table><thead><tr><th>scenario</th><th>SLO</th><th>verdict</th><th>worst</th>"
        "<th>last runs (worst)</th></tr></thead><tbody>"
    ]
    for s, k, v in rows:
        series = [pt.value for pt in slo_series(window, s.name, k)]
        if v.worst is not None:
            series.append(v.worst)
        out.append(
            f'<tr class="{"" if v.ok else "bad"}" data-scenario="{_e(s.name)}" data-slo="{_e(k)}" '
            f'data-ok="{str(v.ok).lower()}" data-worst="{"" if v.worst is None else v.worst}">'
            f"<td>{_scenario_link(s, tr_ids)}</td><td>{_e(k)}</td>"
            f'<td class="{"ok" if v.ok else "no"}">{"held" if v.ok else "BREACHED"}</td>'
            f'<td class="num">{"" if v.worst is None else f"{v.worst:.4g}"}</td>'
            f"<td>{sparkline_svg(series, title=f'{k}: last {len(series)} runs')}</td></tr>"
        )
    out.append("</tbody></table>")
    return "".join(out)


def signoff_html(
    run: Run,
    *,
    previous: Sequence[Run] = (),
    evaluation: Evaluation | None = None,
    regressions: Sequence[Regression] = (),
    trends: TrendsConfig | None = None,
    tr_ids: Mapping[str, str] | None = None,
    signoff_source: str = "",
    title: str = "",
) -> str:
    """The sign-off page of ``run`` (``previous``: the target's earlier runs, oldest first;
    ``title``: what the run is, shown under the verdict, e.g. which set of scenarios)."""
    cfg = trends or TrendsConfig()
    ids = dict(tr_ids or {})
    ev = evaluation or Evaluation()
    counts = {st: sum(1 for s in run.scenarios if s.status == st) for st in STATUS_ORDER}
    counted = ", ".join(f"{n} {st}" for st, n in counts.items() if n)
    meta = [
        ("target", run.target),
        ("run", run.run_id),
        ("started", run.started),
        ("finished", run.finished),
        ("seed", "" if run.seed is None else run.seed),
        ("inventory", run.inventory),
        ("powercut", run.powercut_version),
    ]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Sign-off</title>"
        f'<style>{_CSS}</style></head><body><div class="pcso" id="signoff">',
        f'<h1>Sign-off: <span id="verdict" class="badge {_e(run.verdict)}">'
        f"{_e(run.verdict.upper())}</span> "
        f"{_e(run.target)}</h1>",
        f'<div class="meta" id="title"><b>{_e(title)}</b></div>' if title else "",
        '<div class="meta" id="meta">'
        + " &middot; ".join(f'{k} <b data-key="{k}">{_e(v)}</b>' for k, v in meta)
        + "</div>",
        f'<div class="meta">{len(run.scenarios)} scenarios: {_e(counted)}'
        + (
            f" &middot; compared with {len(previous)} earlier run(s) of this target"
            if previous
            else " &middot; the first run of this target in its history"
        )
        + "</div>",
        "<h2>Gates</h2>",
    ]
    if ev.results:
        parts.append(
            '<table id="gates"><thead><tr><th>gate</th><th>verdict</th><th>detail</th></tr>'
            "</thead><tbody>"
        )
        for g in ev.results:
            parts.append(
                f'<tr class="{"" if g.passed else "bad"}" data-gate="{_e(g.name)}" '
                f'data-passed="{str(g.passed).lower()}">'
                f"<td>{_e(g.name)}</td>"
                f'<td class="{"dim" if not g.judged else "ok" if g.passed else "no"}">'
                f"{'not judged' if not g.judged else 'passed' if g.passed else 'FAILED'}</td>"
                f"<td>{_e(g.detail)}</td></tr>"
            )
        parts.append("</tbody></table>")
        parts.append(
            f'<div class="meta">rules: '
            f"{_e(signoff_source or 'the defaults (no sign-off file)')}</div>"
        )
    else:
        parts.append('<p class="dim">No gates.</p>')
    parts.append("<h2>Failure cases</h2>")
    parts.append(f'<div id="scenarios">{_scenario_rows(run, previous, regressions, ids)}</div>')
    rows = phase_rows(run, previous, cfg, regressions)
    parts.append(
        f"<h2>Phases against their budgets, closest first</h2>"
        f'<div class="meta">{len(rows)} phases with a budget; a phase has regressed when it is '
        f"beyond the p95 of its previous {cfg.baseline_runs} runs' figures by more than "
        f"{cfg.margin_percent:g}% (with at least {cfg.min_runs} of them); charts: the last "
        f"{cfg.runs} runs, the dashed line is the budget, the dotted one the model. Model: "
        "the most Kubernetes' own settings of this cluster allow (hover for the setting and "
        "where it was read); a phase beyond it is a deviation, apart from a budget miss "
        "(docs/budgets.md)</div>"
    )
    parts.append(f'<div id="phases">{_phase_table(rows[:TOP_PHASES], ids)}</div>')
    rest = rows[TOP_PHASES:]
    more = [
        r
        for r in rest
        if (r.figure.ratio or 0.0) >= MORE_FROM or r.regression or r.figure.deviation
    ]
    if more:
        parts.append(
            f"<details><summary>{len(more)} more phases at or above {MORE_FROM:.0%} of their "
            f"budget</summary>"
            f'<div id="more-phases">{_phase_table(more, ids, charts=False)}</div></details>'
        )
    if len(rest) > len(more):
        parts.append(
            f'<p class="dim">{len(rest) - len(more)} more phases under {MORE_FROM:.0%} of their '
            "budget: in their scenarios' pages</p>"
        )
    parts.append("<h2>SLOs</h2>")
    parts.append(f'<div id="slos">{_slo_table(run, previous, cfg, ids)}</div>')
    parts.append("</div></body></html>")
    return "".join(parts)
