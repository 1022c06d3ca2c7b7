"""Gherkin steps for longevity: the engine of ``powercut longevity``, a few cycles long.

``When one third of the workers, spread across racks, lose power in turn for 3 cycles of at
least 5 seconds each`` runs :func:`harness.longevity.run.run_longevity` against the
scenario's inventory (the ``inventory`` fixture of powercut's pytest plugin) into the test's
temporary directory; the ``Then`` steps judge its cycle records and attach ``stats.json``,
``cycles.csv`` and the plots to Allure.

This module only defines the steps; ``steps/test_longevity.py`` binds
``features/longevity/longevity.feature`` to them (it lives in a folder of its own so that
``steps/test_features.py``, which binds ``features/*.feature`` to the shared vocabulary,
leaves it alone). The Background step ("the cluster is in steady state") comes from
``steps/conftest.py``; no step here takes the scenario ``session`` (the engine holds the
cluster lock and journals every power-off itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import allure
import pytest
from pytest_bdd import parsers, then, when

from harness.inventory import Inventory
from harness.longevity.records import CYCLES_FILE, PHASES, RunLog, read_log
from harness.longevity.run import RunOptions, RunOutcome, run_longevity
from steps.support.limits import TYPES, Limit


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


@when(
    parsers.parse(
        "one third of the workers, spread across racks, lose power in turn for {cycles:d} "
        "cycles of at least {outage:Limit} each",
        extra_types=TYPES,
    ),
    target_fixture="longevity_run",
)
def workers_lose_power_in_turn(
    inventory: Inventory, cycles: int, outage: Limit, tmp_path: Path
) -> LongevityRun:
    """Run ``cycles`` longevity cycles over groups of a third of the workers (each group
    spread across the racks), nodes off for at least ``outage`` each time."""
    if inventory.source is None:
        pytest.fail("the inventory was not loaded from a file")
    opts = RunOptions(
        inventory=inventory.source,
        out=tmp_path / "longevity",
        fraction=1 / 3,
        cycles=cycles,
        outage_s=outage.seconds(inventory.timing_budgets()),
        keep_timelines="missed",
        probe_interval_s=0.25,
    )
    lines: list[str] = []
    with allure.step(f"{cycles} longevity cycles, one third of the workers at a time"):
        outcome = run_longevity(opts, say=lines.append)
    allure.attach(
        "\n".join(lines), name="longevity log", attachment_type=allure.attachment_type.TEXT
    )
    return LongevityRun(outcome, read_log(opts.out / CYCLES_FILE), cycles)


@then("every cycle brought the cluster back to its steady state")
def every_cycle_recovered(longevity_run: LongevityRun) -> None:
    """Every cycle ran and none ended with the cluster short of its steady state."""
    result = longevity_run.outcome.result
    failed = [c for c in longevity_run.log.cycles if c.status == "failed"]
    if failed or result.failed:
        reasons = "; ".join(f"cycle {c.cycle}: {c.reason}" for c in failed) or result.reason
        raise CyclesMissed(f"expected the cluster back after every cycle; seen: {reasons}")
    ran = len(longevity_run.log.cycles)
    if ran != longevity_run.cycles:
        raise CyclesMissed(
            f"expected {longevity_run.cycles} cycles; {ran} ran (stopped: {result.reason})"
        )


@then(parsers.parse("no cycle missed its {phase:w} budget"))
def no_cycle_missed(longevity_run: LongevityRun, phase: str) -> None:
    """The phase stayed within its budget in every cycle (see ``docs/nightly.md`` for how
    each phase is measured and which named budgets make its budget)."""
    if phase not in PHASES:
        pytest.fail(f"unknown phase {phase!r}; valid: {', '.join(PHASES)}")
    missed = [c for c in longevity_run.log.cycles if phase in c.misses]
    if missed:
        seen = "; ".join(
            f"cycle {c.cycle} ({c.group}): {c.phases.get(phase)}s over {c.budgets.get(phase)}s"
            for c in missed
        )
        raise CyclesMissed(f"expected {phase} within its budget in every cycle; seen: {seen}")


@then("the statistics and plots of every phase are attached to the report")
def statistics_attached(longevity_run: LongevityRun) -> None:
    """``stats.json``, ``cycles.csv`` and the PNG plots exist, cover every phase that
    happened, and are attached to the scenario."""
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
