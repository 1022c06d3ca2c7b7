"""Start or resume a longevity run: inventory, groups, budgets, lock, journal, the loop.

``run_longevity(options)`` is what ``powercut longevity`` and the feature step call. It
refuses to start while the journal still owes undos from a crashed run (``powercut
recover`` first), holds the cluster lock for the whole run, appends a ``start`` (or
``resume``) record, runs the :class:`~harness.longevity.engine.Engine` and, however the run
ended, rebuilds the statistics, CSV, plots and Allure results from ``cycles.jsonl``.

``--resume DIR`` continues the cycle count of ``DIR`` with the options and the groups its
``start`` record holds; options given again on the command line win.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from harness import __version__
from harness.errors import ConfigError
from harness.failures import FailureKind
from harness.inventory import Inventory, load_inventory
from harness.kube.client import KubeClient
from harness.kube.lock import ClusterLock
from harness.kube.target import aim_at_context, client_for, context_shown
from harness.kube.timeline import Timeline
from harness.longevity.cycle import KeepTimelines, LiveRunner, check_journal_clean
from harness.longevity.engine import Engine, RunResult, Say, StopControl
from harness.longevity.groups import (
    Group,
    auto_groups,
    groups_from_json,
    load_groups,
    validate_groups,
)
from harness.longevity.records import CYCLES_FILE, CycleLog, PhaseBudgets, RunLog, read_log
from harness.longevity.report import ReportFiles, write_report
from harness.scenario.targets.choice import DEFAULT_PHRASE, parse_phrase
from harness.session import Session, journal_path_for

__all__ = ["STOP_FILE", "RunOptions", "RunOutcome", "options_for_resume", "run_longevity"]

log = logging.getLogger(__name__)
STOP_FILE = "STOP"


@dataclass(frozen=True)
class RunOptions:
    """Everything a run needs besides the cluster; stored in the ``start`` record."""

    inventory: Path
    out: Path
    fraction: float = 1 / 3
    #: "target": each cycle's group chosen with ``target`` (the default); "auto": fixed
    #: groups rotated (auto_groups); else the path of a groups file.
    groups: str = "target"
    target: str | None = None  # a steps' target phrase; None: a fraction, sparing
    cycles: int | None = None  # total cycles in the run directory
    duration_s: float | None = None
    outage_s: float = 120.0
    protocol: str | None = None  # None: each node's inventory power driver
    failure: str = "power"  # a FailureKind value: power, graceful, reboot, partition, kubelet
    budget_overrides: Mapping[str, str] = field(default_factory=dict)
    keep_timelines: KeepTimelines = "missed"
    probe_interval_s: float = 0.5
    settle_s: float | None = None
    stop_file: Path | None = None
    report: bool = True
    #: the kubeconfig context chosen with ``--context`` (None: the inventory's)
    context: str | None = None

    @property
    def stop_path(self) -> Path:
        return self.stop_file or self.out / STOP_FILE

    def to_json(self) -> dict[str, Any]:
        return {
            "inventory": str(self.inventory),
            "fraction": self.fraction,
            "groups": self.groups,
            "target": self.target,
            "cycles": self.cycles,
            "duration_s": self.duration_s,
            "outage_s": self.outage_s,
            "protocol": self.protocol,
            "failure": self.failure,
            "budget_overrides": dict(self.budget_overrides),
            "keep_timelines": self.keep_timelines,
            "probe_interval_s": self.probe_interval_s,
            "settle_s": self.settle_s,
            "stop_file": str(self.stop_file) if self.stop_file else None,
            "context": self.context,
        }


@dataclass
class RunOutcome:
    result: RunResult
    report: ReportFiles | None
    out: Path


def options_for_resume(out: Path, given: Mapping[str, Any]) -> tuple[RunOptions, RunLog]:
    """The options of the run in ``out`` (its ``start`` record), with ``given`` on top."""
    path = out / CYCLES_FILE
    if not path.exists():
        raise ConfigError(f"nothing to resume: no {CYCLES_FILE}", source=str(out))
    previous = read_log(path)
    start = previous.start
    if start is None:
        raise ConfigError("nothing to resume: the run has no start record", source=str(path))
    stored = dict(start.get("options") or {})
    for resumed in previous.runs:
        if resumed.get("event") == "resume":
            stored.update(resumed.get("options") or {})
    merged = {**stored, **{k: v for k, v in given.items() if v is not None}}
    keep = merged.get("keep_timelines", "missed")
    opts = RunOptions(
        inventory=Path(merged["inventory"]),
        out=out,
        fraction=float(merged.get("fraction", 1 / 3)),
        groups=str(merged.get("groups", "auto")),  # runs from before targets: fixed groups
        target=merged.get("target"),
        cycles=None if merged.get("cycles") is None else int(merged["cycles"]),
        duration_s=None if merged.get("duration_s") is None else float(merged["duration_s"]),
        outage_s=float(merged.get("outage_s", 120.0)),
        protocol=merged.get("protocol"),
        failure=str(merged.get("failure") or "power"),
        budget_overrides=dict(merged.get("budget_overrides") or {}),
        keep_timelines="all" if keep == "all" else ("none" if keep == "none" else "missed"),
        probe_interval_s=float(merged.get("probe_interval_s", 0.5)),
        settle_s=None if merged.get("settle_s") is None else float(merged["settle_s"]),
        stop_file=Path(merged["stop_file"]) if merged.get("stop_file") else None,
        report=bool(given.get("report", True)),
        context=merged.get("context") or None,
    )
    return opts, previous


def target_phrase(opts: RunOptions) -> str | None:
    """The steps' target phrase each cycle's group is chosen with; None with fixed groups.
    By default a fraction of the workers (``--fraction``), one per rack, sparing the
    critical workloads."""
    if opts.groups != "target":
        if opts.target is not None:
            raise ConfigError("give either --target or --groups, not both", field="--target")
        return None
    if opts.target is not None:
        return opts.target
    if abs(opts.fraction - 1 / 3) < 1e-9:
        return DEFAULT_PHRASE
    share = Fraction(opts.fraction).limit_denominator(1000)
    return f"{share} of the worker nodes, one per rack, sparing the critical workloads"


def _groups(opts: RunOptions, inventory: Inventory, previous: RunLog | None) -> list[Group]:
    phrase = target_phrase(opts)
    if phrase is not None:
        parse_phrase(phrase)
        return [Group("chosen each cycle", ())]
    if previous is not None and previous.start and previous.start.get("groups"):
        groups = groups_from_json(previous.start["groups"])
        validate_groups(inventory, groups)
        return groups
    if opts.groups == "auto":
        return auto_groups(inventory, opts.fraction)
    return load_groups(Path(opts.groups), inventory)


def _deadline(opts: RunOptions, previous: RunLog | None, given_duration: bool) -> float | None:
    if opts.duration_s is None:
        return None
    if previous is not None and not given_duration:
        for record in reversed(previous.runs):
            if record.get("event") in ("start", "resume") and record.get("deadline_at"):
                return float(record["deadline_at"])
    return time.time() + opts.duration_s


def _header(
    opts: RunOptions,
    inventory: Inventory,
    groups: Sequence[Group],
    budgets: PhaseBudgets,
    previous: RunLog | None,
    first: int,
    deadline: float | None,
    resume: bool,
) -> dict[str, Any]:
    """The run record that opens (or resumes) the cycles' log."""
    return {
        "type": "run",
        "event": "resume" if resume else "start",
        "at": round(time.time(), 3),
        "run_id": (previous.start or {}).get("run_id")
        if previous is not None
        else uuid.uuid4().hex,
        "inventory": str(opts.inventory.resolve()),
        "inventory_name": inventory.name or opts.inventory.stem,
        "context": context_shown(inventory),
        "options": opts.to_json(),
        "groups": [g.to_json() for g in groups],
        "target": target_phrase(opts),
        "budgets": budgets.as_dict(),
        "first_cycle": first,
        "deadline_at": deadline,
        "journal": str(journal_path_for(inventory)),
        "powercut": __version__,
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


def _announcement(
    opts: RunOptions,
    groups: Sequence[Group],
    phrase: str | None,
    first: int,
    deadline: float | None,
    context: str,
) -> str:
    """What the run says as it starts: its groups, its cycles, where its results go."""
    return (
        (
            f"longevity: each cycle's group is {phrase!r}, chosen from where the "
            "pods are at that cycle"
            if phrase is not None
            else f"longevity: {len(groups)} group(s) " + "; ".join(str(g) for g in groups)
        )
        + f"; cycles from {first}"
        + (f" to {opts.cycles}" if opts.cycles is not None else "")
        + (f"; until {time.ctime(deadline)}" if deadline is not None else "")
        + f"; context {context}; results in {opts.out}"
        + f"; stop with `touch {opts.stop_path}` or Ctrl-C"
    )


def run_longevity(
    opts: RunOptions,
    *,
    resume: bool = False,
    previous: RunLog | None = None,
    duration_given: bool = True,
    say: Say = print,
    client: KubeClient | None = None,
    session_factory: Callable[[Inventory, KubeClient, Timeline], Session] | None = None,
) -> RunOutcome:
    """Run (or resume) the cycles; see the module docstring."""
    out = opts.out
    out.mkdir(parents=True, exist_ok=True)
    path = out / CYCLES_FILE
    if resume:
        if previous is None:
            previous = read_log(path)
    elif path.exists() and path.stat().st_size:
        raise ConfigError(
            "this directory already holds a longevity run; continue it with --resume "
            f"{out} or choose another --out",
            source=str(out),
        )
    # --context: kubectl's resolution, and its cluster must hold the inventory's nodes
    inventory = aim_at_context(load_inventory(opts.inventory), opts.context)
    groups = _groups(opts, inventory, previous)
    budgets = PhaseBudgets.from_budgets(inventory.timing_budgets()).with_overrides(
        opts.budget_overrides
    )
    journal_path = journal_path_for(inventory)
    check_journal_clean(journal_path, opts.inventory)
    first = (previous.last_cycle + 1) if previous is not None else 1
    deadline = _deadline(opts, previous, duration_given)
    stop = StopControl(opts.stop_path, say)
    if opts.stop_path.exists():
        say(f"removing the stop file {opts.stop_path} left by an earlier run")
        stop.consume_stop_file()
    own_client = client is None
    if client is None:
        client = client_for(inventory)
    kube = client
    lock = ClusterLock(kube)
    result: RunResult | None = None
    report: ReportFiles | None = None
    try:
        lock.acquire()
        with CycleLog(path) as cycle_log, stop.handlers():
            cycle_log.append(
                _header(opts, inventory, groups, budgets, previous, first, deadline, resume)
            )
            phrase = target_phrase(opts)
            say(_announcement(opts, groups, phrase, first, deadline, context_shown(inventory)))
            runner = LiveRunner(
                inventory,
                kube,
                out=out,
                budgets=budgets,
                stop=stop,
                outage_s=opts.outage_s,
                protocol=opts.protocol,
                failure=FailureKind.parse(opts.failure),
                keep_timelines=opts.keep_timelines,
                probe_interval_s=opts.probe_interval_s,
                settle_s=opts.settle_s,
                journal_path=journal_path,
                session_factory=(
                    (lambda tl: session_factory(inventory, kube, tl)) if session_factory else None
                ),
                say=say,
                target=phrase,
            )
            engine = Engine(
                runner=runner,
                groups=groups,
                cycle_log=cycle_log,
                stop=stop,
                first_cycle=first,
                cycles=opts.cycles,
                deadline_wall=deadline,
                past_durations=[c.duration_s for c in previous.cycles] if previous else (),
                say=say,
            )
            try:
                result = engine.run()
            finally:
                runner.close()
    finally:
        lock.release()
        if own_client:
            kube.close()
        if opts.report:
            try:
                report = write_report(out)
            except Exception as exc:  # noqa: BLE001 - the run's outcome matters more; say so
                log.error("could not write the report of %s: %s", out, exc)
                say(f"could not write the report ({exc}); rebuild it with --report {out}")
    return RunOutcome(result, report, out)
