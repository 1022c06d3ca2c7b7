"""Longevity as steps of a scenario: a few cycles of the engine run into a directory, then
judged from their cycle records.

The Gherkin steps (``steps/longevity_steps.py``) parse their sentence and call these; the
verdicts are tested on recorded cycles without Gherkin (``tests/unit/test_longevity_steps.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import allure

from harness.checks import CheckFailed
from harness.errors import ConfigError
from harness.inventory import Inventory
from harness.longevity.records import CYCLES_FILE, PHASES, CycleRecord, RunLog, read_log
from harness.longevity.run import RunOptions, RunOutcome, run_longevity


@dataclass
class LongevityRun:
    outcome: RunOutcome
    log: RunLog
    cycles: int

    @property
    def out(self) -> Path:
        return self.outcome.out


class CyclesMissed(AssertionError):
    """A cycle missed a phase budget, or the cluster did not come back."""


def run_cycles(inventory: Inventory, cycles: int, outage_s: float, out: Path) -> LongevityRun:
    """Run ``cycles`` cycles over a third of the workers (as the target steps choose them),
    nodes off for at least ``outage_s`` each time, into ``out``; attach the run's log."""
    if inventory.source is None:
        raise ConfigError("the longevity step needs an inventory loaded from a file (--inventory)")
    opts = RunOptions(
        inventory=inventory.source,
        out=out,
        fraction=1 / 3,
        cycles=cycles,
        outage_s=outage_s,
        keep_timelines="missed",
        probe_interval_s=0.25,
        # a scenario run with --context: the cycles use that context too
        context=inventory.cluster.context if inventory.context_from == "--context" else None,
    )
    lines: list[str] = []
    with allure.step(f"{cycles} longevity cycles, one third of the workers at a time"):
        outcome = run_longevity(opts, say=lines.append)
    allure.attach(
        "\n".join(lines), name="longevity log", attachment_type=allure.attachment_type.TEXT
    )
    return LongevityRun(outcome, read_log(opts.out / CYCLES_FILE), cycles)


def check_recovered(run: LongevityRun) -> None:
    """Every cycle ran and none ended with the cluster short of its steady state."""
    result = run.outcome.result
    failed = [c for c in run.log.cycles if c.status == "failed"]
    if failed or result.failed:
        reasons = "; ".join(f"cycle {c.cycle}: {c.reason}" for c in failed) or result.reason
        raise CyclesMissed(f"expected the cluster back after every cycle; seen: {reasons}")
    ran = len(run.log.cycles)
    if ran != run.cycles:
        raise CyclesMissed(f"expected {run.cycles} cycles; {ran} ran (stopped: {result.reason})")


def cycle_problems(cycles: Sequence[CycleRecord], expected: int) -> tuple[list[str], bool]:
    """What keeps these cycles from having met every phase budget by themselves, and whether
    each problem is a phase that completed, only later than its budget (a budget overrun;
    anything else is a product failure).

    A cycle must not be ``failed`` (steady state not restored); every phase must have
    completed (a phase that did not is a lower bound: the volume never attached again, the
    service still down when the cycle ended) within its budget; and it must have no
    violation: a surviving member that lost readiness, a critical service without probe
    samples, or the harness having helped the cluster settle (pods force-deleted or
    restarted, see :class:`~harness.longevity.remedy.Remedy`).

    A critical workload dipping below its ``min_available`` is not a problem here (see
    :func:`availability_dips`): a group of one worker per rack takes two of three
    rack-spread replicas whenever the scheduler happened to put them on its nodes, so the
    dip says where pods were, not how the cluster behaved; the service outage budget judges
    what clients saw.
    """
    problems: list[str] = []
    late_only = True
    ran = len(cycles)
    if ran != expected:
        problems.append(f"{ran} of {expected} cycles ran")
        late_only = False
    for c in cycles:
        where = f"cycle {c.cycle} ({c.group})"
        found: list[str] = []
        if c.status == "failed":
            found.append(f"the cluster did not come back: {c.reason or 'no reason recorded'}")
            late_only = False
        for phase in PHASES:
            value, budget = c.phases.get(phase), c.budgets.get(phase)
            if phase in c.incomplete:
                found.append(f"{phase} did not complete ({value}s waited, budget {budget}s)")
                late_only = False
            elif phase in c.misses:
                found.append(f"{phase} {value}s over its {budget}s budget")
        dips = {str(v) for v in c.detail.get("below_min_available") or ()}
        violations = [str(v) for v in c.detail.get("violations") or () if str(v) not in dips]
        if c.detail.get("remediation") and not any("did not settle" in v for v in violations):
            violations.append(f"the harness helped the cluster settle: {c.detail['remediation']}")
        found.extend(violations)
        late_only = late_only and not violations
        if c.status != "passed" and not found and not dips:  # a status not understood here
            found.append(f"status {c.status}: {c.reason or 'no reason recorded'}")
            late_only = False
        problems.extend(f"{where}: {p}" for p in found)
    return problems, late_only and bool(problems)


def availability_dips(cycles: Sequence[CycleRecord]) -> list[str]:
    """Every cycle's critical workloads that dipped below their ``min_available``."""
    return [
        f"cycle {c.cycle} ({c.group}): {d}"
        for c in cycles
        for d in c.detail.get("below_min_available") or ()
    ]


def check_within_budgets(longevity_run: LongevityRun) -> None:
    """Every cycle ran, each phase complete within its budget, no violation, no remediation
    (:func:`cycle_problems`); the availability dips attached, not judged.

    Raises:
        CheckFailed: late only (a budget overrun) or anything else (a product failure).
    """
    cycles = longevity_run.log.cycles
    dips = availability_dips(cycles)
    allure.dynamic.parameter("cycles below a min_available", str(len(dips)))
    if dips:
        allure.attach(
            "\n".join(dips),
            name="critical workloads below their min_available (placement, not a verdict)",
            attachment_type=allure.attachment_type.TEXT,
        )
    problems, late = cycle_problems(cycles, longevity_run.cycles)
    if problems:
        raise CheckFailed(
            f"{longevity_run.cycles} cycles, each phase complete within its budget, "
            "no violation, no remediation",
            "; ".join(problems),
            sum(c.duration_s for c in cycles),
            check="longevity",
            late=late,
        )


def check_phase(longevity_run: LongevityRun, phase: str) -> None:
    """``phase`` completed within its budget in every cycle.

    Raises:
        ConfigError: ``phase`` is not one of the longevity phases.
        CheckFailed: a cycle missed it (late only: a budget overrun).
    """
    if phase not in PHASES:
        raise ConfigError(f"unknown phase {phase!r}; valid: {', '.join(PHASES)}", field="phase")
    missed = [c for c in longevity_run.log.cycles if phase in c.misses or phase in c.incomplete]
    if missed:
        seen = "; ".join(
            f"cycle {c.cycle} ({c.group}): {c.phases.get(phase)}s"
            f"{' waited, did not complete' if phase in c.incomplete else ''}"
            f" (budget {c.budgets.get(phase)}s)"
            for c in missed
        )
        raise CheckFailed(
            f"{phase} complete within its budget in every cycle",
            seen,
            max((c.phases.get(phase) or 0.0) for c in missed),
            check="longevity",
            late=not any(phase in c.incomplete for c in missed),
        )


def attach_statistics(longevity_run: LongevityRun) -> None:
    """Attach ``stats.json``, ``cycles.csv`` and the PNG plots; each must exist and cover
    every phase that happened."""
    report = longevity_run.outcome.report
    if report is None:
        raise CyclesMissed("expected the longevity report; none was written")
    measured = {p for c in longevity_run.log.cycles for p, v in c.phases.items() if v is not None}
    missing = measured - set(report.stats_data.get("phases") or {})
    if missing:
        raise CyclesMissed(f"expected statistics for every phase; missing: {sorted(missing)}")
    allure.attach(
        report.stats.read_bytes(), name="stats.json", attachment_type=allure.attachment_type.JSON
    )
    allure.attach(
        report.csv.read_bytes(), name="cycles.csv", attachment_type=allure.attachment_type.CSV
    )
    for png in report.plots:
        allure.attach(png.read_bytes(), name=png.stem, attachment_type=allure.attachment_type.PNG)
    if not report.plots:
        raise CyclesMissed("expected the phase plots; none were drawn")
