"""A chaostoolkit experiment as one step of a scenario: found, run in this process, its logs
and journals attached to Allure, judged; and what the powercut journal says it left.

The Gherkin steps (``steps/chaos_steps.py``) parse their sentence and call
:func:`run_as_step` and :func:`check_nothing_left`; everything else is here, tested without
Gherkin (``tests/unit/test_chaos_runner.py``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import allure

from harness.chaos.runner import Outcome, judge, run_experiment_file
from harness.errors import ConfigError, PermanentError
from harness.inventory import Inventory
from harness.journal import Journal, JournalEntry
from harness.session import journal_path_for


class ExperimentDeviated(AssertionError):
    """The steady state did not hold, or a check in the method missed its budget."""


class ExperimentBroken(PermanentError):
    """An activity raised an error (not a check), or the run was interrupted or aborted."""


@dataclass
class ChaosRun:
    experiment: Path
    journal: dict[str, Any]
    outcome: Outcome
    started_at: float
    disruptions: list[JournalEntry] = field(default_factory=list)


def experiment_path(file: str, rootdir: Path, builtin: Path) -> Path:
    """``file`` as given, else relative to the rootdir, else under ``experiments/``, else
    one of the built-in features' experiments (``builtin/experiments/``)."""
    given = Path(file).expanduser()
    tries = [given] if given.is_absolute() else [given, rootdir / given]
    tries.append(rootdir / "experiments" / given.name)
    tries.append(builtin / "experiments" / given.name)
    for path in tries:
        if path.is_file():
            return path.resolve()
    raise ConfigError(
        f"no experiment file {file!r} (looked at {', '.join(str(p) for p in tries)})",
        field="experiment",
    )


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@contextmanager
def _chaostoolkit_log() -> Iterator[_Collect]:
    logger = logging.getLogger("chaostoolkit")
    handler = _Collect()
    previous = logger.level
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def entries_since(inventory: Inventory, started_at: float) -> list[JournalEntry]:
    """The powercut journal's entries of this inventory begun at or after ``started_at``."""
    path = journal_path_for(inventory)
    if not path.exists():
        return []
    return [e for e in Journal.read(path) if e.started_at >= started_at]


def _entry_json(e: JournalEntry) -> dict[str, Any]:
    return {
        "action": e.action,
        "target": e.target,
        "state": str(e.state),
        "undo": str(e.undo),
        "duration_s": None if e.duration_s is None else round(e.duration_s, 3),
        "error": e.error,
        "undo_error": e.undo_error,
    }


def run_as_step(file: str, inventory: Inventory, rootdir: Path, builtin: Path) -> ChaosRun:
    """Run the experiment ``file`` (see :func:`experiment_path`) against ``inventory``;
    attach chaostoolkit's log and journal and the powercut journal entries of the run.

    Raises:
        KeyboardInterrupt: chaoslib reports the run interrupted (it turns SIGTERM into that
            status, then runs the rollbacks): the session stops as the signal would have.
        ExperimentDeviated: a probe deviated, or a check in the method missed its budget.
        ExperimentBroken: an activity raised an error that is not a check.
    """
    if inventory.source is None:
        raise ConfigError("the chaos step needs an inventory loaded from a file (--inventory)")
    path = experiment_path(file, rootdir, builtin)
    started = time.time()
    with _chaostoolkit_log() as log:
        try:
            journal = run_experiment_file(path, inventory=inventory.source.resolve())
        finally:
            allure.attach(
                "\n".join(log.lines),
                name="chaostoolkit log",
                attachment_type=allure.attachment_type.TEXT,
            )
    disruptions = entries_since(inventory, started)
    allure.attach(
        json.dumps(journal, indent=2, default=str),
        name=f"chaostoolkit journal: {path.name}",
        attachment_type=allure.attachment_type.JSON,
    )
    allure.attach(
        json.dumps([_entry_json(e) for e in disruptions], indent=2),
        name="powercut journal: disruptions of this experiment",
        attachment_type=allure.attachment_type.JSON,
    )
    outcome = judge(journal)
    where = f"chaos experiment {path.name}"
    if outcome.status == "interrupted":
        # chaoslib turned a SIGTERM (or Ctrl-C) into this status and ran the rollbacks:
        # stop the session as the signal would have, so `powercut run` reports it.
        raise KeyboardInterrupt(f"{where} was interrupted: {outcome.describe()}")
    if outcome.deviated or outcome.check_failures:
        raise ExperimentDeviated(f"{where}: {outcome.describe()}")
    if not outcome.ok:
        raise ExperimentBroken(f"{where}: {outcome.describe()}")
    return ChaosRun(path, journal, outcome, started, disruptions)


def check_nothing_left(chaos_run: ChaosRun, inventory: Inventory) -> None:
    """The experiment journaled a disruption, and its rollbacks undid every one."""
    entries = entries_since(inventory, chaos_run.started_at)
    owed = [e for e in entries if e.owes_undo]
    name = chaos_run.experiment.name
    if not entries:
        raise AssertionError(f"{name} journaled no disruption: did its method act at all?")
    if owed:
        raise AssertionError(
            f"{name} left {len(owed)} disruption(s) in place: "
            + "; ".join(str(e) for e in owed)
            + f" (run `powercut recover --inventory {inventory.source}`)"
        )
