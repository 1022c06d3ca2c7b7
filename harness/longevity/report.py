"""Everything a longevity run directory shows, rebuilt from ``cycles.jsonl`` alone.

:func:`write_report` writes, next to the JSONL:

* ``stats.json`` (:func:`harness.longevity.stats.compute_stats`);
* ``cycles.csv``: one row per cycle (number, group, nodes, status, start, duration, every
  phase in seconds, misses, incomplete phases, reason, and per SLO whether it held and its
  worst value: ``slo_<name>_held``, ``slo_<name>_worst``);
* ``plots/*.png`` (:mod:`harness.longevity.plots`);
* ``allure-results/``: one Allure result per cycle (its phases as steps and as
  ``"<phase> (s)"`` / ``"<phase> budget (s)"`` parameters, so ``powercut report`` and the
  text summary show them; failed cycles carry their record as an attachment) and a summary
  result ("Longevity on <inventory>") carrying the statistics, the CSV and the plots. The
  summary's ``historyId`` is stable per inventory, so the nightly HTML report
  (``powercut report DIR/allure-results --previous LAST``) shows its trend;
  ``environment.properties`` and ``categories.json`` come from :mod:`harness.report`, and
  so does the sign-off page the report opens on (:mod:`harness.report.longevity_page`:
  per-phase p50/p95/p99 against budgets, the cycles that missed, each SLO's worst value per
  cycle).

It is what the engine calls at the end of a run and what ``powercut longevity --report DIR``
runs on its own (after a crash, or to re-render with a newer powercut).
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson

from harness import __version__
from harness.longevity.records import CYCLES_FILE, PHASES, CycleRecord, RunLog, read_log
from harness.longevity.stats import compute_stats

__all__ = [
    "ALLURE_DIR",
    "CSV_FILE",
    "STATS_FILE",
    "ReportFiles",
    "write_allure",
    "write_csv",
    "write_report",
]

log_ = logging.getLogger(__name__)

STATS_FILE = "stats.json"
CSV_FILE = "cycles.csv"
ALLURE_DIR = "allure-results"
_NS = uuid.UUID("6f1c2f0e-4a52-4f0b-9a53-3f5e7f2d9c11")


@dataclass
class ReportFiles:
    stats: Path
    csv: Path
    plots: list[Path] = field(default_factory=list)
    allure: Path | None = None
    stats_data: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _slo_cells(c: CycleRecord, names: Sequence[str]) -> list[str]:
    cells: list[str] = []
    for name in names:
        v = (c.detail.get("slos") or {}).get(name) or {}
        held = v.get("held")
        worst = v.get("worst")
        cells.append("" if held is None else ("yes" if held else "no"))
        cells.append("" if worst is None else str(worst))
    return cells


def write_csv(path: Path, cycles: Sequence[CycleRecord]) -> Path:
    names = sorted({n for c in cycles for n in (c.detail.get("slos") or {})})
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "cycle",
            "group",
            "nodes",
            "status",
            "started_at",
            "duration_s",
            *(f"{p}_s" for p in PHASES),
            "misses",
            "incomplete",
            "reason",
            *(f"slo_{n}_{what}" for n in names for what in ("held", "worst")),
        ]
    )
    for c in sorted(cycles, key=lambda c: c.cycle):
        w.writerow(
            [
                c.cycle,
                c.group,
                " ".join(c.nodes),
                c.status,
                _iso(c.started_at),
                f"{c.duration_s:.3f}",
                *("" if (v := c.phases.get(p)) is None else f"{v:.3f}" for p in PHASES),
                ";".join(c.misses),
                ";".join(c.incomplete),
                c.reason,
                *_slo_cells(c, names),
            ]
        )
    _write_bytes(path, buf.getvalue().encode())
    return path


# -- Allure ------------------------------------------------------------------------------


def _ms(ts: float) -> int:
    return int(ts * 1000)


def _param(name: str, value: object) -> dict[str, str]:
    return {"name": name, "value": str(value)}


def _fmt(v: float) -> str:
    return f"{v:.3f}"


def _labels(suite: str, sub: str) -> list[dict[str, str]]:
    return [
        {"name": "parentSuite", "value": "longevity"},
        {"name": "suite", "value": suite},
        {"name": "subSuite", "value": sub},
        {"name": "feature", "value": "Longevity"},
        {"name": "story", "value": "Fail one third of the workers cyclically"},
        {"name": "tag", "value": "longevity"},
        {"name": "framework", "value": "powercut"},
        {"name": "language", "value": "python"},
    ]


def _cycle_steps(c: CycleRecord) -> list[dict[str, Any]]:
    power = c.detail.get("power") or {}
    off_at = power.get("off_at") if isinstance(power.get("off_at"), int | float) else None
    on_at = power.get("on_at") if isinstance(power.get("on_at"), int | float) else None
    steps = []
    for phase in PHASES:
        v = c.phases.get(phase)
        if v is None:
            continue
        budget = c.budgets.get(phase)
        start = on_at if phase == "cleanup" and on_at is not None else (off_at or c.started_at)
        note = " (did not complete)" if phase in c.incomplete else ""
        over = phase in c.misses
        steps.append(
            {
                "name": f"{phase}: {v:.1f}s" + (f" / budget {budget:g}s" if budget else "") + note,
                "status": "failed" if over else "passed",
                "stage": "finished",
                "start": _ms(start),
                "stop": _ms(start + v),
                "statusDetails": {"message": f"{phase} {v:.1f}s over budget {budget:g}s"}
                if over and budget is not None
                else {},
                "parameters": [
                    _param(f"{phase} (s)", _fmt(v)),
                    *([_param(f"{phase} budget (s)", f"{budget:g}")] if budget else []),
                ],
                "steps": [],
                "attachments": [],
            }
        )
    for name, v in (c.detail.get("slos") or {}).items():
        held = v.get("held")
        objective = f"{v.get('comparison')} {v.get('threshold')}"
        if held is None:
            title, status = f"SLO {name}: not evaluated ({v.get('error')})", "broken"
        else:
            verdict = "held" if held else f"BREACHED {v.get('breaches')} time(s)"
            title = f"SLO {name} ({objective}): {verdict}, worst {v.get('worst')}"
            status = "passed" if held else "failed"
        steps.append(
            {
                "name": title,
                "status": status,
                "stage": "finished",
                "start": _ms(c.started_at),
                "stop": _ms(c.ended_at),
                "statusDetails": {},
                "parameters": [_param(f"SLO {name} worst", str(v.get("worst")))],
                "steps": [],
                "attachments": [],
            }
        )
    return steps


def _cycle_result(
    c: CycleRecord, suite: str, run_key: str, results: Path, out: Path
) -> dict[str, Any]:
    key = f"{run_key}/cycle/{c.cycle}"
    rid = str(uuid.uuid5(_NS, key))
    params = [_param("group", c.group), _param("nodes", ", ".join(c.nodes))]
    for phase in PHASES:
        v = c.phases.get(phase)
        if v is None:
            continue
        params.append(_param(f"{phase} (s)", _fmt(v)))
        if phase in c.budgets:
            params.append(_param(f"{phase} budget (s)", f"{c.budgets[phase]:g}"))
    status = {"passed": "passed", "missed": "failed", "failed": "failed"}[c.status]
    attachments: list[dict[str, str]] = []
    if c.status != "passed":
        src = f"{uuid.uuid5(_NS, key + '/record')}-attachment.json"
        _write_bytes(results / src, orjson.dumps(c.to_json(), option=orjson.OPT_INDENT_2))
        attachments.append({"name": "cycle record", "source": src, "type": "application/json"})
        if c.timeline and (out / c.timeline).is_file():
            src = f"{uuid.uuid5(_NS, key + '/timeline')}-attachment.json"
            shutil.copyfile(out / c.timeline, results / src)
            attachments.append({"name": "timeline", "source": src, "type": "application/json"})
    message = ""
    if c.status == "failed":
        message = f"steady state not restored: {c.reason}"
    elif c.status == "missed":
        message = f"budget missed: {c.reason}"
    history = hashlib.sha256(f"powercut-longevity/{suite}/cycle-{c.cycle}".encode()).hexdigest()
    return {
        "uuid": rid,
        "historyId": history[:32],
        "testCaseId": history[32:],
        "fullName": f"longevity.{suite}.cycle-{c.cycle:06d}",
        "name": f"cycle {c.cycle}: fail {c.group} ({', '.join(c.nodes)})",
        "status": status,
        "statusDetails": {"message": message} if message else {},
        "stage": "finished",
        "description": f"Cycle {c.cycle} of the longevity run: power off {', '.join(c.nodes)} "
        "at once, measure every phase, power on, clean up.",
        "start": _ms(c.started_at),
        "stop": _ms(c.ended_at),
        "labels": _labels(suite, c.group),
        "parameters": params,
        "links": [],
        "steps": _cycle_steps(c),
        "attachments": attachments,
    }


def _summary_result(
    log: RunLog,
    stats: Mapping[str, Any],
    suite: str,
    results: Path,
    files: Sequence[tuple[str, Path, str]],
) -> dict[str, Any]:
    cycles = log.cycles
    run = stats.get("run") or {}
    statuses = run.get("statuses") or {}
    params = [_param("cycles", len(cycles))]
    for s in ("passed", "missed", "failed"):
        params.append(_param(f"cycles {s}", statuses.get(s, 0)))
    for phase, st in (stats.get("phases") or {}).items():
        params.append(_param(f"{phase} p95 (s)", _fmt(st["p95"])))
        if st.get("budget") is not None:
            params.append(_param(f"{phase} p95 budget (s)", f"{st['budget']:g}"))
        params.append(_param(f"{phase} max (s)", _fmt(st["max"])))
        params.append(_param(f"{phase} misses", st["budget_misses"]))
    attachments = []
    for name, path, mime in files:
        ext = path.suffix.lstrip(".") or "txt"
        src = f"{uuid.uuid5(_NS, f'{suite}/summary/{path.name}')}-attachment.{ext}"
        shutil.copyfile(path, results / src)
        attachments.append({"name": name, "source": src, "type": mime})
    bad = statuses.get("missed", 0) + statuses.get("failed", 0)
    status = "passed" if cycles and not bad else ("failed" if cycles else "skipped")
    message = ""
    if bad:
        worst = sorted(
            ((p, n) for p, n in (run.get("phase_misses") or {}).items() if n),
            key=lambda kv: -kv[1],
        )
        shown = ", ".join(f"{p} {n}x" for p, n in worst) or "see the cycles"
        message = (
            f"{bad} of {len(cycles)} cycles missed a budget or failed to recover "
            f"(budget misses: {shown})"
        )
    history = hashlib.sha256(f"powercut-longevity/{suite}/summary".encode()).hexdigest()
    start = min((c.started_at for c in cycles), default=0.0)
    stop = max((c.ended_at for c in cycles), default=0.0)
    return {
        "uuid": str(uuid.uuid5(_NS, f"{suite}/{run.get('run_id')}/summary")),
        "historyId": history[:32],
        "testCaseId": history[32:],
        "fullName": f"longevity.{suite}.summary",
        "name": f"Longevity on {suite}: {len(cycles)} cycles",
        "status": status,
        "statusDetails": {"message": message} if message else {},
        "stage": "finished",
        "description": f"Stopped: {run.get('stop_reason') or 'still running or crashed'}",
        "start": _ms(start),
        "stop": _ms(stop),
        "labels": _labels(suite, "summary"),
        "parameters": params,
        "links": [],
        "steps": [],
        "attachments": attachments,
    }


def _fraction(value: object) -> str:
    if not isinstance(value, int | float):
        return ""
    near = Fraction(value).limit_denominator(20)
    return str(near) if abs(float(near) - value) < 1e-3 else f"{value:.3g}"


def write_allure(
    out: Path,
    log: RunLog,
    stats: Mapping[str, Any],
    files: Sequence[tuple[str, Path, str]] = (),
) -> Path:
    """Write ``out/allure-results`` anew (see the module docstring)."""
    from harness.report.allure_env import write_categories, write_environment

    results = out / ALLURE_DIR
    if results.exists():
        shutil.rmtree(results)
    results.mkdir(parents=True)
    start = log.start or {}
    suite = str(start.get("inventory_name") or "cluster")
    run_key = f"{suite}/{start.get('run_id')}"
    for c in log.cycles:
        data = _cycle_result(c, suite, run_key, results, out)
        _write_bytes(results / f"{data['uuid']}-result.json", orjson.dumps(data))
    summary = _summary_result(log, stats, suite, results, files)
    _write_bytes(results / f"{summary['uuid']}-result.json", orjson.dumps(summary))
    opts = start.get("options") or {}
    write_environment(
        results,
        {
            "powercut": __version__,
            "inventory": start.get("inventory") or "",
            "Kubernetes context": start.get("context") or "",
            "failure groups": ", ".join(
                f"{g['name']}={'+'.join(g['nodes'])}" for g in start.get("groups") or ()
            ),
            "fraction": _fraction(opts.get("fraction")),
            "outage (s)": opts.get("outage_s", ""),
            "protocol": opts.get("protocol") or "inventory",
            "cycles": len(log.cycles),
        },
    )
    write_categories(results)
    from harness.report.longevity_page import longevity_html
    from harness.report.stage import add_signoff

    missed = [(c.cycle, c.status, c.reason) for c in log.cycles if c.status != "passed"]
    add_signoff(
        results,
        longevity_html(stats, sorted(missed)),
        key=f"{suite}/{start.get('run_id')}/signoff",
        timestamp_ms=_ms(float(start.get("at") or 0.0)),
    )
    return results


def write_report(out: Path, *, plots: bool = True, allure: bool = True) -> ReportFiles:
    """Rebuild ``stats.json``, ``cycles.csv``, the plots and the Allure results of ``out``."""
    log = read_log(out / CYCLES_FILE)
    stats = compute_stats(log)
    stats_path = out / STATS_FILE
    _write_bytes(stats_path, orjson.dumps(stats, option=orjson.OPT_INDENT_2))
    csv_path = write_csv(out / CSV_FILE, log.cycles)
    files = ReportFiles(stats_path, csv_path, stats_data=stats)
    if plots and log.cycles:
        try:
            from harness.longevity.plots import write_plots

            title = str((log.start or {}).get("inventory_name") or "")
            files.plots = write_plots(out, log.cycles, stats, title=title)
        except Exception as exc:  # the statistics and Allure results still count
            log_.exception("could not draw the plots of %s", out)
            files.problems.append(f"plots not drawn: {type(exc).__name__}: {exc}")
    if allure:
        attach = [
            ("stats.json", stats_path, "application/json"),
            ("cycles.csv", csv_path, "text/csv"),
        ]
        attach.extend((p.stem, p, "image/png") for p in files.plots)
        files.allure = write_allure(out, log, stats, attach)
    return files
