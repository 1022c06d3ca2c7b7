"""Run a chaostoolkit experiment in this process and say what went wrong, by name.

Used by the Gherkin step ``When I run the chaos experiment <file>`` and by the tests.
``chaoslib.experiment.run_experiment`` installs signal handlers, so it must run on the
main thread. The experiment's own ``runtime`` strategies apply, as with ``chaos run``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.chaos._common import CONFIG_KEY, ENV_VAR
from harness.errors import ConfigError, PermanentError

__all__ = ["Outcome", "judge", "load_experiment", "run_experiment_file"]

Journal = dict[str, Any]

#: Exception types (as chaostoolkit records them) that mean "the cluster did not behave
#: within its budget" rather than "the harness or the cluster could not be driven".
CHECK_FAILURES = ("harness.checks.base.CheckFailed", "harness.errors.WaitTimeout")


@dataclass(frozen=True)
class Outcome:
    """What a chaostoolkit journal says, in a sentence per problem.

    ``deviated``: probes of the steady-state hypothesis outside their tolerance (the
    system did not hold); ``failed``: activities that raised, split into check failures
    (a budget missed) and errors (the harness could not act); ``status``: chaostoolkit's.
    """

    status: str
    deviated: list[str] = field(default_factory=list)
    check_failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.deviated or self.check_failures or self.errors) and (
            self.status == "completed"
        )

    def describe(self) -> str:
        lines = [*self.deviated, *self.check_failures, *self.errors]
        if self.status != "completed" and not lines:
            lines.append(f"the experiment ended with status {self.status!r}")
        return "; ".join(lines) if lines else "the steady state held"


def _name(run: Mapping[str, Any]) -> str:
    activity = run.get("activity") or {}
    provider = activity.get("provider") or {}
    where = f"{provider.get('module', '')}.{provider.get('func', '')}".strip(".")
    return f"{activity.get('type', 'activity')} {activity.get('name', '?')!r}" + (
        f" ({where})" if where else ""
    )


#: chaostoolkit wraps what an activity raised in its own ActivityFailed.
_WRAPPER = "chaoslib.exceptions.ActivityFailed: "


def _error(run: Mapping[str, Any]) -> str:
    exc = run.get("exception") or []
    text = "".join(exc).strip() if isinstance(exc, list) else str(exc)
    last = text.splitlines()[-1] if text else "failed"
    return last.removeprefix(_WRAPPER)


def _hypothesis(journal: Journal, when: str) -> list[str]:
    state = (journal.get("steady_states") or {}).get(when)
    if not state or state.get("steady_state_met") is not False:
        return []
    out = []
    phase = "before the method" if when == "before" else "after the method"
    for probe in state.get("probes") or []:
        if probe.get("tolerance_met") is False:
            tolerance = (probe.get("activity") or {}).get("tolerance")
            if probe.get("status") == "failed":
                seen = f"raised {_error(probe)}"
            else:
                seen = f"returned {json.dumps(probe.get('output'), default=str)}"
            out.append(
                f"steady-state hypothesis deviated {phase}: {_name(probe)} {seen}, "
                f"tolerance {json.dumps(tolerance, default=str)}"
            )
    return out


def judge(journal: Journal) -> Outcome:
    """The deviated probes and the failed activities of a chaostoolkit journal."""
    deviated = _hypothesis(journal, "before") + _hypothesis(journal, "after")
    checks: list[str] = []
    errors: list[str] = []
    for phase, runs in (("method", journal.get("run")), ("rollback", journal.get("rollbacks"))):
        for run in runs or []:
            if run.get("status") != "failed":
                continue
            error = _error(run)
            line = f"{phase} {_name(run)} failed: {error}"
            is_check = any(error.startswith(t) for t in CHECK_FAILURES) and phase == "method"
            (checks if is_check else errors).append(line)
    return Outcome(str(journal.get("status")), deviated, checks, errors)


def load_experiment(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("experiment file not found", source=str(path)) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the experiment: {exc}", source=str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError("an experiment is a JSON object", source=str(path))
    return data


@contextmanager
def _inventory_env(inventory: Path | None) -> Iterator[None]:
    if inventory is None:
        yield
        return
    before = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = str(inventory)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before


def run_experiment_file(
    path: Path, *, inventory: Path | None = None, settings: Mapping[str, Any] | None = None
) -> Journal:
    """Validate and run the experiment at ``path``; return chaostoolkit's journal.

    ``inventory`` is given to the experiment as its ``powercut_inventory`` configuration
    (and ``POWERCUT_INVENTORY`` while it runs). The experiment's ``runtime`` section sets
    the rollback and hypothesis strategies, as ``chaos run`` does.
    """
    if threading.current_thread() is not threading.main_thread():
        raise PermanentError(
            "chaostoolkit experiments must run on the main thread (chaoslib installs "
            "signal handlers)"
        )
    from chaoslib.experiment import ensure_experiment_is_valid, run_experiment
    from chaoslib.types import Strategy

    experiment = load_experiment(path)
    runtime = experiment.get("runtime") or {}
    rollbacks = (runtime.get("rollbacks") or {}).get("strategy", "default")
    hypothesis = (runtime.get("hypothesis") or {}).get("strategy", "default")
    merged: dict[str, Any] = dict(settings or {})
    merged["runtime"] = {
        "rollbacks": {"strategy": rollbacks},
        "hypothesis": {"strategy": hypothesis},
    }
    config_vars = {CONFIG_KEY: str(inventory)} if inventory is not None else {}
    with _inventory_env(inventory):
        ensure_experiment_is_valid(experiment)
        journal: Journal = run_experiment(
            experiment,
            settings=merged,
            experiment_vars=(config_vars, {}),
            strategy=Strategy.from_string(hypothesis),
        )
    return journal
