"""``powercut longevity``: fail a fraction of the workers cyclically, with statistics."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.budgets import parse_duration
from harness.cli.context import add_context_option
from harness.driver_registry import installed_drivers
from harness.errors import ConfigError
from harness.journal import UndoFailed
from harness.session import StoppedByCondition

if TYPE_CHECKING:
    from harness.longevity.report import ReportFiles
    from harness.report.history import TargetStore

# Exit codes, as for `powercut run`.
EXIT_PASSED = 0
EXIT_FAILED = 1  # cycles missed budgets, or the cluster did not come back to steady state
EXIT_HARNESS = 2  # harness or infrastructure error
EXIT_INTERRUPTED = 3  # stopped by SIGINT/SIGTERM, cluster restored
EXIT_RESTORE_FAILED = 4  # something is still disrupted: run `powercut recover`
EXIT_STOPPED = 5  # a stop condition (SLO or alert) breached: stopped, cluster restored

EPILOG = """stopping:
  --cycles N, --duration 8h, the stop file (DIR/STOP: `touch DIR/STOP`), or SIGINT/SIGTERM.
  A first signal lets the current cycle finish (recovery and cleanup included) and records
  it; a second one powers the nodes back on at once and drops that cycle.
  After a crash: `powercut recover -i INVENTORY`, then `powercut longevity --resume DIR`.

files in DIR:
  cycles.jsonl  one JSON record per finished cycle (flushed), plus run start/stop records
  stats.json    per phase, group, node, workload, service, volume: count min p50 p95 p99
                max mean budget misses
  cycles.csv    one row per cycle;  plots/*.png;  allure-results/ (one result per cycle
                and a summary: render with `powercut report DIR/allure-results -o HTML`)
  timelines/    the timelines of the cycles kept (--keep-timelines)

exit codes:
  0  every cycle passed          1  a cycle missed a budget or the cluster did not recover
  2  harness or infrastructure error   3  interrupted (cluster restored)
  4  restore failed: run `powercut recover -i INVENTORY`
  5  stopped by a stop condition of the inventory (an SLO or alert breached; restored)
"""


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _budget(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected PHASE=DURATION, e.g. recovery=90s")
    return name.strip(), value.strip()


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "longevity",
        help="fail a fraction of the workers cyclically for hours; statistics and plots",
        description="Power off one group of workers at a time (a third by default, spread "
        "across racks), measure NotReady, evacuation, recovery, service outage, volume "
        "re-attachment and cleanup, power them on, clean up, rotate to the next group. "
        "Each finished cycle is appended to DIR/cycles.jsonl; at the end DIR holds "
        "stats.json, cycles.csv, plots and Allure results.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_cycle_options(p)
    _add_run_options(p)
    p.set_defaults(func=cmd_longevity)


def _add_cycle_options(p: argparse.ArgumentParser) -> None:
    """What each cycle fails, how, and how many cycles."""
    p.add_argument("--inventory", "-i", type=Path, help="inventory YAML (required unless resuming)")
    add_context_option(p)  # kept with the run: --resume uses it again unless given anew
    p.add_argument(
        "--fraction",
        default=None,
        help="fraction of the workers failed per cycle: 1/3, 33%%, one-third, one-half "
        "(default 1/3)",
    )
    p.add_argument(
        "--groups",
        default=None,
        metavar="auto|FILE",
        help="fixed failure groups, rotated: auto (the workers dealt out across racks into "
        "1/fraction groups) or a YAML file; by default each cycle's group is chosen "
        "with --target instead",
    )
    p.add_argument(
        "--target",
        default=None,
        metavar="PHRASE",
        help="how each cycle's group is chosen, from where the pods are at that cycle, as "
        'the steps say it: "<amount> of the worker nodes, one per rack, sparing the '
        'critical workloads" (default, with --fraction as the amount), "<amount> of the '
        'worker nodes, one per rack", "<amount> worker nodes" or "every node of the rack '
        'running the most critical pods"',
    )
    p.add_argument("--cycles", type=_positive_int, default=None, help="total number of cycles")
    p.add_argument(
        "--duration", type=_duration, default=None, help="stop starting cycles after (e.g. 8h)"
    )
    p.add_argument(
        "--outage",
        type=_duration,
        default=None,
        help="nodes stay off at least this long (default 120s; longer while an outage phase "
        "is still within its budget)",
    )
    p.add_argument(
        "--protocol",
        choices=(*installed_drivers(), "inventory"),
        default=None,
        help="power through this endpoint of each node (default: the inventory's driver)",
    )
    p.add_argument(
        "--progress",
        choices=("auto", "rich", "plain", "off"),
        default="auto",
        help="show the cycle, the wait in progress against its budget and the running "
        "statistics per phase: live (rich), as lines (plain), auto: rich on a terminal",
    )
    p.add_argument(
        "--failure",
        choices=("power", "graceful", "reboot", "partition", "kubelet"),
        default=None,
        help="how each group fails: power (forced power-off through the BMC; default), "
        "graceful (graceful shutdown), reboot (the BMC's power cycle, as the steps' reboot: "
        "off and on again, without the minimum outage; measured as the steps measure it, "
        "from the power-off within the cycle, or a one-node reset's request, to the cycle's "
        "acknowledgement), "
        "partition (cut off the network, the node keeps running), kubelet (kubelet "
        "stopped); partition and kubelet need a driver that can "
        "(SSH), and the nodes undo them by themselves if the run dies",
    )


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """Where the run goes, how it resumes, stops and reports."""
    p.add_argument("--out", type=Path, default=None, help="run directory (default reports/...)")
    p.add_argument("--resume", type=Path, default=None, metavar="DIR", help="continue a run")
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="DIR",
        help="only rebuild stats.json, cycles.csv, plots and Allure results from DIR's JSONL",
    )
    p.add_argument(
        "--budget",
        type=_budget,
        action="append",
        default=None,
        metavar="PHASE=DURATION",
        help="override a phase budget (not_ready, evacuation, recovery, service_outage, "
        "volume_reattach, cleanup); repeatable",
    )
    p.add_argument(
        "--keep-timelines",
        choices=("all", "missed", "none"),
        default=None,
        help="save the timeline of every cycle, of the cycles that missed (default), or none",
    )
    p.add_argument(
        "--probe-interval", type=_duration, default=None, help="service probe period (0.5s)"
    )
    p.add_argument(
        "--settle",
        type=_duration,
        default=None,
        help="how long to wait for the steady state before a cycle and after power-on before "
        "stopping the run (default 3x the cleanup budget)",
    )
    p.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="DIR",
        help="a results store (as `powercut run --store`): the run goes to "
        "DIR/<target>/runs/<run id>/ (instead of --out) and its record, one scenario per "
        "cycle, with its exit status, is appended to DIR/<target>/history.jsonl, so the "
        "store's page lists longevity nights beside feature runs",
    )
    p.add_argument(
        "--store-target",
        default=None,
        metavar="NAME",
        help="the target cluster's name in the store (default: the inventory's name)",
    )
    p.add_argument(
        "--keep-runs",
        type=int,
        default=0,
        metavar="N",
        help="with --store: after the run, keep the target's newest N runs (0: no limit)",
    )
    p.add_argument(
        "--keep-days",
        type=float,
        default=0,
        metavar="DAYS",
        help="with --store: after the run, remove the target's runs started more than DAYS "
        "days ago (0: no limit); the run just made is always kept",
    )
    p.add_argument("--stop-file", type=Path, default=None, help="stop file (default DIR/STOP)")
    p.add_argument("--no-report", action="store_true", help="do not write the report at the end")


def _given(args: argparse.Namespace) -> dict[str, Any]:
    from harness.longevity.groups import parse_fraction

    given: dict[str, Any] = {
        "inventory": str(args.inventory) if args.inventory else None,
        "fraction": parse_fraction(args.fraction) if args.fraction is not None else None,
        "groups": args.groups,
        "target": args.target,
        "cycles": args.cycles,
        "duration_s": args.duration,
        "outage_s": args.outage,
        "protocol": None,  # applied by the caller: "inventory" means None
        "failure": args.failure,
        "budget_overrides": dict(args.budget) if args.budget else None,
        "keep_timelines": args.keep_timelines,
        "probe_interval_s": args.probe_interval,
        "settle_s": args.settle,
        "stop_file": str(args.stop_file) if args.stop_file else None,
        "context": getattr(args, "context", None) or None,
    }
    return given


def _print_report(files: ReportFiles, out: Path) -> None:
    from harness.longevity.stats import phase_table

    stats = files.stats_data
    run = stats.get("run") or {}
    st = run.get("statuses") or {}
    print(
        f"\n{run.get('cycles', 0)} cycle(s): {st.get('passed', 0)} passed, "
        f"{st.get('missed', 0)} missed a budget, {st.get('failed', 0)} failed to recover"
    )
    table = phase_table(stats)
    if len(table) > 1:
        print("seconds per phase across cycles:")
        for line in table:
            print(f"  {line}")
    print(f"statistics: {files.stats}\ncycles:     {files.csv}")
    if files.plots:
        print(f"plots:      {out / 'plots'} ({len(files.plots)} PNG)")
    if files.allure:
        print(f"allure:     {files.allure} (render: powercut report {files.allure} -o HTML_DIR)")
    for problem in files.problems:
        print(f"warning:    {problem} (rebuild with: powercut longevity --report {out})")


def cmd_longevity(args: argparse.Namespace) -> int:
    from harness.longevity.report import write_report
    from harness.longevity.run import RunOptions, options_for_resume

    if args.report is not None:
        files = write_report(args.report)
        _print_report(files, args.report)
        return EXIT_PASSED
    given = _given(args)
    record: _StoreRecord | None = None
    if args.resume is not None:
        if args.out is not None and args.out.resolve() != args.resume.resolve():
            raise ConfigError("give either --resume DIR or --out DIR, not both", field="--out")
        opts, previous = options_for_resume(args.resume.resolve(), given)
        resume = True
    else:
        if args.inventory is None:
            raise ConfigError("--inventory is required (or --resume DIR / --report DIR)")
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = (args.out or Path("reports") / f"longevity-{stamp}").resolve()
        if args.store is not None:
            if args.out is not None:
                raise ConfigError("give either --store DIR or --out DIR, not both", field="--out")
            record = _store_record(args)
            out = record.out
        opts = RunOptions(
            inventory=args.inventory,
            out=out,
            **{k: v for k, v in given.items() if v is not None and k != "inventory"},
        )
        previous = None
        resume = False
    if args.protocol is not None:
        protocol = None if args.protocol == "inventory" else args.protocol
        opts = dataclasses.replace(opts, protocol=protocol)
    if args.no_report:
        opts = dataclasses.replace(opts, report=False)
    code = _run(args, opts, resume, previous)
    if record is not None:
        record.append(code)
        from harness.report import history as hist

        gone = hist.prune(record.store, keep_runs=args.keep_runs, keep_days=args.keep_days)
        if gone:
            print(f"retention: {len(gone)} older run(s) of {record.store.target} removed")
    return code


@dataclasses.dataclass(frozen=True)
class _StoreRecord:
    """Where a longevity night goes in a results store, and its history line at the end."""

    store: TargetStore
    run_id: str
    started: str
    inventory: str

    @property
    def out(self) -> Path:
        return self.store.run_dir(self.run_id).resolve()

    def append(self, code: int) -> None:
        from harness import __version__
        from harness.report import history as hist

        results = self.out / "allure-results"
        run = hist.from_allure_results(
            results,
            run_id=self.run_id,
            target=self.store.target,
            started=self.started,
            finished=hist.utc_iso(),
            powercut_version=__version__,
            inventory=self.inventory,
            verdict=None if results.is_dir() else "broken",
        )
        hist.append_run(self.store.history, dataclasses.replace(run, exit_code=code))
        print(f"history: {self.store.history} (run {self.run_id})")


def _store_record(args: argparse.Namespace) -> _StoreRecord:
    from harness.inventory import load_inventory
    from harness.report import history as hist

    name = args.store_target or load_inventory(args.inventory).name or ""
    store = hist.target_store(args.store, hist.check_target(name))
    return _StoreRecord(store, hist.new_run_id(), hist.utc_iso(), str(args.inventory))


def _run(args: argparse.Namespace, opts: Any, resume: bool, previous: Any) -> int:
    from harness.longevity.run import run_longevity
    from harness.progress.display import showing

    try:
        with showing(args.progress, sys.stderr):
            outcome = run_longevity(
                opts,
                resume=resume,
                previous=previous,
                duration_given=args.duration is not None,
            )
    except UndoFailed as exc:
        print(f"powercut: error: {exc}", file=sys.stderr)
        return EXIT_RESTORE_FAILED
    except StoppedByCondition as exc:
        print(
            f"powercut: {exc}; the cycle's nodes were powered back on and that cycle is not "
            f"recorded. Continue, once it holds again, with: powercut longevity --resume "
            f"{opts.out}",
            file=sys.stderr,
        )
        return EXIT_STOPPED
    except KeyboardInterrupt:
        print(
            "powercut: interrupted: the nodes of the cycle in progress were powered back on; "
            f"that cycle is not recorded. Continue with: powercut longevity --resume {opts.out}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    result = outcome.result
    print(f"\nstopped: {result.reason}")
    if outcome.report is not None:
        _print_report(outcome.report, opts.out)
    if result.interrupted:
        return EXIT_INTERRUPTED
    if result.failed or result.statuses.get("missed") or result.statuses.get("failed"):
        return EXIT_FAILED
    return EXIT_PASSED
