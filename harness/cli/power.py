"""``powercut power``, ``powercut preflight`` and ``powercut recover``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.cli.context import add_context_option
from harness.clock import SYSTEM_CLOCK
from harness.driver_registry import installed_drivers
from harness.errors import ConfigError, PowercutError, TemporaryError
from harness.failures import FailureKind, strategy
from harness.inventory import Inventory, load_inventory
from harness.journal import Journal, UndoResult, recover_owed
from harness.kube.client import KubeClient
from harness.kube.lock import ClusterLock, ClusterLocked, lease_state, write_status
from harness.kube.target import ContextUnchecked, aim_at_context, client_for, context_shown
from harness.power.factory import driver_for
from harness.preflight import PreflightFailed, deep_preflight, preflight
from harness.rbac import Permission, feature_files, required, tiers_for
from harness.session import ClusterExecutor, Session, journal_path_for, recent_power_actions
from harness.settings import attached


def _inventory_and_protocol(p: argparse.ArgumentParser, protocol_help: str) -> None:
    p.add_argument("--inventory", "-i", required=True, type=Path, help="inventory YAML")
    p.add_argument(
        "--protocol",
        choices=installed_drivers(),
        default=None,
        help=f"{protocol_help} (default: the inventory's power driver)",
    )


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    power = sub.add_parser(
        "power",
        help="read or switch node power through the nodes' BMCs (journaled, recoverable)",
        description="Read or switch node power. Every power-off and power cycle is checked "
        "(pre-flight, blast radius) and journaled with its undo first, so `powercut recover` "
        "can power the node back on after a crash.",
    )
    psub = power.add_subparsers(dest="power_command", required=True, metavar="ACTION")
    for name, text in (
        ("status", "print each node's power state"),
        ("on", "power nodes on (settles the power-ons the journal owes for them)"),
        (
            "off",
            "power nodes off (a synchronized cut: every BMC prepared, then every request "
            "released together; safety-checked, journaled)",
        ),
        ("cycle", "power-cycle nodes (in parallel; safety-checked, journaled)"),
    ):
        p = psub.add_parser(name, help=text)
        p.add_argument("nodes", nargs="+", metavar="NODE")
        _inventory_and_protocol(p, "which of the node's endpoints to use")
        if name != "status":  # status reads the BMCs only
            add_context_option(p)
        if name == "off":
            p.add_argument("--graceful", action="store_true", help="ACPI-style graceful shutdown")
        if name in ("off", "cycle"):
            p.add_argument("--dry-run", action="store_true", help="print the plan, touch nothing")
            p.add_argument(
                "--skip-preflight",
                action="store_true",
                help="do not check the API server, the Nodes, their readiness and their BMCs "
                "first (said on the output)",
            )
        p.set_defaults(func=cmd_power)
    pre = sub.add_parser(
        "preflight",
        help="check the API server, the permissions, the nodes' readiness and their BMCs "
        "(read-only)",
        description="What `powercut power off` and `cycle` check before acting: the API "
        "server answers, each node is a Ready Node of the cluster, and its BMC answers; and "
        "that the credentials hold every permission the chosen features need (docs/rbac.md). "
        "One line per check; exit 0 when all pass, 2 otherwise.",
    )
    pre.add_argument("nodes", nargs="*", metavar="NODE", help="default: every inventory node")
    _inventory_and_protocol(pre, "which of the nodes' endpoints to check")
    add_context_option(pre)
    pre.add_argument(
        "--features",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="check the permissions these features need (repeatable; default: the built-in "
        "features): each verb by a SelfSubjectAccessReview, each missing one named",
    )
    pre.add_argument(
        "--no-permissions",
        action="store_true",
        help="do not check the credentials' permissions",
    )
    pre.add_argument(
        "--deep",
        action="store_true",
        help="probe every BMC of each node read-only instead (docs/ipmi.md): protocol, "
        "authentication, cipher suite / TLS and privilege negotiated, reset types allowed, "
        "certificate expiry, round trip and read-back time, and what each --failure kind "
        "will use there; one table; exit 2 naming every node that cannot serve the kinds",
    )
    pre.add_argument(
        "--failure",
        action="append",
        type=FailureKind.parse,
        metavar="KIND",
        help="with --deep: a failure kind the run will use (repeatable; "
        f"{', '.join(k.value for k in FailureKind)}); default: power, graceful, reboot",
    )
    pre.set_defaults(func=cmd_preflight)
    _add_recover(sub)


def _add_recover(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rec = sub.add_parser(
        "recover",
        help="undo whatever a crashed or interrupted run left (power on, uncordon, untaint)",
        description="Replay the journal of an inventory: run every undo still owed, "
        "power-ons first (they need only the BMCs, not the API server), then the others, "
        "newest first. An undo whose target already reads restored (a node that reads ON "
        "through any of its ways, a taint already gone) is settled without acting. The "
        "run that wrote the journal is judged once, alive or gone (a zombie is gone): a "
        "gone run's cluster lock is released with its journal; a live run's undos are left "
        "to it. What fails stays owed (exit 4): fix the cause and run it again. "
        "Idempotent: a second run does nothing.",
    )
    rec.add_argument("--inventory", "-i", required=True, type=Path, help="inventory YAML")
    add_context_option(rec)
    rec.add_argument("--journal", type=Path, default=None, help="journal file (default: derived)")
    rec.add_argument(
        "--lock",
        nargs="?",
        const=0.0,
        default=None,
        type=_seconds,
        metavar="WAIT",
        help="hold the target's cluster lock while recovering, as a run does: a run alive "
        "elsewhere (another pod or machine, whose journal entries this one cannot judge) "
        "holds it, and then nothing is undone (exit 5). WAIT (e.g. 90s): how long to wait "
        "for the lock, such as a killed runner's lease running out. If the API server does "
        "not answer, the power undos go ahead without the lock; if the lock is refused "
        "otherwise (a bad kubeconfig, a missing permission), nothing is undone (exit 2)",
    )
    rec.add_argument(
        "--when-owed",
        action="store_true",
        help="act only when the journal owes undos and the lock has no live holder (the "
        "chart's recover CronJob, every few minutes): with nothing owed, or with the lock "
        "held by a live run (whose undos are its own), exit 0 touching nothing",
    )
    rec.add_argument(
        "--status",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the check as JSON to FILE (STORE/<target>/recover.json, read by the page's "
        "/metrics): the lock and the undos owed as recover left them, what it found, the exit "
        "status, and when a check last found the lock held by a dead runner",
    )
    rec.set_defaults(func=cmd_recover)


def _seconds(text: str) -> float:
    t = text.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600}.get(t[-1:], 0)
    try:
        value = float(t[:-1] if scale else t) * (scale or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration (seconds, or with s/m/h: 90s, 2m)"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration cannot be negative")
    return value


def cmd_power(args: argparse.Namespace) -> int:
    inv = load_inventory(args.inventory)
    for n in args.nodes:
        inv.node(n)  # unknown node: clear error before anything happens
    action = args.power_command
    if action != "status":
        inv = aim_at_context(inv, args.context)
    if action == "status":

        def state(n: str) -> str:
            d = driver_for(inv.node(n), args.protocol, budgets=inv.timing_budgets())
            try:
                return d.state().value
            finally:
                d.close()

        with ThreadPoolExecutor(max_workers=8) as pool:
            states = list(pool.map(state, args.nodes))
        for n, st in zip(args.nodes, states, strict=True):
            proto = args.protocol or inv.node(n).power.driver
            print(f"{n:20} {proto:8} {st}")
        return 0
    dry_run = bool(getattr(args, "dry_run", False))
    client: KubeClient | None = None  # the session makes its own when it needs one
    try:
        if action in ("off", "cycle") and not args.skip_preflight:
            client = _client(inv)
        return _power(args, inv, client, dry_run)
    finally:
        if client is not None:
            client.close()


def _client(inv: Inventory) -> KubeClient:
    return client_for(inv)


def _preflight_before(
    args: argparse.Namespace, inv: Inventory, client: KubeClient, dry_run: bool
) -> None:
    failed: PreflightFailed | None = None
    try:
        result = preflight(inv, args.nodes, client, protocol=args.protocol)
    except PreflightFailed as exc:
        failed, result = exc, exc.result
    print("pre-flight:", flush=True)
    for line in result.lines():
        print(f"  {line}", flush=True)
    if failed is not None:
        if not dry_run:
            raise failed
        print("  a real run would stop here", flush=True)


def _power(
    args: argparse.Namespace, inv: Inventory, client: KubeClient | None, dry_run: bool
) -> int:
    action = args.power_command
    with Session(inv, client=client, dry_run=dry_run, undo_on_exit=False, say=_say) as s:
        # The pre-flight runs once the cluster lock is held: while another run holds it,
        # that run's outage is what a pre-flight would see, and the lock is the reason.
        if action in ("off", "cycle"):
            if args.skip_preflight:
                print("pre-flight checks skipped (--skip-preflight)", flush=True)
            else:
                assert client is not None  # made for the pre-flight by cmd_power
                _preflight_before(args, inv, client, dry_run)
        try:
            if action == "off":
                s.power_off(args.nodes, graceful=args.graceful, protocol=args.protocol)
            elif action == "cycle":
                s.power_cycle(args.nodes, protocol=args.protocol)
            else:
                s.power_on(args.nodes, protocol=args.protocol)
        except PowercutError:
            owed = sorted(s.journal_down()) if s.journal is not None else []
            if owed:
                print(
                    f"journal: {s.journal_path} owes a power-on for {', '.join(owed)} "
                    f"(undo with: powercut recover -i {args.inventory})",
                    file=sys.stderr,
                )
            raise
        if s.dry_run:
            print("dry run: nothing was changed. The plan:")
            for line in s.plan:
                print(f"  {line}")
        elif action == "off":
            print(f"journal: {s.journal_path} (undo with: powercut recover -i {args.inventory})")
    return 0


def needed_permissions(inv: Inventory, features: list[Path]) -> list[Permission]:
    """What the features (default: the built-in ones) need, in the inventory's namespaces."""
    from harness.steps import BUILTIN_FEATURES

    chosen = tiers_for(feature_files(features or [BUILTIN_FEATURES]))
    return required(
        chosen.tiers, sorted({w.namespace for w in inv.workloads} | {*chosen.namespaces})
    )


def _say(message: str) -> None:
    print(message, flush=True)


def cmd_preflight(args: argparse.Namespace) -> int:
    inv = load_inventory(args.inventory)
    nodes = args.nodes or inv.node_names()
    for n in nodes:
        inv.node(n)
    inv = aim_at_context(inv, args.context)
    if args.context:
        print(
            f"ok    context: {context_shown(inv)}: its cluster holds every one of the "
            f"inventory's {len(inv.nodes)} nodes"
        )
    if args.deep:
        return _deep(inv, nodes, args)
    if args.failure:
        raise ConfigError("--failure applies to --deep only")
    permissions: list[Permission] = []
    if not args.no_permissions:
        permissions = needed_permissions(inv, args.features)
    client = _client(inv)
    try:
        result = preflight(inv, nodes, client, protocol=args.protocol, permissions=permissions)
    except PreflightFailed as exc:
        for line in exc.result.lines():
            print(line)
        print(
            f"pre-flight failed: {len(exc.failed)} of {len(exc.result.checks)} checks",
            file=sys.stderr,
        )
        return 2
    finally:
        client.close()
    for line in result.lines():
        print(line)
    return 0


def _deep(inv: Inventory, nodes: list[str], args: argparse.Namespace) -> int:
    kinds = args.failure or [FailureKind.POWER_OFF, FailureKind.GRACEFUL, FailureKind.REBOOT]
    judges = {k.value: strategy(k).served_by for k in kinds}
    result = deep_preflight(inv, nodes, judges, protocol=args.protocol)
    for line in result.table():
        print(line)
    for row in result.rows:
        if row.report is not None and row.report.offered:
            print(f"offers {row.node} {row.protocol}: {row.report.offered}")
        for note in row.report.notes if row.report else ():
            print(f"note {row.node} {row.protocol}: {note}")
    unfit = result.unfit
    if unfit:
        print(
            f"pre-flight --deep: {len(unfit)} of {len(nodes)} nodes cannot serve "
            f"{', '.join(result.kinds)}: {', '.join(unfit)}",
            file=sys.stderr,
        )
        return 2
    return 0


def _print_undo(result: UndoResult) -> None:
    took = f" ({result.seconds:.1f} s)" if result.seconds is not None else ""
    if result.ok and result.note:
        print(f"  settled{took}: {result.description}: {result.note}", flush=True)
    elif result.ok:
        print(f"  done{took}: {result.description}", flush=True)
    else:
        print(f"  FAILED{took}: {result.description}: {result.error}", flush=True)


def cmd_recover(args: argparse.Namespace) -> int:
    """Power undos first and without the API; then the Kubernetes undos and the stale lock.

    Whatever cannot be done (the API server is down, a BMC does not answer) is reported as
    FAILED with its reason, stays owed in the journal, and makes the exit status 4. With
    ``--status FILE`` the check is written there as JSON (the page's /metrics reads it):
    see :func:`_status`.
    """
    inv = _recover_aimed(load_inventory(args.inventory), getattr(args, "context", None))
    path = args.journal or journal_path_for(inv, attached(args))
    status_file: Path | None = getattr(args, "status", None)
    if status_file is None:
        return _cmd_recover(args, inv, path)

    def lock() -> dict[str, object]:
        return lease_state(lambda: client_for(inv))

    found = {"checked": time.time(), "owed": _owed(path), "lock": lock()}
    code = 2
    try:
        code = _cmd_recover(args, inv, path)
        return code
    finally:
        after = {"owed": _owed(path), "lock": lock(), "exit_code": code}
        write_status(status_file, _status(found, after, _previous(status_file)))


def _recover_aimed(inv: Inventory, context: str | None) -> Inventory:
    """The inventory aimed at ``--context``. A cluster that does not answer cannot be
    checked now, and recover goes on: the power-ons need only the BMCs, and the first client
    of the cluster (for the Kubernetes undos) checks it then (``client_for``)."""
    try:
        return aim_at_context(inv, context)
    except ContextUnchecked as exc:
        print(f"not checked yet: {exc}; the power undos go ahead", flush=True)
        assert context
        return inv.with_context(context)


def _status(
    found: dict[str, Any], after: dict[str, Any], previous: dict[str, Any]
) -> dict[str, object]:
    """A recover check's record: ``lock`` and ``owed`` as the check left them (a recover
    that took a dead runner's lock has released it: the lock reads free, not dead), what it
    ``found`` before acting, and ``dead_holder``: the last time a check found the lock held
    by a holder that had stopped renewing it (a runner killed mid-run), carried over from
    the ``previous`` record so that the next check, finding nothing, does not forget it."""
    out: dict[str, object] = {
        "checked": found["checked"],
        "finished": time.time(),
        "found": {"owed": found["owed"], "lock": found["lock"]},
        **after,
    }
    lock = found["lock"]
    if lock.get("held") and not lock.get("holder_alive"):
        out["dead_holder"] = {"holder": lock.get("holder", ""), "seen": found["checked"]}
    elif isinstance(previous.get("dead_holder"), dict):
        out["dead_holder"] = previous["dead_holder"]
    return out


def _previous(status_file: Path) -> dict[str, Any]:
    """The previous check's record at ``status_file`` (empty if there is none or it cannot
    be read: written whole by a rename, so only a foreign file is unreadable)."""
    try:
        doc = json.loads(status_file.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _owed(path: Path) -> int:
    """How many undos the journal at ``path`` owes (read without its lock: a live run
    holds that)."""
    return sum(1 for e in Journal.read(path) if e.owes_undo) if path.exists() else 0


def _cmd_recover(args: argparse.Namespace, inv: Inventory, path: Path) -> int:
    held: ClusterLock | None = None
    when_owed = bool(getattr(args, "when_owed", False))
    if when_owed and not _owed(path):
        print(f"nothing owed in {path}: nothing to do")
        return 0
    if getattr(args, "lock", None) is not None:
        try:
            held = _take_lock(lambda: client_for(inv), args.lock)
        except ClusterLocked as exc:
            if when_owed:
                print(
                    "not now: the lock is held (by a live run, or by a killed one until its "
                    f"lease runs out): {exc}"
                )
                return 0
            print(f"not recovering: {exc}", file=sys.stderr)
            return 5
    try:
        return _recover(inv, path)
    finally:
        if held is not None:
            held.release()
            held.client.close()


def _without_lock(exc: PowercutError) -> None:
    """Whether recover may go on without the lock after ``exc``: only when the API server
    does not answer (unreachable, 5xx, 429; power undos need only the BMCs). A refused
    permission or a wrong kubeconfig is no outage: going on would undo, unlocked, what a run
    alive elsewhere may still own, so that error stops recover with nothing undone."""
    if isinstance(exc, TemporaryError):
        print(f"the API server does not answer ({exc}): recovering without the lock")
        return
    print(
        "not recovering: the cluster lock cannot be taken, and only an API server that does "
        "not answer lets recover go on without it",
        file=sys.stderr,
    )
    raise exc


def _take_lock(client_of: Callable[[], KubeClient], wait_s: float) -> ClusterLock | None:
    """The cluster lock, waiting up to ``wait_s`` for another holder's lease to run out;
    None when the API server does not answer (power undos need only the BMCs). Any other
    error (a bad kubeconfig, a refused permission) is raised: nothing is undone."""
    deadline = time.monotonic() + wait_s
    said = False
    while True:
        try:
            client = client_of()
        except PowercutError as exc:
            _without_lock(exc)
            return None
        lock = ClusterLock(client)
        try:
            lock.acquire()
        except ClusterLocked as exc:
            client.close()
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            if not said:
                print(f"waiting up to {left:.0f} s for the cluster lock: {exc}", flush=True)
                said = True
            SYSTEM_CLOCK.sleep(min(5.0, left))
            continue
        except PowercutError as exc:
            client.close()
            _without_lock(exc)
            return None
        print(f"holding the cluster lock while recovering ({lock.holder})", flush=True)
        return lock


def _recover(inv: Inventory, path: Path) -> int:
    """The journal's recovery (:func:`harness.journal.recover_owed`) against the cluster and
    its BMCs, told as it goes; the exit status."""
    if not path.exists():
        print(f"nothing to recover: no journal at {path}")
        return 0
    executor = ClusterExecutor(inv, lambda: client_for(inv))
    try:
        done = recover_owed(
            path,
            executor,
            settling=lambda entries: recent_power_actions(inv, entries),
            release_lock=executor.release_stale_lock,
            say=lambda text: print(text, flush=True),
            on_result=_print_undo,
        )
    finally:
        executor.close()
    if not done.ok:
        print(f"{done.problems()}; fix the cause and run recover again", file=sys.stderr)
        return 4
    return 0
