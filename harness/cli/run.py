"""``powercut run`` (the feature suite, a report, a trustworthy exit code) and ``report``."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import datetime as dt
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from harness import __version__
from harness.cli.context import add_context_option
from harness.errors import ConfigError, PowercutError
from harness.inventory import load_inventory
from harness.journal import Journal
from harness.session import journal_path_for
from harness.settings import Settings, attached, or_environment

if TYPE_CHECKING:
    from harness.inventory import Inventory
    from harness.model import ClusterModel
    from harness.report import history as hist
    from harness.report.history import TargetStore

# Exit codes of `powercut run`, documented in --help and the README.
EXIT_PASSED = 0
EXIT_FAILED = 1  # scenario failures (the cluster did not behave within its budgets)
EXIT_HARNESS = 2  # harness or infrastructure error (bad inventory, BMC down, broken step)
EXIT_INTERRUPTED = 3  # interrupted, and the cluster was restored
EXIT_RESTORE_FAILED = 4  # something is still disrupted: run `powercut recover`
EXIT_STOPPED = 5  # a stop condition (SLO or alert) breached: stopped, cluster restored

EPILOG = """exit codes:
  0  all scenarios passed (skipped ones too, unless --fail-on-skip) and every sign-off gate
  1  scenario failures (the cluster did not behave, or not within its budgets), a sign-off
     gate that failed (each is named), or with --fail-on-skip a skipped scenario
  2  harness or infrastructure error (inventory, BMC, API unreachable, broken step)
  3  interrupted (Ctrl-C, SIGINT, SIGTERM, SIGHUP) with the cluster restored
  4  restore failed: some disruption is still in place; run `powercut recover -i INVENTORY`
  5  stopped by a stop condition of the inventory (an SLO or alert breached), with the
     cluster restored; the scenario says which condition and what it saw
"""


def default_steps_dir() -> Path:
    """The installed step grammar's package: its test modules bind the built-in features
    and the ``--features`` directories."""
    from harness.steps import PACKAGE_DIR

    return PACKAGE_DIR


def selected_features(dirs: list[Path], *, builtin: bool) -> list[Path]:
    """The feature files a run binds: the built-in ones (unless ``--no-builtin``) and every
    ``*.feature`` under the ``--features`` directories."""
    paths: list[Path] = []
    if builtin:
        from harness.steps import BUILTIN_FEATURES

        paths += sorted(BUILTIN_FEATURES.glob("*.feature"))
        paths += sorted((BUILTIN_FEATURES / "longevity").glob("*.feature"))
    for d in dirs:
        paths += sorted(d.rglob("*.feature"))
    return paths


#: powercut run's own pytest configuration (see the file).
PYTEST_INI = Path(__file__).with_name("pytest-run.ini")


def pytest_command(steps: Path) -> list[str]:
    """The pytest child's command up to the run's own options: the test modules in ``steps``,
    with powercut's configuration file and ``steps`` as the rootdir, whatever pytest
    configuration lies above the working directory, the inventory or the features (their
    files then need not be under the rootdir: :mod:`harness.report.title_path`). Node ids are
    ``test_features.py::test_...`` wherever the package is installed; no ``.pytest_cache``
    is written (the package may be read-only)."""
    return [
        sys.executable,
        "-m",
        "pytest",
        str(steps),
        "-c",
        str(PYTEST_INI),
        "--rootdir",
        str(steps),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:allure_pytest",
    ]


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``powercut run``, ``report`` and ``compare``."""
    run = _add_run(sub)
    _add_run_results(run)
    run.set_defaults(func=cmd_run)
    _add_report(sub)
    _add_compare(sub)


# -- powercut run: what runs against what -------------------------------------------------


def _add_run(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    run = sub.add_parser(
        "run",
        help="run the failure features against a cluster and write the HTML report",
        description="Run the Gherkin failure features with pytest, write DIR/allure-results, "
        "DIR/junit.xml and DIR/index.html, print a summary and the report's path. Extra "
        "arguments go to pytest (e.g. -k rack, -m 'not slow'). pytest runs with powercut's own "
        "configuration: no pytest.ini, tox.ini, setup.cfg or pyproject.toml around the working "
        "directory, the inventory or the features is read, so the features, the inventory "
        "and the working directory may be anywhere.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "--inventory",
        "-i",
        type=Path,
        default=Path("inventories/lab.yaml"),
        help="inventory YAML (default inventories/lab.yaml, written by `powercut lab up`)",
    )
    add_context_option(run)
    run.add_argument(
        "--out", type=Path, default=None, help="output directory (default reports/<timestamp>)"
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="validate the inventory, list the scenarios and their steps; touch nothing",
    )
    run.add_argument(
        "--keep-on-failure",
        action="store_true",
        help="leave a failed scenario's disruption in place as evidence "
        "(undo later with `powercut recover`)",
    )
    run.add_argument(
        "--features",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="a directory of your own .feature files (searched recursively), run with "
        "powercut's step vocabulary next to the built-in features; repeatable",
    )
    run.add_argument(
        "--seed",
        type=int,
        default=None,
        metavar="N",
        help="seed of the random choices of targets (ranges such as '1-2 worker nodes'); "
        "every run prints its seed and the report shows it: --seed N replays those choices",
    )
    run.add_argument(
        "--no-builtin",
        action="store_true",
        help="run only the --features directories, not the built-in features",
    )
    run.add_argument(
        "--steps",
        type=Path,
        default=None,
        help="a directory of pytest test modules to run instead of the built-in bindings "
        "(default: the installed steps package); with it, the features' sentences and tags "
        "are not checked against the built-in grammar before the run (their syntax is)",
    )
    return run


# -- powercut run: where the results go and how they are judged ----------------------------


def _add_run_results(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--previous",
        type=Path,
        default=None,
        help="a previous report directory, to continue its history trend",
    )
    run.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="DIR",
        help="a results store: the run goes to DIR/<target>/runs/<run id>/ (instead of "
        "--out), its record is appended to DIR/<target>/history.jsonl, and the report "
        "continues the target's trends (DIR/<target>/allure-history.jsonl)",
    )
    run.add_argument(
        "--target",
        default=None,
        metavar="NAME",
        help="the target cluster's name in the store (default: the inventory's name)",
    )
    run.add_argument(
        "--keep-runs",
        type=int,
        default=0,
        metavar="N",
        help="with --store: after the run, keep the target's newest N runs (history lines "
        "and run directories), remove older ones (default 0: no limit)",
    )
    run.add_argument(
        "--keep-days",
        type=float,
        default=0,
        metavar="DAYS",
        help="with --store: after the run, remove the target's runs started more than DAYS "
        "days ago (default 0: no limit); the run just made is always kept",
    )
    run.add_argument(
        "--signoff",
        type=Path,
        default=None,
        metavar="FILE",
        help="the sign-off rules (gates, trends; default: signoff.yaml beside the inventory, "
        "else every gate but max_skipped and no_regression): a failed gate fails the run "
        "(exit 1) and is named",
    )
    run.add_argument("--no-html", action="store_true", help="skip the HTML report")
    run.add_argument(
        "--title",
        default=None,
        metavar="TEXT",
        help="what this run is, e.g. which set of scenarios it ran: the HTML report's name "
        "and a line under the sign-off page's verdict (default: 'powercut: <inventory name>', "
        "no line)",
    )
    run.add_argument(
        "--progress",
        choices=("auto", "rich", "plain", "off"),
        default="auto",
        help="what the terminal shows while the scenarios run: the scenario, its step and "
        "each wait against its budget, live (rich) or as lines (plain, for CI logs); auto: "
        "rich on a terminal, else plain. pytest's own output and third-party warnings go to "
        "DIR/run.log (with `powercut -v run` to the terminal, with plain progress)",
    )
    run.add_argument(
        "--fail-on-skip",
        action="store_true",
        help="count a skipped scenario (nothing in the cluster fits it, a protocol missing) "
        "as a failure: exit 1 and say why each was skipped. For a cluster meant to run every "
        "scenario, e.g. the lab in CI; by default skips are reported but pass",
    )


# -- powercut report, powercut compare -------------------------------------------------------


def _add_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rep = sub.add_parser(
        "report",
        help="render allure-results into one self-contained HTML file",
        description="Render an allure-results directory into DIR/index.html (offline, one file).",
    )
    rep.add_argument("results", type=Path, help="allure-results directory")
    rep.add_argument("-o", "--out", type=Path, required=True, help="output directory")
    rep.add_argument("--title", default="powercut report")
    rep.add_argument("--previous", type=Path, default=None, help="previous report (history)")
    rep.add_argument(
        "--signoff",
        type=Path,
        default=None,
        metavar="FILE",
        help="open the report on the sign-off page, its gates judged by these rules (the "
        "format of signoff.yaml, docs/signoff.md); exit 1 naming a failed gate",
    )
    rep.add_argument(
        "--store",
        type=Path,
        default=None,
        metavar="DIR",
        help="results store whose target's earlier runs give the trends and regressions "
        "(read only: a re-rendered run is not appended); with --target",
    )
    rep.add_argument("--target", default=None, metavar="NAME", help="target in the store")
    rep.set_defaults(func=cmd_report)


def _add_compare(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmp = sub.add_parser(
        "compare",
        help="two runs side by side: verdicts, durations, phases, SLOs (text and HTML)",
        description="Print two runs side by side (B - A; '!' marks what got worse in B) and "
        "write the same as one HTML file. A run is a run id in a results store (--store, "
        "--target; a unique prefix will do), a run directory of a store, or a directory "
        "with allure-results.",
    )
    cmp.add_argument("run_a", metavar="RUN_A")
    cmp.add_argument("run_b", metavar="RUN_B")
    cmp.add_argument("--store", type=Path, default=None, metavar="DIR", help="results store")
    cmp.add_argument("--target", default=None, metavar="NAME", help="target in the store")
    cmp.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="FILE",
        help="where to write the HTML (default compare-<A>-<B>.html here)",
    )
    cmp.set_defaults(func=cmd_compare)


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report import history as hist
    from harness.report.gates import SignOff, load_signoff
    from harness.report.html import render_report
    from harness.report.signoff import describe_failed_gates, sign_off

    if not args.results.is_dir():
        raise ConfigError("not a directory", source=str(args.results))
    if (args.store is None) != (args.target is None):
        raise ConfigError("--store and --target go together", field="--target")
    previous: tuple[hist.Run, ...] = ()
    history_path: Path | None = None
    if args.store is not None:
        store = hist.target_store(args.store, hist.check_target(args.target))
        previous = hist.read_history(store.history).runs
        history_path = store.allure_history
    # A store's run directory holds its allure-results: its name is the run id, and a run
    # re-rendered is compared with the runs before it only.
    run_id = args.results.resolve().parent.name
    ids = [r.run_id for r in previous]
    if run_id in ids:
        previous = previous[: ids.index(run_id)]
    signed = None
    if args.signoff is not None or args.store is not None:
        started, finished = _results_span(args.results)
        signed = sign_off(
            args.results,
            load_signoff(args.signoff) if args.signoff is not None else SignOff(),
            run_id=run_id,
            target=args.target or "",
            started=started,
            finished=finished,
            powercut_version=__version__,
            inventory="",
            previous=previous,
        )
    path = render_report(
        args.results,
        args.out,
        title=args.title,
        previous=args.previous,
        history_path=history_path,
        gates=signed.gates_for_allure if signed else None,
        signoff_html=signed.page if signed else None,
    )
    print(f"report: {path}")
    if signed is None:
        return 0
    failed_gates = describe_failed_gates(signed.evaluation)
    for line in failed_gates:
        print(f"powercut: {line}", file=sys.stderr)
    return EXIT_FAILED if failed_gates else EXIT_PASSED


def _results_span(results: Path) -> tuple[str, str]:
    """When the results' scenarios started and stopped (UTC ISO), from their ms stamps."""
    import json

    from harness.report import history as hist

    stamps: list[int] = []
    for path in results.glob("*-result.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        stamps += [v for k in ("start", "stop") if isinstance(v := data.get(k), int)]
    if not stamps:
        now = hist.utc_iso()
        return now, now

    def iso(ms: int) -> str:
        return hist.utc_iso(dt.datetime.fromtimestamp(ms / 1000, dt.UTC))

    return iso(min(stamps)), iso(max(stamps))


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.report.compare import compare_html, compare_text, load_run

    a = load_run(args.run_a, store=args.store, target=args.target)
    b = load_run(args.run_b, store=args.store, target=args.target)
    print(compare_text(a, b), end="")
    out: Path = args.html or Path(f"compare-{a.run_id}-{b.run_id}.html")
    out.write_text(compare_html(a, b), encoding="utf-8")
    print(f"html: {out}")
    return 0


def _verdicts(results: Path) -> dict[str, int]:
    from harness.report.summary import load_allure_results

    counts: dict[str, int] = {}
    for s in load_allure_results(results).scenarios:
        counts[s.verdict] = counts.get(s.verdict, 0) + 1
    return counts


def _skipped(results: Path, junit: Path) -> list[tuple[str, str]]:
    """(scenario, why) of every skipped scenario. From JUnit XML, which lists every test
    pytest collected (a scenario skipped before its first step has no Allure result), else
    from the Allure results."""
    from harness.report.summary import load_allure_results, load_junit

    summary = load_junit(junit) if junit.is_file() else load_allure_results(results)
    return [
        (s.name, s.message.splitlines()[0] if s.message else "no reason given")
        for s in summary.scenarios
        if s.verdict == "skipped"
    ]


def _stopped(results: Path) -> str | None:
    """The message of a scenario a stop condition stopped (``StoppedByCondition``), if any."""
    from harness.report.allure_env import STOPPED, classify
    from harness.report.summary import load_allure_results

    for s in load_allure_results(results).scenarios:
        if classify(s.verdict, s.message) == STOPPED:
            return s.message.splitlines()[0].split(": ", 1)[-1]
    return None


#: What ``powercut run`` passes on to the pytest child. SIGHUP (the terminal went away)
#: becomes SIGTERM, which the scenarios answer by undoing their disruptions.
FORWARDED: dict[signal.Signals, signal.Signals] = {
    signal.SIGINT: signal.SIGINT,
    signal.SIGTERM: signal.SIGTERM,
    signal.SIGHUP: signal.SIGTERM,
}
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _own_group_and_die_with(parent: int) -> None:
    """In the child, before pytest starts: its own process group, and SIGTERM when the
    parent dies (Linux; elsewhere only the process group)."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before prctl
        os.kill(os.getpid(), signal.SIGTERM)


def _run_pytest(
    cmd: list[str],
    *,
    log: Path | None = None,
    progress_mode: str = "off",
    settings: Settings | None = None,
) -> tuple[int, bool]:
    """Run the pytest child to its end; return its exit code and whether it was interrupted.

    The child runs in a process group of its own, so a Ctrl-C at the terminal reaches only
    this process, and every SIGINT or SIGTERM sent to this process is passed on exactly once
    (a second SIGINT arriving straight from the terminal could abort the undos). The
    scenarios answer it by undoing their disruptions; this process waits for them. If this
    process dies, the child gets SIGTERM (Linux), rather than run on with nobody to report.
    """
    child: subprocess.Popen[bytes] | None = None
    pending: list[signal.Signals] = []
    interrupted = False

    def forward(signum: int, frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        sig = FORWARDED[signal.Signals(signum)]
        print(
            f"powercut: {signal.Signals(signum).name}: stopping; the scenarios undo their "
            "disruptions (repeat to interrupt the undo)",
            file=sys.stderr,
        )
        if child is None:
            pending.append(sig)  # not started yet: sent as soon as it is
        else:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(sig)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    pass_fds: tuple[int, ...] = ()
    sink: IO[bytes] | None = None
    terminal: int | None = None
    if log is not None:
        # pytest's output (and every library's warnings) to the log; the progress display
        # to this process's stderr, handed over as a file descriptor of its own.
        terminal = os.dup(sys.stderr.fileno())  # not fd 2: the child's fd 2 is the log
        pass_fds = (terminal,)
        sink = log.open("wb")
    env = {**os.environ, **or_environment(settings).progress_environ(progress_mode, terminal)}
    try:
        parent = os.getpid()
        child = subprocess.Popen(
            cmd,
            preexec_fn=lambda: _own_group_and_die_with(parent),
            env=env,
            pass_fds=pass_fds,
            stdout=sink,
            stderr=subprocess.STDOUT if sink is not None else None,
        )
        for sig in pending:
            child.send_signal(sig)
        rc = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if sink is not None:
            sink.close()
            os.close(pass_fds[0])
    return rc, interrupted


def _tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


#: Each request reading the cluster's model (read-only, before the run) waits at most this.
MODEL_READ_TIMEOUT_S = 10.0


def _model_or_refuse(inv: Inventory, features: list[Path]) -> ClusterModel | None:
    """The cluster's model, read before anything is touched; a ``ConfigError`` naming each
    budget the features use that the model says cannot hold. None (said on stderr) when
    the cluster cannot be read: the run then judges against the budgets alone."""
    from harness.kube.target import client_for
    from harness.model import read_model
    from harness.model.refuse import refusals

    try:
        client = client_for(inv, timeout_s=MODEL_READ_TIMEOUT_S)
        try:
            model = read_model(client, inv.workloads)
        finally:
            client.close()
    except PowercutError as exc:
        print(
            f"powercut: the cluster's model was not read ({exc}); budgets not checked against it",
            file=sys.stderr,
        )
        return None
    refused = refusals(model, inv.timing_budgets(), features)
    if refused:
        raise ConfigError(
            "budgets below what this cluster's own settings allow (nothing was touched):\n  "
            + "\n  ".join(refused),
            source=str(inv.source or ""),
            field="budgets",
        )
    return dataclasses.replace(model, budgets=inv.timing_budgets().as_dict())


def cmd_run(args: argparse.Namespace, extra: list[str] | None = None) -> int:
    from harness.kube.target import aim_at_context

    inv = load_inventory(args.inventory)  # a bad inventory: one clear error, exit 2
    # --context: resolved as kubectl does, its cluster checked to hold the inventory's nodes
    inv = aim_at_context(inv, args.context)
    steps = (args.steps or default_steps_dir()).resolve()
    if not steps.is_dir():
        raise ConfigError("no step definitions here; pass --steps DIR", source=str(steps))
    feature_args = _feature_args(args)
    _check_features(args, inv)
    # The cluster's own model (read-only): a budget it says cannot hold is refused here too.
    model = _model_or_refuse(inv, selected_features(args.features, builtin=not args.no_builtin))
    extra = list(extra or [])
    if extra[:1] == ["--"]:
        # `powercut run -i X -- -k rack`: the separator is ours; pytest would read every
        # argument after a `--` as a file name.
        extra = extra[1:]
    pytest_args = [*feature_args, *extra]
    # Sign-off rules, the store and its history: read (and any mistake named) before anything
    # is touched.
    from harness.report.gates import signoff_for

    signoff = signoff_for(args.inventory, args.signoff)
    where = _store(args, inv)
    if args.dry_run:
        return _dry_run(args, inv, steps, pytest_args)
    return _run(args, inv, steps, pytest_args, signoff, where, model)


# -- before anything is touched: the features, their check, the store -----------------------


def _feature_args(args: argparse.Namespace) -> list[str]:
    """The features to run as the plugin's options, each directory checked."""
    if args.no_builtin and not args.features:
        raise ConfigError(
            "--no-builtin leaves nothing to run: add --features DIR", field="--no-builtin"
        )
    feature_args: list[str] = []
    for d in args.features:
        if not d.is_dir():
            raise ConfigError(
                "not a directory of .feature files", source=str(d), field="--features"
            )
        if not any(d.rglob("*.feature")):
            raise ConfigError(
                "no .feature file in this directory", source=str(d), field="--features"
            )
        feature_args += ["--features", str(d.resolve())]
    if args.no_builtin:
        feature_args.append("--no-builtin")
    if args.seed is not None:
        feature_args += ["--seed", str(args.seed)]
    if args.context:  # the pytest child aims its inventory too (and checks it again)
        feature_args += ["--context", args.context]
    return feature_args


def _check_features(args: argparse.Namespace, inv: Inventory) -> None:
    """Every feature parsed and every sentence matched before anything runs: a typo or a
    syntax error is one harness error naming file and line, never a half-run scenario."""
    from harness.steps.check import check_features
    from harness.steps.support.tags import MARKERS, project_tags, pytest_markers

    own = args.steps is None  # --steps DIR may define steps and tags of its own
    starts = [*args.features, Path.cwd()]
    tags = {*MARKERS, *project_tags(starts), *pytest_markers(starts)} if own else None
    check_features(
        selected_features(args.features, builtin=not args.no_builtin),
        steps=own,
        tags=tags,
        inventory=inv,
        builtin=set(selected_features([], builtin=True)),
    )


@dataclass(frozen=True)
class _Where:
    """Where a run's results go: the results store (None: ``--out`` or reports/), its
    earlier runs, and the target's name."""

    store: hist.TargetStore | None
    previous: tuple[hist.Run, ...]
    target: str


def _store(args: argparse.Namespace, inv: Inventory) -> _Where:
    from harness.report import history as hist

    store: hist.TargetStore | None = None
    previous: tuple[hist.Run, ...] = ()
    target = args.target or inv.name or ""
    if args.store is not None:
        if args.out is not None:
            raise ConfigError("give --out or --store, not both", field="--out")
        if not target:
            raise ConfigError(
                "the inventory has no name: give the target's name with --target",
                field="--target",
            )
        if args.target:
            hist.check_target(target)
        else:
            hist.check_target(target, field="name", source=str(args.inventory))
        store = hist.target_store(args.store, target)
        previous = hist.read_history(store.history).runs
    elif args.target is not None:
        raise ConfigError("--target names a target in a results store: add --store DIR")
    return _Where(store, previous, target)


def _dry_run(args: argparse.Namespace, inv: Inventory, steps: Path, pytest_args: list[str]) -> int:
    """List the scenarios pytest would run; nothing is touched."""
    out = subprocess.run(
        [
            *pytest_command(steps),
            "--collect-only",
            "-q",
            "--inventory",
            str(args.inventory.resolve()),
            *pytest_args,
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    from harness.kube.target import context_shown

    print(
        f"dry run: inventory {args.inventory} is valid ({len(inv.nodes)} nodes); context "
        f"{context_shown(inv)}; nothing will be touched. Scenarios:"
    )
    for line in out.stdout.splitlines():
        if "::" in line:
            print(f"  {line}")
    if out.returncode != 0:
        print(f"powercut: pytest could not collect (exit {out.returncode}):", file=sys.stderr)
        print("\n".join((out.stdout + out.stderr).splitlines()[-15:]), file=sys.stderr)
        return EXIT_HARNESS
    return EXIT_PASSED


# -- the run: pytest, then the report and the exit code ---------------------------------------


def _run(
    args: argparse.Namespace,
    inv: Inventory,
    steps: Path,
    pytest_args: list[str],
    signoff: Any,
    where: _Where,
    model: ClusterModel | None,
) -> int:
    from harness.report import history as hist

    now = dt.datetime.now(dt.UTC)
    started = hist.utc_iso(now)
    run_id = hist.new_run_id(now)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    store = where.store
    out_dir: Path = (
        store.run_dir(run_id) if store is not None else args.out or Path("reports") / stamp
    )
    results = out_dir / "allure-results"
    results.mkdir(parents=True, exist_ok=True)
    if model is not None:
        model.save(results)  # kept with the run: the report's model column reads it
    from harness.kube.target import context_shown

    print(
        f"powercut {__version__}: running {steps} against {args.inventory} (context "
        f"{context_shown(inv)}) -> {out_dir}"
    )
    log, rc, interrupted = _pytest(args, steps, pytest_args, results, out_dir)
    journal = journal_path_for(inv, attached(args))
    owed = []
    if journal.exists():
        with Journal(journal) as j:
            owed = j.pending_undos()
    from harness.report.allure_env import inventory_environment, prepare_results

    # Merged into what the features wrote while they ran (the Kubernetes version, ...).
    prepare_results(results, environment=inventory_environment(inv), previous_report=args.previous)
    from harness.report.signoff import describe_failed_gates, sign_off

    signed = sign_off(
        results,
        signoff,
        run_id=run_id,
        target=where.target,
        started=started,
        finished=hist.utc_iso(),
        powercut_version=__version__,
        inventory=str(args.inventory),
        seed=args.seed,
        previous=where.previous,
        title=args.title or "",
    )
    html = _html(args, inv, results, out_dir, store, signed)
    from harness.report.summary import summarize

    print(summarize(results))
    if html:
        print(f"report: {html}")
    print(f"junit:  {out_dir / 'junit.xml'}")
    if log is not None:
        print(f"log:    {log}")
    if store is not None:
        print(f"history: {store.history} (run {run_id})")
    failed_gates = describe_failed_gates(signed.evaluation)
    code = _exit_status(args, rc, interrupted, results, out_dir, failed_gates, len(owed))
    if store is not None:
        # the exit status with the record: the page and /metrics tell 4 from 1
        hist.append_run(
            store.history, dataclasses.replace(signed.run, exit_code=code, restores_owed=len(owed))
        )
        _apply_retention(store, args.keep_runs, args.keep_days)
    return code


def _exit_status(
    args: argparse.Namespace,
    rc: int,
    interrupted: bool,
    results: Path,
    out_dir: Path,
    failed_gates: list[str],
    owed: int,
) -> int:
    """The run's exit status (the EXIT_* codes), saying why on stderr."""
    for line in failed_gates:
        print(f"powercut: {line}", file=sys.stderr)
    if owed:
        print(
            f"powercut: {owed} disruption(s) still in place; run: powercut recover -i "
            f"{args.inventory}",
            file=sys.stderr,
        )
        return EXIT_RESTORE_FAILED
    return _exit_code(args, results, out_dir, rc, interrupted, failed_gates)


def _pytest(
    args: argparse.Namespace,
    steps: Path,
    pytest_args: list[str],
    results: Path,
    out_dir: Path,
) -> tuple[Path | None, int, bool]:
    """Run the features under pytest: its log (None: to the terminal, ``--verbose``), its
    exit status and whether it was interrupted."""
    cmd = [
        *pytest_command(steps),
        "--inventory",
        # absolute, its links not followed: the journal is named after this path, and
        # `powercut recover -i` in another pod (a ConfigMap mount's links differ) must find it
        os.path.abspath(args.inventory),
        "--alluredir",
        str(results.resolve()),
        f"--junitxml={(out_dir / 'junit.xml').resolve()}",
        "-q",
    ]
    if args.keep_on_failure:
        cmd.append("--keep-on-failure")
    verbose = bool(getattr(args, "verbose", False))
    log = None if verbose else out_dir / "run.log"
    from harness.progress.display import choose_mode

    mode = choose_mode(
        "plain" if verbose and args.progress == "auto" else args.progress, sys.stderr
    )
    if verbose and mode == "rich":
        mode = "plain"  # pytest writes to the same terminal: a live panel would garble it
    sys.stdout.flush()
    rc, interrupted = _run_pytest(
        [*cmd, *pytest_args], log=log, progress_mode=mode, settings=attached(args)
    )
    if log is not None and rc in (3, 4, 5):
        # pytest could not run the scenarios (internal error, usage, nothing collected):
        # its own words are in the log; show their end.
        print(f"powercut: pytest exited {rc}; the end of {log}:", file=sys.stderr)
        print(_tail(log), file=sys.stderr)
    return log, rc, interrupted


def _html(
    args: argparse.Namespace,
    inv: Inventory,
    results: Path,
    out_dir: Path,
    store: hist.TargetStore | None,
    signed: Any,
) -> Path | None:
    """The single-file HTML report (None: ``--no-html``, or it could not be written)."""
    if args.no_html:
        return None
    from harness.report.html import render_report

    try:
        return render_report(
            results,
            out_dir,
            title=args.title or f"powercut: {inv.name or 'run'}",
            previous=args.previous,
            history_path=store.allure_history if store is not None else None,
            gates=signed.gates_for_allure,
            signoff_html=signed.page,
        )
    except PowercutError as exc:
        print(f"powercut: HTML report not written: {exc}", file=sys.stderr)
        return None


def _exit_code(
    args: argparse.Namespace,
    results: Path,
    out_dir: Path,
    rc: int,
    interrupted: bool,
    failed_gates: list[str],
) -> int:
    """The run's exit code, once nothing is owed (see ``powercut run --help``)."""
    stopped = _stopped(results)
    if stopped:
        print(f"powercut: {stopped}", file=sys.stderr)
        return EXIT_STOPPED
    counts = _verdicts(results)
    if rc == 2 or interrupted:  # pytest: interrupted
        return EXIT_INTERRUPTED
    if rc in (3, 4, 5) or counts.get("broken"):
        return EXIT_HARNESS
    if rc == 1 or counts.get("failed") or failed_gates:
        return EXIT_FAILED
    skipped = _skipped(results, out_dir / "junit.xml") if args.fail_on_skip else []
    if skipped:
        print(f"powercut: {len(skipped)} scenario(s) skipped, failures with --fail-on-skip:")
        for name, why in skipped:
            print(f"  {name}: {why}")
        return EXIT_FAILED
    return EXIT_PASSED


def _apply_retention(store: TargetStore, keep_runs: int, keep_days: float) -> None:
    """The target's retention (--keep-runs, --keep-days): older runs leave the history and
    their directories are removed; what was pruned is said."""
    from harness.report import history as hist

    pruned = hist.prune(store, keep_runs=keep_runs, keep_days=keep_days)
    if pruned:
        print(f"retention: {len(pruned)} older run(s) of {store.target} removed")
