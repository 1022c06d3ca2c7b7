"""Prometheus metrics of a results store (``GET /metrics`` on the page's server): per target,
its last run (start, end, verdict, exit status, gates, restores still owed, every phase's
figure against its budget) from ``STORE/<target>/history.jsonl``, and its lock and owed undos
as the recover CronJob's last check left them, with the last time a check found the lock held
by a runner that had died (``STORE/<target>/recover.json``, written by ``powercut recover
--status``).

The text exposition format, version 0.0.4. A target whose files cannot be read is counted
in ``powercut_store_read_errors`` (the page names the file and line), never dropped silently.
The alerts on these metrics: deploy/chart/files/alerts.yaml.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.report import history as hist

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
RECOVER_STATUS = "recover.json"

#: name -> (type, help), in the order they are written.
METRICS: dict[str, tuple[str, str]] = {
    "powercut_last_run_start_timestamp_seconds": ("gauge", "Start of the target's last run."),
    "powercut_last_run_end_timestamp_seconds": ("gauge", "End of the target's last run."),
    "powercut_last_run_verdict": (
        "gauge",
        "1 for the last run's verdict (passed, failed, broken).",
    ),
    "powercut_last_run_exit_code": (
        "gauge",
        "Exit status of the last run: 0 passed, 1 gate/scenario failed, 2 harness error, "
        "3 interrupted, 4 restore failed, 5 stop condition.",
    ),
    "powercut_last_run_gates": ("gauge", "Sign-off gates of the last run."),
    "powercut_last_run_gates_failed": ("gauge", "Sign-off gates the last run did not pass."),
    "powercut_last_run_restores_failed": (
        "gauge",
        "Disruptions still in place when the last run ended (undos owed).",
    ),
    "powercut_last_run_scenarios": ("gauge", "Scenarios of the last run by status."),
    "powercut_last_run_phase_seconds": ("gauge", "A phase's figure in the last run."),
    "powercut_last_run_phase_budget_seconds": ("gauge", "A phase's budget in the last run."),
    "powercut_last_run_phase_over_budget": ("gauge", "1 if the phase exceeded its budget."),
    "powercut_lock_held": (
        "gauge",
        "1 if the target's cluster lock (Lease) is held, as the last recover check left it.",
    ),
    "powercut_lock_holder_alive": (
        "gauge",
        "1 if the lock's holder renews it (a killed runner's lease runs out).",
    ),
    "powercut_recover_owed_undos": (
        "gauge",
        "Undos the target's journal still owed when the last recover check ended.",
    ),
    "powercut_recover_dead_holder_timestamp_seconds": (
        "gauge",
        "When a recover check last found the lock held by a runner that had stopped renewing "
        "it (killed mid-run).",
    ),
    "powercut_recover_exit_code": ("gauge", "Exit status of the last recover check."),
    "powercut_recover_checked_timestamp_seconds": ("gauge", "Time of the last recover check."),
    "powercut_store_read_errors": ("gauge", "Unreadable history lines or status files."),
}


@dataclass
class _Out:
    samples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, name: str, labels: dict[str, str], value: float) -> None:
        if math.isnan(value):
            return
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        self.samples.setdefault(name, []).append(f"{name}{{{text}}} {_number(value)}")

    def render(self) -> str:
        lines: list[str] = []
        for name, (kind, about) in METRICS.items():
            lines += [f"# HELP {name} {about}", f"# TYPE {name} {kind}"]
            lines += self.samples.get(name, [])
        return "\n".join(lines) + "\n"


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


def _ts(iso: str) -> float:
    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.nan


def _last_run(path: Path) -> tuple[hist.Run | None, int]:
    """The newest readable run of a history file and how many lines could not be read."""
    errors = 0
    best: hist.Run | None = None
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            if isinstance(doc, dict) and int(doc.get("schema_version", 0)) > hist.SCHEMA_VERSION:
                continue
            run = hist.run_from_json(doc, f"{path}:{n}")
        except (ValueError, TypeError, hist.HistoryError):
            errors += 1
            continue
        if best is None or run.run_id > best.run_id:
            best = run
    return best, errors


def _run_samples(out: _Out, target: str, run: hist.Run) -> None:
    t = {"target": target}
    out.add("powercut_last_run_start_timestamp_seconds", t, _ts(run.started))
    out.add("powercut_last_run_end_timestamp_seconds", t, _ts(run.finished))
    for verdict in hist.VERDICTS:
        out.add(
            "powercut_last_run_verdict", {**t, "verdict": verdict}, float(run.verdict == verdict)
        )
    if run.exit_code is not None:
        out.add("powercut_last_run_exit_code", t, float(run.exit_code))
    out.add("powercut_last_run_gates", t, float(len(run.gates)))
    out.add("powercut_last_run_gates_failed", t, float(sum(not g.passed for g in run.gates)))
    if run.restores_owed is not None:
        out.add("powercut_last_run_restores_failed", t, float(run.restores_owed))
    statuses: dict[str, int] = {}
    for s in run.scenarios:
        statuses[s.status] = statuses.get(s.status, 0) + 1
        for phase, p in s.phases.items():
            labels = {**t, "scenario": s.name, "phase": phase}
            out.add("powercut_last_run_phase_seconds", labels, p.value_s)
            if p.budget_s is not None:
                out.add("powercut_last_run_phase_budget_seconds", labels, p.budget_s)
                out.add("powercut_last_run_phase_over_budget", labels, float(p.over_budget))
    for status, count in sorted(statuses.items()):
        out.add("powercut_last_run_scenarios", {**t, "status": status}, float(count))


def _recover_samples(out: _Out, target: str, doc: dict[str, Any]) -> None:
    t = {"target": target}
    lock = doc.get("lock") or {}
    if isinstance(lock, dict) and "held" in lock:
        out.add("powercut_lock_held", t, float(bool(lock["held"])))
        out.add("powercut_lock_holder_alive", t, float(bool(lock.get("holder_alive"))))
    out.add("powercut_recover_owed_undos", t, float(doc.get("owed", math.nan)))
    out.add("powercut_recover_exit_code", t, float(doc.get("exit_code", math.nan)))
    out.add("powercut_recover_checked_timestamp_seconds", t, float(doc.get("checked", math.nan)))
    dead = doc.get("dead_holder")
    if isinstance(dead, dict):
        seen = float(dead.get("seen", math.nan))
        out.add("powercut_recover_dead_holder_timestamp_seconds", t, seen)


def _target_dirs(store: Path) -> Iterable[Path]:
    if not store.is_dir():
        return []
    return [
        d
        for d in sorted(store.iterdir())
        if d.is_dir() and ((d / hist.HISTORY_FILE).is_file() or (d / RECOVER_STATUS).is_file())
    ]


def render_metrics(store: Path) -> str:
    """The store's metrics in the Prometheus text format."""
    out = _Out()
    for d in _target_dirs(store):
        errors = 0
        if (d / hist.HISTORY_FILE).is_file():
            try:
                run, errors = _last_run(d / hist.HISTORY_FILE)
            except OSError:
                run, errors = None, 1
            if run is not None:
                _run_samples(out, d.name, run)
        if (d / RECOVER_STATUS).is_file():
            try:
                doc = json.loads((d / RECOVER_STATUS).read_text("utf-8"))
                if not isinstance(doc, dict):
                    raise ValueError("not a JSON object")
                _recover_samples(out, d.name, doc)
            except (OSError, ValueError, TypeError):
                errors += 1
        out.add("powercut_store_read_errors", {"target": d.name}, float(errors))
    return out.render()
