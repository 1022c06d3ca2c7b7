"""Statistics of a longevity run, from its cycle records alone.

Per phase, per group, per node (``not_ready``), per workload (``recovery``), per service
(``service_outage``) and per volume (``volume_reattach``): count, min, p50, p95, p99, max,
mean (:mod:`harness.stats`, nearest-rank percentiles, so every figure is a duration that was
really observed), the budget, the budget misses and how many samples are lower bounds
(phases that did not complete: their value is the time waited).

Budget misses are counted as the cycles recorded them (a resumed run with other budgets
keeps the judgement each cycle got); the ``budget`` shown is the latest one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.longevity.records import PHASE_DOCS, PHASES, CycleRecord, RunLog
from harness.stats import PhaseStats, format_table, phase_stats

__all__ = ["STATS_SCHEMA", "compute_stats", "phase_table", "stats_of"]

STATS_SCHEMA = 1


def stats_of(
    name: str,
    samples: Sequence[tuple[float, bool, bool]],
    budget: float | None,
) -> dict[str, Any] | None:
    """Statistics of ``(value, missed, incomplete)`` samples, or None without samples."""
    if not samples:
        return None
    s = phase_stats(name, [v for v, _, _ in samples], budget)
    out: dict[str, Any] = {
        "count": s.count,
        "min": round(s.min, 3),
        "p50": round(s.p50, 3),
        "p95": round(s.p95, 3),
        "p99": round(s.p99, 3),
        "max": round(s.max, 3),
        "mean": round(s.mean, 3),
        "budget": budget,
        "budget_misses": sum(1 for _, missed, _ in samples if missed),
        "incomplete": sum(1 for _, _, inc in samples if inc),
    }
    return out


Samples = list[tuple[float, bool, bool]]


def _collect(cycles: Sequence[CycleRecord]) -> dict[str, Samples]:
    """Per phase, ``(value, missed, incomplete)`` of every cycle that has the phase."""
    out: dict[str, Samples] = {p: [] for p in PHASES}
    for c in cycles:
        misses, incomplete = c.misses, c.incomplete
        for phase, v in c.phases.items():
            if v is not None and phase in out:
                out[phase].append((v, phase in misses, phase in incomplete))
    return out


def _latest_budget(cycles: Sequence[CycleRecord], phase: str) -> float | None:
    for c in reversed(cycles):
        if phase in c.budgets:
            return c.budgets[phase]
    return None


def _phases(cycles: Sequence[CycleRecord]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase, samples in _collect(cycles).items():
        st = stats_of(phase, samples, _latest_budget(cycles, phase))
        if st is not None:
            out[phase] = st
    return out


def _breakdown(
    cycles: Sequence[CycleRecord],
    section: str,
    field: str,
    phase: str,
    *,
    include: Callable[[Mapping[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """Per item of ``detail[section]`` (a mapping): stats of its ``field`` against ``phase``'s
    budget."""
    samples: dict[str, Samples] = {}
    for c in cycles:
        budget = c.budgets.get(phase, math.inf)
        items = c.detail.get(section)
        if type(items) is not dict:
            continue
        for key, row in items.items():
            if type(row) is not dict or (include is not None and not include(row)):
                continue
            value = row.get(field)
            if value is not None and type(value) in (int, float):
                samples.setdefault(key, []).append((value, value > budget + 1e-9, False))
    latest = _latest_budget(cycles, phase)
    out: dict[str, Any] = {}
    for key in sorted(samples):
        st = stats_of(f"{phase}:{key}", samples[key], latest)
        if st is not None:
            out[str(key)] = {phase: st}
    return out


def compute_stats(log: RunLog) -> dict[str, Any]:
    """Everything ``stats.json`` holds (see ``docs/nightly.md``)."""
    cycles = sorted(log.cycles, key=lambda c: c.cycle)
    start = log.start or {}
    stop = log.last_stop or {}
    statuses: dict[str, int] = {"passed": 0, "missed": 0, "failed": 0}
    for c in cycles:
        statuses[c.status] = statuses.get(c.status, 0) + 1
    by_group: dict[str, list[CycleRecord]] = {}
    for c in cycles:
        by_group.setdefault(c.group, []).append(c)
    groups: dict[str, Any] = {}
    for name in sorted(by_group):
        mine = by_group[name]
        groups[name] = {
            "nodes": mine[-1].nodes,
            "cycles": len(mine),
            "statuses": {s: sum(1 for c in mine if c.status == s) for s in statuses},
            "phases": _phases(mine),
        }
    phase_misses = {p: sum(1 for c in cycles if p in c.misses) for p in PHASES}
    return {
        "schema": STATS_SCHEMA,
        "generated_at": round(time.time(), 3),
        "source": log.path.name,
        "run": {
            "run_id": start.get("run_id"),
            "inventory": start.get("inventory"),
            "inventory_name": start.get("inventory_name"),
            "started_at": start.get("at"),
            "cycles": len(cycles),
            "first_cycle": cycles[0].cycle if cycles else None,
            "last_cycle": cycles[-1].cycle if cycles else None,
            "statuses": statuses,
            "cycles_with_misses": sum(1 for c in cycles if c.misses),
            "phase_misses": phase_misses,
            "first_cycle_at": cycles[0].started_at if cycles else None,
            "last_cycle_end": cycles[-1].ended_at if cycles else None,
            "cycle_duration": stats_of(
                "cycle", [(c.duration_s, False, False) for c in cycles], None
            ),
            "stop_reason": stop.get("reason"),
            "incomplete_last_line": log.incomplete_tail,
        },
        "phase_docs": dict(PHASE_DOCS),
        "budgets": dict(cycles[-1].budgets) if cycles else {},
        "phases": _phases(cycles),
        "groups": groups,
        "nodes": _breakdown(cycles, "nodes", "not_ready_s", "not_ready"),
        "workloads": _breakdown(
            cycles,
            "workloads",
            "recovery_s",
            "recovery",
            include=lambda row: bool(row.get("affected")),
        ),
        "services": _breakdown(cycles, "services", "longest_outage_s", "service_outage"),
        "volumes": _breakdown(cycles, "volumes", "reattach_s", "volume_reattach"),
        "slos": slo_stats(cycles),
    }


def _slo_worse(comparison: str, a: float, b: float) -> bool:
    """Whether ``a`` is further than ``b`` on the wrong side of an objective."""
    if comparison in ("<", "<="):
        return a > b
    if comparison in (">", ">="):
        return a < b
    return False


def slo_stats(cycles: Sequence[CycleRecord]) -> dict[str, Any]:
    """Per SLO (from each cycle's ``detail.slos``): cycles evaluated, held and breached (by
    number), the worst value of each cycle and of the run, and cycles not evaluated."""
    out: dict[str, dict[str, Any]] = {}
    for c in sorted(cycles, key=lambda c: c.cycle):
        for name, v in (c.detail.get("slos") or {}).items():
            s = out.setdefault(
                name,
                {
                    "comparison": v.get("comparison"),
                    "threshold": v.get("threshold"),
                    "cycles": 0,
                    "held": 0,
                    "breached_cycles": [],
                    "not_evaluated": [],
                    "worst": None,
                    "worst_cycle": None,
                    "worst_per_cycle": {},
                },
            )
            if v.get("held") is None:
                s["not_evaluated"].append(c.cycle)
                continue
            s["cycles"] += 1
            s["held"] += 1 if v["held"] else 0
            if not v["held"]:
                s["breached_cycles"].append(c.cycle)
            worst = v.get("worst")
            s["worst_per_cycle"][str(c.cycle)] = worst
            if isinstance(worst, int | float) and (
                s["worst"] is None or _slo_worse(str(s["comparison"]), worst, s["worst"])
            ):
                s["worst"], s["worst_cycle"] = worst, c.cycle
    return out


def phase_table(stats: Mapping[str, Any]) -> list[str]:
    """The per-phase table of ``stats.json`` as text lines (seconds)."""
    rows = []
    for phase, s in (stats.get("phases") or {}).items():
        rows.append(
            PhaseStats(
                phase=phase,
                count=int(s["count"]),
                min=float(s["min"]),
                p50=float(s["p50"]),
                p95=float(s["p95"]),
                p99=float(s["p99"]),
                max=float(s["max"]),
                mean=float(s["mean"]),
                budget=s.get("budget"),
                budget_misses=int(s["budget_misses"]),
            )
        )
    return format_table(rows)
