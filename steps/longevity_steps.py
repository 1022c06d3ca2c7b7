"""Gherkin steps for longevity: the engine of ``powercut longevity``, a few cycles long.

``When one third of the workers, spread across racks, lose power in turn for 3 cycles of at
least 5 seconds each`` runs :func:`harness.longevity.run.run_longevity` against the
scenario's inventory (the ``inventory`` fixture of powercut's pytest plugin) into the test's
temporary directory; the ``Then`` steps judge its cycle records and attach ``stats.json``,
``cycles.csv`` and the plots to Allure.

The work is :mod:`harness.longevity.verdict`'s; this module only defines the steps
(loaded by :mod:`harness.steps.plugin`);
``steps/test_longevity.py`` binds the built-in ``features/longevity/longevity.feature``
(a folder of its own, so that ``test_features.py``, which binds ``features/*.feature``,
leaves it alone). The Background step ("the cluster is in steady state") comes from
:mod:`harness.steps.target_steps`; no step here takes the scenario ``session`` (the engine
holds the cluster lock and journals every power-off itself).
"""

from __future__ import annotations

from pathlib import Path

from pytest_bdd import parsers, then, when

from harness.inventory import Inventory
from harness.longevity.verdict import (
    LongevityRun,
    attach_statistics,
    check_phase,
    check_recovered,
    check_within_budgets,
    run_cycles,
)
from harness.steps.support.limits import TYPES, Limit


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
    """Run ``cycles`` longevity cycles, each over a third of the workers chosen at that
    cycle as the target steps choose them (one per rack, sparing the critical workloads,
    from where the pods are then), nodes off for at least ``outage`` each time."""
    outage_s = outage.seconds(inventory.timing_budgets())
    return run_cycles(inventory, cycles, outage_s, tmp_path / "longevity")


@then("every cycle brought the cluster back to its steady state")
def every_cycle_recovered(longevity_run: LongevityRun) -> None:
    """Every cycle ran and none ended with the cluster short of its steady state."""
    check_recovered(longevity_run)


@then("every cycle kept every phase within its budget, with no help from the harness")
def every_cycle_within_budgets(longevity_run: LongevityRun) -> None:
    """Every cycle ran; in each, every phase (``not_ready``, ``evacuation``, ``recovery``,
    ``service_outage``, ``volume_reattach``, ``cleanup``) completed within its budget, no
    surviving member lost readiness, every critical service was probed, and the cluster
    settled without the harness
    force-deleting or restarting pods. A cycle whose only problems are phases that completed
    late fails as a budget overrun; anything else as a product failure."""
    check_within_budgets(longevity_run)


@then(parsers.parse("no cycle missed its {phase:w} budget"))
def no_cycle_missed(longevity_run: LongevityRun, phase: str) -> None:
    """The phase completed within its budget in every cycle (see ``docs/nightly.md`` for
    how each phase is measured and which named budgets make its budget). One phase only:
    the feature checks them all with "every cycle kept every phase within its budget"."""
    check_phase(longevity_run, phase)


@then("the statistics and plots of every phase are attached to the report")
def statistics_attached(longevity_run: LongevityRun) -> None:
    """``stats.json``, ``cycles.csv`` and the PNG plots exist, cover every phase that
    happened, and are attached to the scenario."""
    attach_statistics(longevity_run)
