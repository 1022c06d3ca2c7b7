"""``powercut compare RUN_A RUN_B``: two runs side by side, as text and as one HTML file.

A run is named by its id in a target's history (``--store DIR --target NAME``; a unique
prefix is enough), by its run directory in a results store (``STORE/<target>/runs/<id>``,
whose record is read from the target's history), or by any directory holding an
``allure-results`` directory (or being one), whose record is built from the results.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from harness import __version__
from harness.errors import ConfigError
from harness.report.history import (
    HISTORY_FILE,
    RUNS_DIR,
    Phase,
    Run,
    Scenario,
    from_allure_results,
    read_history,
)


@dataclass(frozen=True)
class Row:
    scenario: str
    what: str  # a phase, "SLO <name>", "verdict", "duration"
    a: str
    b: str
    delta: str
    worse: bool = False
    model: str = ""  # Kubernetes' own bound for the phase (B's, else A's): "<= 57s"


def load_run(ref: str, *, store: Path | None = None, target: str | None = None) -> Run:
    """The run ``ref`` names (see the module's text); a ConfigError saying what was tried."""
    path = Path(ref)
    if path.is_dir():
        results = path / "allure-results" if (path / "allure-results").is_dir() else path
        if path.parent.name == RUNS_DIR and (path.parent.parent / HISTORY_FILE).is_file():
            found = read_history(path.parent.parent / HISTORY_FILE).find(path.name)
            if found is not None:
                return found
        if not any(results.glob("*-result.json")):
            raise ConfigError(
                "neither a run directory of a results store nor a directory with "
                "allure-results (no *-result.json here)",
                source=str(path),
            )
        return from_allure_results(
            results,
            run_id=path.name,
            target=target or "",
            started="",
            finished="",
            powercut_version="",
            inventory="",
        )
    if store is None or target is None:
        raise ConfigError(
            f"{ref!r} is not a directory; to name a run by its id give --store DIR and --target "
            "NAME",
            field="RUN",
        )
    history = read_history(Path(store) / target / HISTORY_FILE)
    found = history.find(ref)
    if found is None:
        ids = ", ".join(r.run_id for r in history.runs[-5:]) or "none"
        raise ConfigError(
            f"no run {ref!r} (or more than one starting so) in this history; the last: {ids}",
            source=str(history.path),
        )
    return found


def _num(v: float | None, unit: str = "s") -> str:
    return "" if v is None else f"{v:.1f}{unit}"


#: A phase is worse in B only when it moved beyond run-to-run noise: more than this share
#: of A's figure (the trends' default margin) and more than the floor; or when it newly
#: went past its budget or Kubernetes' own model of the cluster.
NOISE_PERCENT = 20.0
NOISE_FLOOR_S = 1.0


def phase_worse(pa: Phase | None, pb: Phase | None) -> bool:
    """B's phase is worse than A's: beyond noise, or newly past its budget or its model."""
    if pa is None or pb is None:
        return False
    d = pb.value_s - pa.value_s
    if d > max(NOISE_FLOOR_S, pa.value_s * NOISE_PERCENT / 100):
        return True
    return (pb.over_budget and not pa.over_budget) or (pb.deviation and not pa.deviation)


def _model(pa: Phase | None, pb: Phase | None) -> str:
    for p in (pb, pa):
        if p is not None and p.model_s is not None:
            return f"<={p.model_s:g}s" + (" DEV" if pb is not None and pb.deviation else "")
    return ""


def _delta(a: float | None, b: float | None) -> tuple[str, float | None]:
    if a is None or b is None:
        return "", None
    d = b - a
    pct = f" ({d / a * 100:+.0f}%)" if a > 0 else ""
    return f"{d:+.1f}s{pct}", d


def rows(a: Run, b: Run) -> list[Row]:
    """Per scenario (in B's order, then those only in A): verdict, duration, each phase and
    SLO. ``worse``: B's verdict is worse, a phase took longer beyond run-to-run noise or newly
    past its budget or its model (:func:`phase_worse`), or an SLO held in A only."""
    order = [s.name for s in b.scenarios] + [
        s.name for s in a.scenarios if b.scenario(s.name) is None
    ]
    rank = {"passed": 0, "skipped": 1, "failed": 2, "broken": 3}
    out: list[Row] = []
    for name in order:
        sa, sb = a.scenario(name), b.scenario(name)
        va = sa.status if sa else "-"
        vb = sb.status if sb else "-"
        out.append(
            Row(name, "verdict", va, vb, "", rank.get(vb, 0) > rank.get(va, 0) and sa is not None)
        )
        da = sa.duration_s if sa else None
        db = sb.duration_s if sb else None
        text, _ = _delta(da, db)
        out.append(Row(name, "duration", _num(da), _num(db), text, False))
        keys = list((sb or Scenario(name, "passed")).phases) + [
            k for k in (sa.phases if sa else {}) if not (sb and k in sb.phases)
        ]
        for key in keys:
            pa = sa.phases.get(key) if sa else None
            pb = sb.phases.get(key) if sb else None
            text, _d = _delta(pa.value_s if pa else None, pb.value_s if pb else None)
            budget = pb.budget_s if pb else (pa.budget_s if pa else None)
            suffix = f" / {budget:g}s" if budget is not None else ""
            out.append(
                Row(
                    name,
                    key,
                    _num(pa.value_s) + (suffix if pa else "") if pa else "-",
                    _num(pb.value_s) + (suffix if pb else "") if pb else "-",
                    text,
                    phase_worse(pa, pb),
                    _model(pa, pb),
                )
            )
        slos = list(sb.slos if sb else {}) + [
            k for k in (sa.slos if sa else {}) if not (sb and k in sb.slos)
        ]
        for key in slos:
            oa = sa.slos.get(key) if sa else None
            ob = sb.slos.get(key) if sb else None

            def show(o: object) -> str:
                if o is None:
                    return "-"
                ok = getattr(o, "ok", False)
                worst = getattr(o, "worst", None)
                return ("held" if ok else "BREACHED") + (
                    f" ({worst:.4g})" if worst is not None else ""
                )

            out.append(
                Row(
                    name,
                    f"SLO {key}",
                    show(oa),
                    show(ob),
                    "",
                    bool(oa and oa.ok and ob and not ob.ok),
                )
            )
    return out


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "~"


def compare_text(a: Run, b: Run, *, width: int = 120) -> str:
    """The two runs side by side, one line per figure (worse in B marked ``!``). The names
    are shortened to fit ``width``; the figures, the model and B - A never are."""
    table = rows(a, b)
    col = max([len(r.a) for r in table] + [len(r.b) for r in table] + [6])
    model_w = max([len(r.model) for r in table] + [5])
    delta_w = max([len(r.delta) for r in table] + [5])
    room = max(16, width - (2 + 1 + col + 1 + col + 1 + model_w + 2 + delta_w) - 1)
    name_w = min(40, max([len(r.scenario) for r in table] + [8]), room // 2)
    what_w = min(40, max([len(r.what) for r in table] + [5]), room - name_w)
    head = [
        f"A: {a.run_id} {a.verdict} ({a.started or '-'})",
        f"B: {b.run_id} {b.verdict} ({b.started or '-'})",
        "",
        f"  {'scenario':<{name_w}} {'what':<{what_w}} {'A':>{col}} {'B':>{col}} "
        f"{'model':>{model_w}}  B - A",
    ]
    lines = []
    last = ""
    for r in table:
        shown = r.scenario if r.scenario != last else ""
        last = r.scenario
        mark = "!" if r.worse else " "
        line = (
            f"{mark} {_cut(shown, name_w):<{name_w}} {_cut(r.what, what_w):<{what_w}} "
            f"{r.a:>{col}} {r.b:>{col}} {r.model:>{model_w}}  {r.delta}"
        )
        lines.append(line.rstrip())
    foot = [
        "",
        f"! worse in B: a worse verdict, a phase longer by more than {NOISE_PERCENT:g}% "
        f"(and {NOISE_FLOOR_S:g}s) or newly past its budget or the model (DEV: beyond "
        "Kubernetes' own model of the cluster), an SLO that held in A only",
    ]
    return "\n".join(head + lines + foot) + "\n"


def compare_html(a: Run, b: Run) -> str:
    """The same as one self-contained HTML page."""

    def e(x: object) -> str:
        return html.escape(str(x), quote=True)

    body = []
    last = ""
    for r in rows(a, b):
        shown = r.scenario if r.scenario != last else ""
        last = r.scenario
        body.append(
            f'<tr class="{"worse" if r.worse else ""}" data-scenario="{e(r.scenario)}" '
            f'data-what="{e(r.what)}"><td>{e(shown)}</td><td>{e(r.what)}</td>'
            f'<td class="n">{e(r.a)}</td><td class="n">{e(r.b)}</td>'
            f'<td class="n">{e(r.model)}</td><td class="n">{e(r.delta)}</td></tr>'
        )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>powercut compare {e(a.run_id)} {e(b.run_id)}</title><style>"
        "body{font:14px system-ui,sans-serif;margin:16px;color:#1f2328}"
        "table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #d8dee4;"
        "text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}"
        "tr.worse td{background:#fff1f0;color:#cf222e}.m{color:#57606a;font-size:12px}"
        "</style></head><body>"
        f"<h1>powercut compare</h1><p class='m'>powercut {e(__version__)}</p>"
        f"<p><b>A</b> {e(a.run_id)} ({e(a.target)}) {e(a.verdict)} &middot; started "
        f"{e(a.started or '-')} &middot; seed {e(a.seed)} &middot; powercut "
        f"{e(a.powercut_version or '-')}</p>"
        f"<p><b>B</b> {e(b.run_id)} ({e(b.target)}) {e(b.verdict)} &middot; started "
        f"{e(b.started or '-')} &middot; seed {e(b.seed)} &middot; powercut "
        f"{e(b.powercut_version or '-')}</p>"
        "<table><thead><tr><th>scenario</th><th>what</th><th>A</th><th>B</th><th>model</th>"
        "<th>B - A</th>"
        f"</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"<p class='m'>red: worse in B (a worse verdict, a phase longer by more than "
        f"{NOISE_PERCENT:g}% and {NOISE_FLOOR_S:g}s or newly past its budget or Kubernetes' own "
        "model of the cluster, an SLO that held in A only)</p></body></html>"
    )
