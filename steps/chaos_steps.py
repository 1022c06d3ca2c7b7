"""Gherkin steps for chaostoolkit experiments.

``When I run the chaos experiment "experiments/worker-power-loss.json"`` runs the
experiment in this process against the scenario's inventory (the ``inventory`` fixture of
powercut's pytest plugin), with the same drivers, checks and journal as every other step.
It attaches chaostoolkit's journal, the powercut journal entries of the run and the
chaostoolkit log to Allure, and fails naming each deviated probe (a failed test: the
cluster did not hold its steady state) or each activity that raised (a check that missed
its budget fails the test; an error the harness could not get past breaks it). A run that
chaoslib reports interrupted (it turns SIGTERM into that status, then runs the rollbacks)
interrupts the pytest session, as the signal would have.

``Then the experiment left no disruption behind`` checks the powercut journal: every
disruption the experiment journaled has been undone by its rollbacks.

The work is :mod:`harness.chaos.experiment`'s; this module only defines the steps (loaded
by :mod:`harness.steps.plugin`, so every feature can use them); ``steps/test_chaos.py``
binds the built-in ``features/chaos.feature``.
"""

from __future__ import annotations

import pytest
from pytest_bdd import parsers, then, when

from harness.chaos.experiment import ChaosRun, check_nothing_left, run_as_step
from harness.inventory import Inventory
from harness.steps import BUILTIN_FEATURES


@when(
    parsers.re(r'I run the chaos experiment "?(?P<file>[^"]+?)"?'),
    target_fixture="chaos_run",
)
def run_chaos_experiment(file: str, inventory: Inventory, pytestconfig: pytest.Config) -> ChaosRun:
    return run_as_step(file, inventory, pytestconfig.rootpath, BUILTIN_FEATURES)


@then("the experiment left no disruption behind")
def no_disruption_left(chaos_run: ChaosRun, inventory: Inventory) -> None:
    check_nothing_left(chaos_run, inventory)
