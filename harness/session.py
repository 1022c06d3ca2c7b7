"""A disruption session: what every scenario, the CLI and the chaos extension act through.

A session holds the cluster lock (a Lease), journals every disruption with its undo
*before* acting (so ``powercut recover`` can finish the job after a crash), runs the undos
when the scenario ends, fails or is interrupted (Ctrl-C, SIGTERM), checks each disruption
against the inventory's blast-radius limits, and records its own actions in the timeline.
With ``dry_run`` it only describes what it would do.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from harness.errors import PermanentError, PowercutError, not_acted
from harness.inventory import Inventory
from harness.journal import (
    EntryState,
    Journal,
    JournalEntry,
    UndoResult,
    UndoSpec,
    UndoStack,
    install_signal_handlers,
    shield_signals,
)
from harness.kube import actions
from harness.kube.actions import Fence, FencingRequired
from harness.kube.client import JSON, KubeClient, NotFound, Unreachable
from harness.kube.ledger import BMC, UNDO
from harness.kube.lock import ClusterLock
from harness.kube.names import KUBERNETES_TAINT_PREFIX, Act, Event, Stage
from harness.kube.timeline import ACTION, Timeline
from harness.power.base import (
    FailureKind,
    PowerDriver,
    PowerState,
    PreparedPower,
    SupportsKubeletStop,
    SupportsPartition,
    Unprepared,
    UnsupportedFailure,
    prepare_off,
    prepare_on,
    supports,
)
from harness.power.factory import available_protocols, driver_for, power_timeout_s
from harness.power.volley import Volley
from harness.safety import Plan, plan_disruption
from harness.slo.watch import watcher_for

log = logging.getLogger(__name__)
Say = Callable[[str], None]

#: The signal a session sends its own main thread when a stop condition breached, so that a
#: step blocked in a wait or a socket read stops at once (a real signal interrupts both).
STOP_SIGNAL = signal.SIGUSR2


class StoppedByCondition(PowercutError):
    """A stop condition breached: the scenario was stopped and its disruptions undone.

    Neither a product failure nor a harness error: the run stopped because the inventory
    said to stop when this happened (``powercut run`` exits 5).
    """

    def __init__(self, condition: str, detail: str) -> None:
        self.condition = condition
        self.detail = detail
        super().__init__(f"stopped by {condition}: {detail}")


class Watcher(Protocol):
    def stop(self) -> None: ...


def state_dir() -> Path:
    return Path(os.environ.get("POWERCUT_STATE_DIR", Path.home() / ".local" / "state" / "powercut"))


def journal_path_for(inventory: Inventory) -> Path:
    """One journal per inventory path, so ``powercut recover --inventory X`` finds it.

    The path is made absolute but its symlinks are not followed: a Kubernetes ConfigMap or
    Secret mount reaches its files through ``..data`` links to a directory named after the
    moment each pod's kubelet wrote it, so the resolved path differs from pod to pod, and a
    runner's journal must be found by the next pod's ``recover``."""
    src = os.path.abspath(inventory.source) if inventory.source else (inventory.name or "inventory")
    digest = hashlib.sha256(src.encode()).hexdigest()[:12]
    return state_dir() / "journals" / f"{inventory.name or 'inventory'}-{digest}.jsonl"


def power_protocol_for_restore(inventory: Inventory, node: str) -> str | None:
    """The protocol that can switch a node on: its primary BMC, else an alternative BMC."""
    spec = inventory.node(node)
    for p in (spec.power, *spec.power_alternatives):
        if p.driver != "ssh":
            return p.driver
    raise PermanentError(
        f"node {node} has no BMC that can power it on (SSH can cut power but not restore it)"
    )


class ClusterExecutor:
    """Carries out journal undos against the real cluster and BMCs (idempotent).

    ``client`` is a :class:`KubeClient` or a function that makes one, called the first time
    an undo needs the API: power-ons need only the BMCs, so they work without a kubeconfig
    or an API server. Once the API server did not answer, the other Kubernetes undos of
    this executor fail at once with that reason instead of each waiting for a timeout.
    """

    def __init__(self, inventory: Inventory, client: KubeClient | Callable[[], KubeClient]) -> None:
        self.inventory = inventory
        self._client: KubeClient | None = client if isinstance(client, KubeClient) else None
        self._connect = None if isinstance(client, KubeClient) else client
        self._owns_client = False
        self._api_down: PowercutError | None = None  # why later API calls are not tried

    @property
    def client(self) -> KubeClient:
        """The API client (made on first use); once it could not be made, or the API server
        did not answer, raises that reason at once, every time."""
        if self._api_down is not None:
            raise type(self._api_down)(f"not tried: {self._api_down}")
        if self._client is None:
            assert self._connect is not None
            try:
                self._client = self._connect()
            except (PowercutError, OSError) as exc:
                self._api_down = PermanentError(f"no API client: {exc}")
                raise self._api_down from exc
            self._owns_client = True
        return self._client

    @contextlib.contextmanager
    def _api(self) -> Iterator[KubeClient]:
        """The client, remembering when the API server does not answer."""
        client = self.client
        try:
            yield client
        except Unreachable as exc:
            self._api_down = Unreachable(f"the API server did not answer earlier ({exc})")
            raise

    def close(self) -> None:
        """Close the client if this executor made it."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    def power_on(self, node: str) -> str | None:
        """Power the node on through a BMC, unless it already reads ON through any of its
        ways (then the note says through which). A node whose only way is SSH cannot be
        powered on, but an SSH answer settles it."""
        return restore_power(self.inventory, node)

    def uncordon(self, node: str) -> str | None:
        with self._api() as client, contextlib.suppress(NotFound):
            actions.uncordon(client, node)
        return None

    def remove_taint(self, node: str, key: str, effect: str) -> str | None:
        with self._api() as client:
            try:
                changed = actions.remove_taint(client, node, key, effect)
            except NotFound:
                return f"Node {node} is gone"
        return None if changed else f"taint {key}:{effect} already gone"

    def restore_node(self, node: str, manifest: dict[str, Any]) -> str | None:
        with self._api() as client:
            if client.get_or_none(f"/api/v1/nodes/{node}") is None:
                client.create("/api/v1/nodes", manifest)
                return None
        return f"Node {node} exists already"

    def restore_job(self, namespace: str, name: str, manifest: dict[str, Any]) -> str | None:
        with self._api() as client:
            collection = f"/apis/batch/v1/namespaces/{namespace}/jobs"
            if client.get_or_none(f"{collection}/{name}") is None:
                client.create(collection, manifest)
                return None
        return f"Job {namespace}/{name} exists already"

    def heal(self, node: str, protocol: str) -> None:
        self._through(node, protocol, FailureKind.PARTITION)

    def start_kubelet(self, node: str, protocol: str) -> None:
        self._through(node, protocol, FailureKind.KUBELET_STOP)

    def _through(self, node: str, protocol: str, kind: FailureKind) -> None:
        """Undo a cut of ``kind`` through the driver that made it (idempotent)."""
        driver = driver_for(self.inventory.node(node), protocol or None)
        try:
            if kind is FailureKind.PARTITION and isinstance(driver, SupportsPartition):
                driver.heal(node)
            elif kind is FailureKind.KUBELET_STOP and isinstance(driver, SupportsKubeletStop):
                driver.start_kubelet(node)
            else:
                raise PermanentError(f"{node}: the {protocol} driver cannot undo a {kind.value}")
        finally:
            driver.close()

    def release_stale_lock(self, verdicts: Mapping[int, bool] | None = None) -> str | None:
        """Delete the cluster lock of a run on this machine that is gone (a zombie is
        gone); its holder, or None. ``verdicts``: pid -> alive, decided already."""
        with self._api() as client:
            return ClusterLock.break_stale(client, verdicts=verdicts)


def read_power(
    inventory: Inventory, node: str, *, skip: str | None = None
) -> tuple[PowerState, str, list[str]]:
    """The node's power as its ways read it: the first that reads ON or OFF wins, in the
    order BMCs first (the primary, then the alternatives), SSH last. Returns the state, the
    protocol that read it, and why the others could not ("protocol: error"). ``skip``: a
    protocol already read."""
    spec = inventory.node(node)
    ways = [p for p in available_protocols(spec) if p != "ssh" and p != skip]
    if "ssh" in available_protocols(spec) and skip != "ssh":
        ways.append("ssh")
    errors: list[str] = []
    for proto in ways:
        try:
            driver = driver_for(spec, proto, budgets=inventory.timing_budgets())
        except PowercutError as exc:
            errors.append(f"{proto}: {exc}")
            continue
        try:
            state = driver.state()
        except PowercutError as exc:
            errors.append(f"{proto}: {exc}")
            continue
        finally:
            driver.close()
        if state is not PowerState.UNKNOWN:
            return state, proto, errors
    return PowerState.UNKNOWN, "", errors


_wall = time.time  # the wall clock journal entries are stamped with (tests move it)


def recent_power_actions(
    inventory: Inventory, entries: Iterable[JournalEntry], *, now: float | None = None
) -> dict[str, float]:
    """Nodes with an owed power-on whose power action began less than one power deadline
    (``power_ack`` + ``power_state_verify``) ago and may not have finished (pending or
    failed), with the seconds left. Some BMCs apply a power change seconds after they
    accepted it: until the deadline, reading ON does not show the action did not happen."""
    window = power_timeout_s(inventory.timing_budgets())
    at = _wall() if now is None else now
    left: dict[str, float] = {}
    for e in entries:
        if not e.owes_undo or e.undo.action != "power_on" or e.state is EntryState.DONE:
            continue
        remaining = e.started_at + window - at
        node = str(e.undo.args.get("node", ""))
        if remaining > 0 and node:
            left[node] = max(remaining, left.get(node, 0.0))
    return left


def restore_power(inventory: Inventory, node: str) -> str | None:
    """Power ``node`` on, idempotently: None when it was powered on, a note when it already
    read ON through one of its ways (nothing was done)."""
    try:
        proto: str | None = power_protocol_for_restore(inventory, node)
    except PermanentError as no_bmc:
        state, via, errors = read_power(inventory, node)
        if state is PowerState.ON:
            return f"already on, read through {via}"
        seen = f"it reads {state.value}" + (f" ({'; '.join(errors)})" if errors else "")
        raise PermanentError(f"{no_bmc}; {seen}") from None
    assert proto is not None
    driver = driver_for(inventory.node(node), proto, budgets=inventory.timing_budgets())
    try:
        try:
            state = driver.state()
        except PowercutError as first:
            # The BMC that could power it on does not answer: another way may still see it on.
            other, via, _errors = read_power(inventory, node, skip=proto)
            if other is PowerState.ON:
                return f"already on, read through {via} ({proto} did not answer: {first})"
            raise
        # A driver whose on() also undoes the failures of a running node (kind: a partition,
        # a stopped kubelet) is asked even when the node reads on.
        if state is PowerState.ON and not getattr(driver, "on_restores_running", False):
            return f"already on, read through {proto}"
        driver.on()
        return None
    finally:
        driver.close()


@dataclass
class PowerResult:
    """What a parallel power operation did, with its timings (monotonic seconds)."""

    nodes: list[str]
    sent: dict[str, float] = field(default_factory=dict)
    acknowledged: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    confirmed: dict[str, float] = field(default_factory=dict)  # the new state read back
    synchronized: bool = False  # prepared first, then every request released together
    #: A synchronized power cycle's halves, "off" and "on" (``self`` holds the whole
    #: cycle: sent when its power-off was, acknowledged when it read back on).
    phases: dict[str, PowerResult] = field(default_factory=dict)

    @property
    def skew_s(self) -> float:
        """Between the first and the last acknowledgement."""
        acks = list(self.acknowledged.values())
        return max(acks) - min(acks) if len(acks) > 1 else 0.0

    @property
    def sent_spread_s(self) -> float:
        """Between the first and the last request sent."""
        sent = list(self.sent.values())
        return max(sent) - min(sent) if len(sent) > 1 else 0.0

    @property
    def request_to_ack_s(self) -> dict[str, float]:
        """Per node: request sent -> acknowledged."""
        return {n: a - self.sent[n] for n, a in self.acknowledged.items() if n in self.sent}

    @property
    def first_ack(self) -> float:
        return min(self.acknowledged.values())


def node_manifest(node: JSON) -> JSON:
    """A Node as it can be created again: no status, identity or server-set fields."""
    md = node.get("metadata") or {}
    keep = {k: md[k] for k in ("name", "labels", "annotations") if k in md}
    spec = dict(node.get("spec") or {})
    spec["taints"] = [
        t
        for t in spec.get("taints") or []
        if not str(t.get("key", "")).startswith(KUBERNETES_TAINT_PREFIX)
    ]
    spec.pop("unschedulable", None)
    return {"apiVersion": "v1", "kind": "Node", "metadata": keep, "spec": spec}


def _with_message(exc: PowercutError, message: str) -> PowercutError:
    """The same error, of the same type and with the same fields, telling ``message``. Its
    constructor is not called: some want more than a message (``WaitTimeout``, ``ApiError``),
    and a crash here would hide the BMCs' answers behind a TypeError."""
    new = type(exc).__new__(type(exc), message)
    new.__dict__.update(exc.__dict__)
    new.args = (message,)
    return new


class Session:
    def __init__(
        self,
        inventory: Inventory,
        *,
        client: KubeClient | None = None,
        timeline: Timeline | None = None,
        journal_path: Path | None = None,
        keep_on_failure: bool = False,
        dry_run: bool = False,
        lock: bool = True,
        undo_on_exit: bool = True,
        say: Say | None = None,
    ) -> None:
        self.inventory = inventory
        self._client = client
        self.timeline = timeline if timeline is not None else Timeline()
        self.journal_path = journal_path or journal_path_for(inventory)
        self.keep_on_failure = keep_on_failure
        self.dry_run = dry_run
        self.use_lock = lock
        self.undo_on_exit = undo_on_exit
        self.say = say or (lambda msg: log.info("%s", msg))
        self._say_lock = threading.Lock()  # power actions tell their progress from threads
        self.plan: list[str] = []
        self.down: set[str] = set()
        self.last_power: PowerResult | None = None
        self.fence_overrides: list[str] = []  # "node: reason (BMC: what it said)"
        self._drivers: dict[tuple[str, str | None], PowerDriver] = {}
        self._drivers_lock = threading.Lock()
        self._entries: dict[tuple[str, str], str] = {}
        self._lock: ClusterLock | None = None
        self._restore_signals: Callable[[], None] | None = None
        self.journal: Journal | None = None
        self.undo: UndoStack | None = None
        self.stopped_by: StoppedByCondition | None = None  # a stop condition breached
        self._stop_raised = False
        self._stop_armed = False
        self._watchers: list[Watcher] = []
        self._restore_stop_signal: Callable[[], None] | None = None

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            c = self.inventory.cluster
            self._client = KubeClient.from_kubeconfig(c.kubeconfig, c.context)
        return self._client

    def __enter__(self) -> Self:
        if self.dry_run:
            return self
        if threading.current_thread() is threading.main_thread():
            self._restore_signals = install_signal_handlers()
        try:
            self.journal_path.parent.mkdir(parents=True, exist_ok=True)
            self.journal = Journal(self.journal_path)
            self.undo = UndoStack(
                self.journal,
                ClusterExecutor(self.inventory, self.client),
                keep_on_failure=self.keep_on_failure,
            )
            if self.use_lock:
                self._lock = ClusterLock(self.client)
                self._lock.acquire()
            if self.undo_on_exit and self.inventory.stop_conditions:
                self._watch_stop_conditions()
        except BaseException:
            self._close()
            raise
        return self

    # -- stop conditions --------------------------------------------------------------------

    def _watch_stop_conditions(self) -> None:
        """Watch the inventory's stop conditions until the session ends."""
        inv = self.inventory
        assert inv.prometheus is not None  # the inventory refuses stop conditions without
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(STOP_SIGNAL, self._on_stop_signal)

            def restore() -> None:
                signal.signal(STOP_SIGNAL, previous)

            self._restore_stop_signal = restore
        self._stop_armed = True
        watcher = watcher_for(
            inv.prometheus,
            inv.stop_conditions,
            inv.slos,
            inv.alerts,
            self.request_stop,
            say=self.say,
        )
        self._watchers.append(watcher.start())
        self.say(f"watching {len(inv.stop_conditions)} stop condition(s)")

    def request_stop(self, condition: str, detail: str) -> None:
        """Stop the scenario: a stop condition breached (callable from any thread). The main
        thread raises :class:`StoppedByCondition` at once (blocked or not); a session used
        from another thread raises it before its next disruption. Its undos then run, even
        with ``keep_on_failure``."""
        if not self._stop_armed or self.stopped_by is not None:
            return
        self.stopped_by = StoppedByCondition(condition, detail)
        self.timeline.action("stop-condition", Event.BREACHED, condition=condition, detail=detail)
        self.say(f"STOP: {self.stopped_by}; undoing the scenario's disruptions")
        if self._restore_stop_signal is not None:
            signal.pthread_kill(threading.main_thread().ident or 0, STOP_SIGNAL)

    def _on_stop_signal(self, signum: int, frame: object) -> None:
        self.check_stop()

    def check_stop(self) -> None:
        """Raise :class:`StoppedByCondition` (once) if a stop condition breached."""
        if self._stop_armed and self.stopped_by is not None and not self._stop_raised:
            self._stop_raised = True
            raise self.stopped_by

    def _stop_watching(self) -> None:
        self._stop_armed = False  # from here on a breach is no longer raised
        for watcher in self._watchers:
            watcher.stop()
        self._watchers.clear()
        if self._restore_stop_signal is not None:
            self._restore_stop_signal()
            self._restore_stop_signal = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._stop_watching()
            if self.undo is not None and self.undo_on_exit:
                if self.stopped_by is not None:
                    self.undo.keep_on_failure = False  # stopped: put everything back now
                with self.timeline.ledger.waiting(UNDO):  # BMC and API calls
                    self.undo.__exit__(exc_type, exc, tb)
        finally:
            self._close()

    def finish(self, *, failed: bool = False) -> list[UndoResult]:
        """End the session explicitly and say what its undos did: stop watching the stop
        conditions, undo every disruption still owed, newest first (``failed`` with
        ``keep_on_failure``: leave them for inspection, unless a stop condition stopped the
        scenario), then release the cluster lock, the drivers and the journal. A failed undo
        is in the results, not raised: the caller decides (the ``with`` form raises
        :class:`~harness.journal.UndoFailed`, or notes it on the body's exception)."""
        try:
            self._stop_watching()
            if self.undo is None or not self.undo_on_exit:
                return []
            if self.stopped_by is not None:
                self.undo.keep_on_failure = False  # stopped: put everything back now
            with self.timeline.ledger.waiting(UNDO):  # BMC and API calls
                return self.undo.finish(failed=failed)
        finally:
            self._close()

    def _close(self) -> None:
        self._stop_watching()
        for d in self._drivers.values():
            try:
                d.close()
            except PowercutError as exc:
                log.debug("closing a power driver: %s", exc)
        self._drivers.clear()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self.journal is not None:
            self.journal.close()
        if self._restore_signals is not None:
            self._restore_signals()
            self._restore_signals = None

    # -- helpers ----------------------------------------------------------------------------

    def driver(self, node: str, protocol: str | None = None) -> PowerDriver:
        with self._drivers_lock:
            key = (node, protocol)
            if key not in self._drivers:
                self._drivers[key] = driver_for(
                    self.inventory.node(node), protocol, budgets=self.inventory.timing_budgets()
                )
            return self._drivers[key]

    def _journaled(
        self, action: str, target: str, undo: UndoSpec, fn: Callable[[], object]
    ) -> None:
        assert self.undo is not None and self.journal is not None
        self.check_stop()
        with self.undo.disruption(action, target, undo=undo) as entry:
            self._entries[(action, target)] = entry.id
            fn()

    def _undone(self, action: str, target: str, *, note: str | None = None) -> None:
        entry_id = self._entries.pop((action, target), None)
        if entry_id is not None and self.journal is not None:
            self.journal.mark_undone(entry_id, note)

    def _journal_entries(self) -> list[JournalEntry]:
        if self.journal is not None:
            return self.journal.entries()
        if self.journal_path.exists():  # a dry run: read without taking the journal's lock
            return Journal.read(self.journal_path)
        return []

    def journal_down(self) -> set[str]:
        """Nodes the durable journal still owes a power-on: powered off (or partitioned, or
        caught in a power action that failed midway) by this run or an earlier one that was
        not undone, such as an earlier ``powercut power off``. A power-off that failed
        before it acted owes nothing, so it is not here."""
        return {
            str(e.undo.args["node"])
            for e in self._journal_entries()
            if e.owes_undo and e.undo.action == "power_on" and "node" in e.undo.args
        }

    def nodes_down(self) -> set[str]:
        """The nodes the blast-radius rules count as down: this session's and the journal's."""
        return self.down | self.journal_down()

    def settle_restored(self, nodes: Iterable[str]) -> dict[str, str]:
        """Read the power of ``nodes`` (the journal owes each a power-on) through all their
        ways; each that reads ON is not down: what the journal owes for it is settled, with
        a note saying how it was seen. Returns node -> note for the settled ones. Nodes that
        read OFF, or cannot be read, stay owed: they are, or may be, down. So does a node
        whose power action began less than one power deadline ago (see
        :func:`recent_power_actions`): a BMC may still apply it late."""
        settled: dict[str, str] = {}
        young = recent_power_actions(self.inventory, self._journal_entries())
        for node in sorted(set(nodes) - set(young)):
            state, via, _errors = read_power(self.inventory, node)
            if state is not PowerState.ON:
                continue
            note = f"reads on through {via}"
            settled[node] = note
            if self.journal is not None:  # a dry run does not write the journal
                self._power_restored(node, note=note)
        return settled

    def _check_blast_radius(self, names: list[str], action: str) -> Plan:
        earlier_owed = self.journal_down() - self.down
        if earlier_owed:
            for node, note in self.settle_restored(earlier_owed).items():
                self.say(
                    f"the journal {self.journal_path} owed a power-on for {node}, which "
                    f"{note}: not counted as down" + ("" if self.journal is None else "; settled")
                )
                earlier_owed.discard(node)
        down = self.down | earlier_owed
        earlier = sorted(down - self.down)
        if earlier:
            self.say(
                f"the journal {self.journal_path} still owes a power-on for {', '.join(earlier)}: "
                "counted as down (`powercut power on` or `powercut recover` settles it)"
            )
        return plan_disruption(self.inventory, names, already_down=sorted(down), action=action)

    def _power_restored(self, node: str, *, note: str | None = None) -> None:
        """The node is on: every power-on the journal owes for it is settled."""
        self._undone("power_off", f"node/{node}", note=note)
        self._undone("power_cycle", f"node/{node}", note=note)
        if self.journal is not None:
            for e in self.journal.entries():
                if e.owes_undo and e.undo.action == "power_on" and e.undo.args.get("node") == node:
                    self.journal.mark_undone(e.id, note)
        self.down.discard(node)

    # -- power ------------------------------------------------------------------------------

    def power_off(
        self,
        nodes: Iterable[str],
        *,
        graceful: bool = False,
        protocol: str | None = None,
        synchronized: bool = True,
    ) -> PowerResult:
        """Power the nodes off together; returns once every BMC acknowledged and the new
        state was read back.

        Synchronized (the default), as a PDU failing cuts a rack at once: every node's
        connection, authentication, system discovery (Redfish) or session (IPMI) and
        current state are prepared first, in parallel; then a barrier releases every request
        together, and only then are the new states read back. If one node cannot be
        prepared, no request is sent (the others are journaled as not done). Drivers that
        cannot prepare (SSH, plugins) run their whole power-off when released. The skew
        between the first and last acknowledgement is kept (``PowerResult.skew_s``) and put
        on the timeline. ``synchronized=False``: the earlier way, each node's whole
        power-off (connect, authenticate, discover, send, read back) started in parallel."""
        names = list(nodes)
        plan = self._check_blast_radius(names, "power off")
        how = "graceful" if graceful else "forced"
        if self.dry_run:
            for n in names:
                proto = protocol or self.inventory.node(n).power.driver
                self.plan.append(f"power off {n} ({how}) through {proto}; undo: power on")
            self.plan.extend(plan.describe())
            return PowerResult(names)
        result = PowerResult(names, synchronized=synchronized)
        with self.timeline.ledger.waiting(BMC):
            if synchronized:
                self._volley_off(names, graceful, protocol, result)
            else:
                self._unsynchronized_off(names, graceful, protocol, result)
        self.last_power = result
        if len(names) > 1:
            self.timeline.action(
                names[0],
                Event.POWER_OFF_SKEW,
                skew_ms=round(result.skew_s * 1000, 1),
                sent_spread_ms=round(result.sent_spread_s * 1000, 1),
                nodes=",".join(names),
                synchronized=synchronized,
            )
        self.say(f"powered off {', '.join(names)} ({how}); ack skew {result.skew_s * 1000:.0f} ms")
        return result

    def _volley_off(
        self, names: list[str], graceful: bool, protocol: str | None, result: PowerResult
    ) -> None:
        """The synchronized power-off on bounded threads (:class:`harness.power.volley.Volley`):
        each node journaled before its request, every request released together, each
        stamp put on the timeline, failures raised as :meth:`_parallel` does."""
        assert self.undo is not None
        undo = self.undo
        entries: dict[str, contextlib.AbstractContextManager[Any]] = {}
        entries_lock = threading.Lock()

        def before(node: str) -> None:
            self.check_stop()
            entry = undo.disruption("power_off", f"node/{node}", undo=UndoSpec.power_on(node))
            self._entries[("power_off", f"node/{node}")] = entry.__enter__().id
            with entries_lock:
                entries[node] = entry

        volley = Volley(before=before)
        shots = volley.run(
            names, lambda node: prepare_off(self.driver(node, protocol), graceful=graceful)
        )
        for node, shot in shots.items():
            stamps: tuple[tuple[Stage, float | None, dict[str, Any]], ...] = (
                (Stage.SENT, shot.sent, {"graceful": graceful, "protocol": protocol or ""}),
                (Stage.ACKNOWLEDGED, shot.acknowledged, {}),
                (Stage.CONFIRMED, shot.confirmed, {}),
            )
            for stage, mono, detail in stamps:
                if mono is not None:
                    self.timeline.record(
                        ACTION, node, Act.POWER_OFF.at(stage), detail=detail, mono=mono
                    )
            if shot.sent is not None:
                result.sent[node] = shot.sent
            if shot.acknowledged is not None and shot.error is None:
                result.acknowledged[node] = shot.acknowledged
            if shot.confirmed is not None:
                result.confirmed[node] = shot.confirmed
            entry = entries.get(node)
            error = shot.error
            if entry is not None:
                try:
                    if error is None:
                        entry.__exit__(None, None, None)
                    else:
                        entry.__exit__(type(error), error, error.__traceback__)
                except BaseException as exc:  # noqa: BLE001 (the journal re-raises the error)
                    error = exc
            if error is None:
                self.down.add(node)
                self._told(result, node, "power-off", PowerState.OFF)
            else:
                result.errors[node] = str(error)
                with self._say_lock:
                    self.say(f"{node}: power off FAILED: {error}")
        if result.errors:
            failed = "; ".join(f"{n}: {e}" for n, e in result.errors.items())
            first = next(shots[n].error for n in result.errors)
            if isinstance(first, PowercutError):
                raise _with_message(
                    first, f"power off failed for {len(result.errors)} node(s): {failed}"
                ) from first
            raise PermanentError(f"power off failed: {failed}") from first

    def _unsynchronized_off(
        self, names: list[str], graceful: bool, protocol: str | None, result: PowerResult
    ) -> None:
        """The earlier way: each node's whole power-off started in parallel."""

        def one(node: str) -> None:
            driver = self.driver(node, protocol)

            def act() -> None:
                prepared = Unprepared(driver, graceful)
                result.sent[node] = time.monotonic()
                self.timeline.action(
                    node, Act.POWER_OFF.at(Stage.SENT), graceful=graceful, protocol=protocol or ""
                )
                prepared.fire()
                result.acknowledged[node] = time.monotonic()
                self.timeline.action(node, Act.POWER_OFF.at(Stage.ACKNOWLEDGED))
                prepared.confirm()
                result.confirmed[node] = time.monotonic()
                self.timeline.action(node, Act.POWER_OFF.at(Stage.CONFIRMED))

            self._journaled("power_off", f"node/{node}", UndoSpec.power_on(node), act)
            self.down.add(node)
            self._told(result, node, "power-off", PowerState.OFF)

        self._parallel(names, one, result, "power off", workers=len(names))

    def power_on(self, nodes: Iterable[str], *, protocol: str | None = None) -> PowerResult:
        names = list(nodes)
        if self.dry_run:
            self.plan.extend(f"power on {n}" for n in names)
            return PowerResult(names)
        result = PowerResult(names)

        def one(node: str) -> None:
            proto = protocol if protocol not in (None, "ssh") else None
            if proto is None:
                try:
                    proto = power_protocol_for_restore(self.inventory, node)
                except PermanentError:
                    # No BMC can switch it on; if it reads ON anyway, nothing is owed.
                    note = restore_power(self.inventory, node)  # raises unless it reads ON
                    self._power_restored(node, note=note)
                    with self._say_lock:
                        self.say(f"{node}: {note}; nothing to do")
                    return
            driver = self.driver(node, proto)
            result.sent[node] = time.monotonic()
            self.timeline.action(node, Act.POWER_ON.at(Stage.SENT))
            driver.on()
            result.acknowledged[node] = time.monotonic()
            self.timeline.action(node, Act.POWER_ON.at(Stage.ACKNOWLEDGED))
            self._power_restored(node)
            self._told(result, node, "power-on", PowerState.ON)

        self._parallel(names, one, result, "power on")
        self.say(f"powered on {', '.join(names)}")
        return result

    def power_cycle(
        self,
        nodes: Iterable[str],
        *,
        protocol: str | None = None,
        synchronized: bool | None = None,
        off_s: float = 0.0,
    ) -> PowerResult:
        """Power-cycle the nodes in parallel (off, then on again: a reset).

        ``off_s`` > 0: each node's power stays off that long, from its power-off's read-back
        to its power-on request (the cycle is then always the synchronized off and on, since
        no BMC's own reset can hold the power off).

        Checked against the blast-radius rules like a power-off (the nodes are down
        meanwhile) and journaled with a power-on as its undo, since a cycle that fails
        midway can leave a node off. Each entry is marked undone once the node read back
        as on.

        Synchronized (the default for several nodes), as a rack's power failing and coming
        back: the
        power-off is prepared, released together at a barrier and confirmed as in
        :meth:`power_off`; then the power-on likewise (prepared once every node read back
        off). The result holds the whole cycle per node (``power-cycle sent`` to
        ``power-cycle acknowledged``, once it read back on), its ``phases`` the power-off and
        the power-on; the skew of both goes on the timeline (``power-cycle ack skew``). A
        node whose power-on cannot wait for the others' (one failed) is powered on by itself
        at once: a cycle never leaves a node off. ``synchronized=False`` (the default for
        one node): each node's driver ``cycle()`` (the BMC's own reset: PowerCycle,
        ForceRestart, chassis power cycle), in parallel.
        """
        names = list(nodes)
        plan = self._check_blast_radius(names, "power cycle")
        if self.dry_run:
            for n in names:
                proto = protocol or self.inventory.node(n).power.driver
                held = f" (off for {off_s:g}s)" if off_s > 0 else ""
                self.plan.append(
                    f"power-cycle {n}{held} through {proto}; undo if it stops midway: power on"
                )
            self.plan.extend(plan.describe())
            return PowerResult(names)
        if synchronized is None:
            synchronized = len(names) > 1
        if synchronized or off_s > 0:
            return self._synchronized_cycle(names, protocol, off_s)
        result = PowerResult(names)

        def one(node: str) -> None:
            driver = self.driver(node, protocol)
            target = f"node/{node}"

            def act() -> None:
                result.sent[node] = time.monotonic()
                self.timeline.action(node, Act.POWER_CYCLE.at(Stage.SENT), protocol=protocol or "")
                driver.cycle()  # returns once the node reads back as on
                result.acknowledged[node] = time.monotonic()
                self.timeline.action(node, Act.POWER_CYCLE.at(Stage.ACKNOWLEDGED))

            self._journaled("power_cycle", target, UndoSpec.power_on(node), act)
            self._undone("power_cycle", target)
            self._told(result, node, "power cycle", PowerState.ON)

        self._parallel(names, one, result, "power cycle")
        self.last_power = result
        self.say(f"power-cycled {', '.join(names)}")
        return result

    def _synchronized_cycle(
        self, names: list[str], protocol: str | None, off_s: float = 0.0
    ) -> PowerResult:
        off = PowerResult(names, synchronized=True)
        on = PowerResult(names, synchronized=True)
        cycle = PowerResult(names, synchronized=True, phases={"off": off, "on": on})
        off_barrier = threading.Barrier(len(names))
        on_barrier = threading.Barrier(len(names))

        def released(
            node: str, prepare: Callable[[], PreparedPower], barrier: threading.Barrier
        ) -> PreparedPower:
            try:
                prepared = prepare()
            except BaseException:
                barrier.abort()
                raise
            barrier.wait()  # BrokenBarrierError: another node could not be prepared
            return prepared

        def one(node: str) -> None:
            driver = self.driver(node, protocol)
            target = f"node/{node}"

            def act() -> None:
                try:
                    try:
                        prepared = released(node, lambda: prepare_off(driver), off_barrier)
                    except threading.BrokenBarrierError:
                        raise not_acted(
                            PermanentError(
                                f"{node}: power cycle not started: another node of the same "
                                "cycle could not be prepared"
                            )
                        ) from None
                    cycle.sent[node] = time.monotonic()
                    self.timeline.action(
                        node, Act.POWER_CYCLE.at(Stage.SENT), protocol=protocol or ""
                    )
                    self._fire(node, prepared, off, Act.POWER_CYCLE_OFF, protocol)
                    if off_s > 0:
                        self.timeline.action(node, Event.POWER_CYCLE_HELD_OFF, seconds=off_s)
                        time.sleep(max(0.0, off.confirmed[node] + off_s - time.monotonic()))
                except BaseException:
                    on_barrier.abort()  # the others power on without waiting for this one
                    raise
                try:
                    prepared = released(node, lambda: prepare_on(driver), on_barrier)
                except threading.BrokenBarrierError:
                    prepared = prepare_on(driver)  # on by itself: never left off
                self._fire(node, prepared, on, Act.POWER_CYCLE_ON, protocol)
                cycle.acknowledged[node] = time.monotonic()
                self.timeline.action(node, Act.POWER_CYCLE.at(Stage.ACKNOWLEDGED))

            self._journaled("power_cycle", target, UndoSpec.power_on(node), act)
            self._undone("power_cycle", target)
            self._told(cycle, node, "power cycle", PowerState.ON)

        try:
            self._parallel(names, one, cycle, "power cycle", workers=len(names))
        finally:
            self.last_power = cycle
        if len(names) > 1:
            self.timeline.action(
                names[0],
                Event.POWER_CYCLE_SKEW,
                off_skew_ms=round(off.skew_s * 1000, 1),
                on_skew_ms=round(on.skew_s * 1000, 1),
                nodes=",".join(names),
                synchronized=True,
            )
        self.say(
            f"power-cycled {', '.join(names)}; ack skew off {off.skew_s * 1000:.0f} ms, "
            f"on {on.skew_s * 1000:.0f} ms"
        )
        return cycle

    def _fire(
        self,
        node: str,
        prepared: PreparedPower,
        result: PowerResult,
        what: Act,
        protocol: str | None,
    ) -> None:
        """Send a prepared request and read the new state back, each step on the timeline."""
        result.sent[node] = time.monotonic()
        self.timeline.action(node, what.at(Stage.SENT), protocol=protocol or "")
        prepared.fire()
        result.acknowledged[node] = time.monotonic()
        self.timeline.action(node, what.at(Stage.ACKNOWLEDGED))
        prepared.confirm()
        result.confirmed[node] = time.monotonic()
        self.timeline.action(node, what.at(Stage.CONFIRMED))

    def _told(self, result: PowerResult, node: str, what: str, state: PowerState) -> None:
        """Tell one node's acknowledgement (with its read-back) as soon as it arrived."""
        took = result.acknowledged[node] - result.sent[node]
        with self._say_lock:
            self.say(f"{node}: {what} acknowledged after {took:.1f} s, state {state.name}")

    def _parallel(
        self,
        names: list[str],
        fn: Callable[[str], None],
        result: PowerResult,
        what: str,
        *,
        workers: int = 16,
    ) -> None:
        def run(node: str) -> None:
            started = time.monotonic()
            try:
                fn(node)
            except Exception as exc:
                with self._say_lock:
                    self.say(
                        f"{node}: {what} FAILED after {time.monotonic() - started:.1f} s: {exc}"
                    )
                raise

        pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(names))))
        futures = {n: pool.submit(run, n) for n in names}
        try:
            with self.timeline.ledger.waiting(BMC):  # the BMCs' answers and read-backs
                wait(futures.values())
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM): let the BMC calls in flight finish first, so
            # the undos that run next act after them, not in between.
            with shield_signals():
                wait(futures.values())
            raise
        finally:
            pool.shutdown(wait=True)
        for n, fut in futures.items():
            exc = fut.exception()
            if exc is not None:
                result.errors[n] = str(exc)
        if result.errors:
            detail = "; ".join(f"{n}: {e}" for n, e in result.errors.items())
            first = next(iter(futures[n].exception() for n in result.errors))
            if isinstance(first, PowercutError):
                raise _with_message(
                    first, f"{what} failed for {len(result.errors)} node(s): {detail}"
                ) from first
            raise PermanentError(f"{what} failed: {detail}") from first

    # -- failure kinds beyond power: partition, kubelet stop ---------------------------------

    def failure_driver(self, node: str, kind: FailureKind) -> tuple[PowerDriver, str]:
        """The node's first driver (primary, then alternatives) that can do ``kind``, and
        its protocol; :class:`UnsupportedFailure` when none can."""
        spec = self.inventory.node(node)
        protocols = [spec.power.driver, *(p.driver for p in spec.power_alternatives)]
        if spec.ssh is not None and "ssh" not in protocols:
            protocols.append("ssh")
        first: PowerDriver | None = None
        for protocol in dict.fromkeys(protocols):
            try:
                driver = self.driver(node, protocol)
            except PowercutError:
                continue
            first = first or driver
            if supports(driver, kind):
                return driver, protocol
        raise UnsupportedFailure.of(node, kind, first if first is not None else object())

    def cut(self, nodes: Iterable[str], kind: FailureKind, *, undo_after_s: float) -> PowerResult:
        """Cut the nodes off the network (``PARTITION``) or stop their kubelets
        (``KUBELET_STOP``), in parallel; they stay on. Each driver arms the undo on the node
        before the cut (back by itself after ``undo_after_s``); the journal holds the undo
        too, so a crash or ``recover`` undoes it earlier. A node whose drivers cannot do
        ``kind`` raises :class:`UnsupportedFailure` before anything is cut."""
        if kind not in (FailureKind.PARTITION, FailureKind.KUBELET_STOP):
            raise PermanentError(f"cut: {kind.value} is not a partition or a kubelet stop")
        names = list(nodes)
        plan = self._check_blast_radius(names, kind.value)
        chosen = {n: self.failure_driver(n, kind) for n in names}
        if self.dry_run:
            undo_what = "heal" if kind is FailureKind.PARTITION else "start kubelet"
            for n in names:
                self.plan.append(
                    f"{kind.value} {n} through {chosen[n][1]}, undone after "
                    f"{undo_after_s:g}s; undo: {undo_what}"
                )
            self.plan.extend(plan.describe())
            return PowerResult(names)
        result = PowerResult(names)

        verb = Act.PARTITION if kind is FailureKind.PARTITION else Act.KUBELET_STOP

        def one(node: str) -> None:
            driver, protocol = chosen[node]
            if kind is FailureKind.PARTITION:
                assert isinstance(driver, SupportsPartition)
                undo = UndoSpec.heal(node, protocol)
                cut: Callable[[], None] = lambda: driver.partition(  # noqa: E731
                    node, heal_after_s=undo_after_s
                )
            else:
                assert isinstance(driver, SupportsKubeletStop)
                undo = UndoSpec.start_kubelet(node, protocol)
                cut = lambda: driver.stop_kubelet(  # noqa: E731
                    node, restart_after_s=undo_after_s
                )

            def act() -> None:
                result.sent[node] = time.monotonic()
                self.timeline.action(
                    node, verb.at(Stage.SENT), protocol=protocol, undo_after_s=undo_after_s
                )
                cut()
                result.acknowledged[node] = time.monotonic()
                self.timeline.action(node, verb.at(Stage.ACKNOWLEDGED))

            self._journaled(kind.value, f"node/{node}", undo, act)
            self.down.add(node)

        self._parallel(names, one, result, kind.value)
        self.say(f"{kind.value}: {', '.join(names)} (undone by the nodes after {undo_after_s:g}s)")
        return result

    def uncut(self, nodes: Iterable[str], kind: FailureKind) -> PowerResult:
        """Undo :meth:`cut` now: heal the partition, or start the kubelet (idempotent)."""
        names = list(nodes)
        result = PowerResult(names)
        if self.dry_run:
            return result

        def one(node: str) -> None:
            driver, protocol = self.failure_driver(node, kind)
            result.sent[node] = time.monotonic()
            verb = Act.HEAL if kind is FailureKind.PARTITION else Act.KUBELET_START
            self.timeline.action(node, verb.at(Stage.SENT), protocol=protocol)
            if kind is FailureKind.PARTITION:
                assert isinstance(driver, SupportsPartition)
                driver.heal(node)
            else:
                assert isinstance(driver, SupportsKubeletStop)
                driver.start_kubelet(node)
            result.acknowledged[node] = time.monotonic()
            self.timeline.action(node, verb.at(Stage.ACKNOWLEDGED))
            self._undone(kind.value, f"node/{node}")
            self.down.discard(node)

        self._parallel(names, one, result, "undo " + kind.value)
        return result

    # -- Kubernetes actions -----------------------------------------------------------------

    def cordon(self, node: str) -> None:
        if self.dry_run:
            self.plan.append(f"cordon {node}; undo: uncordon")
            return
        self._journaled(
            "cordon",
            f"node/{node}",
            UndoSpec.uncordon(node),
            lambda: actions.cordon(self.client, node, timeline=self.timeline),
        )

    def uncordon(self, node: str) -> None:
        if self.dry_run:
            self.plan.append(f"uncordon {node}")
            return
        actions.uncordon(self.client, node, timeline=self.timeline)
        self._undone("cordon", f"node/{node}")
        self._undone("drain", f"node/{node}")

    def drain(self, node: str, *, timeout_s: float, **kw: Any) -> actions.DrainResult:
        if self.dry_run:
            self.plan.append(f"drain {node} (Eviction API, PDBs respected); undo: uncordon")
            return actions.DrainResult(node=node, evicted=())
        out: list[actions.DrainResult] = []
        self._journaled(
            "drain",
            f"node/{node}",
            UndoSpec.uncordon(node),
            lambda: out.append(
                actions.drain(
                    self.client,
                    node,
                    deadline=time.monotonic() + timeout_s,
                    timeline=self.timeline,
                    **kw,
                )
            ),
        )
        return out[0]

    def delete_node(self, node: str, *, clear_finalizers: bool = False) -> None:
        if self.dry_run:
            self.plan.append(f"delete Node {node}; undo: re-create it from its manifest")
            return
        manifest = node_manifest(self.client.get(f"/api/v1/nodes/{node}"))
        self._journaled(
            "delete_node",
            f"node/{node}",
            UndoSpec.restore_node(node, manifest),
            lambda: actions.delete_node(
                self.client, node, clear_finalizers=clear_finalizers, timeline=self.timeline
            ),
        )

    def rerun_job(self, namespace: str, name: str, *, timeout_s: float) -> JSON:
        """Re-run a Job: store its manifest (generated fields removed) in the journal as the
        undo, delete it (propagation Background: its pods go too), wait until it is gone and
        create it again from that manifest. Returns the new Job. Once it exists again
        nothing is owed; if the harness dies in between, ``recover`` creates it."""
        target = f"job/{namespace}/{name}"
        if self.dry_run:
            self.plan.append(
                f"re-run Job {namespace}/{name}: delete it (Background) and create it from its "
                "manifest; undo: create it from the manifest if it is missing"
            )
            return {}
        job = self.client.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
        manifest = actions.job_for_rerun(job)
        out: list[JSON] = []
        self._journaled(
            "rerun_job",
            target,
            UndoSpec.restore_job(namespace, name, manifest),
            lambda: out.append(
                actions.rerun_job(
                    self.client,
                    namespace,
                    name,
                    deadline=time.monotonic() + timeout_s,
                    timeline=self.timeline,
                )
            ),
        )
        self._undone("rerun_job", target, note="created again from its manifest")
        return out[0]

    def restore_node(self, node: str) -> None:
        """Re-create a deleted Node (a real kubelet re-registers by itself; kwok does not)."""
        entry = self._entries.get(("delete_node", f"node/{node}"))
        if entry is None or self.journal is None:
            return
        spec = self.journal.get(entry).undo
        ClusterExecutor(self.inventory, self.client).restore_node(node, dict(spec.args["manifest"]))
        self._undone("delete_node", f"node/{node}")

    # -- fencing ----------------------------------------------------------------------------

    def fence(self, node: str, *, override: str | None = None, what: str = "fence") -> Fence:
        """Confirm through the node's BMCs that it is powered OFF, before anything that is
        safe only on a node that is shut down (the out-of-service taint, force-deleting the
        pods of a node that is not Ready).

        Only a BMC (or a power plugin such as kind's) can confirm: SSH cannot tell a node
        that is off from one cut off from the network, which still runs its pods. When no
        BMC reads OFF, raises :class:`~harness.kube.actions.FencingRequired` naming what
        each BMC said, unless ``override`` gives the operator's reason: then the override
        is recorded in the journal (a note) and in the timeline, which the report shows.
        """
        spec = self.inventory.node(node)
        seen: list[str] = []
        for proto in available_protocols(spec):
            if proto == "ssh":
                continue
            try:
                state = self.driver(node, proto).state()
            except PowercutError as exc:
                seen.append(f"{proto} did not answer: {exc}")
                continue
            if state is PowerState.OFF:
                fence = Fence(node, off_by=proto)
                self.timeline.action(node, Event.FENCED, via=proto)
                return fence
            seen.append(f"{proto} reads power {state.value}")
        said = "; ".join(seen) or "it has no BMC (SSH cannot tell off from cut off)"
        if override is None or not override.strip():
            raise FencingRequired(node, what, f"no BMC confirmed power OFF ({said})")
        fence = Fence(node, override=override.strip())
        self.timeline.action(node, Event.FENCE_OVERRIDDEN, reason=fence.override, bmc=said)
        if self.journal is not None:
            self.journal.note("fence_override", f"node/{node}", f"{fence.override} (BMC: {said})")
        self.fence_overrides.append(f"{node}: {fence.override} (BMC: {said})")
        with self._say_lock:
            self.say(f"WARNING: {node} is NOT fenced ({said}); overridden: {fence.override}")
        return fence

    def force_delete_pods(
        self,
        node: str,
        *,
        namespace: str | None = None,
        only_terminating: bool = False,
        fence_override: str | None = None,
    ) -> list[str]:
        """Force-delete the node's pods; on a node that is not Ready, only once its BMC
        confirmed power OFF (or with ``fence_override``, recorded and reported)."""
        if self.dry_run:
            self.plan.append(
                f"force-delete the pods of {node} (grace 0); if it is not Ready, only once "
                "its BMC confirms power OFF"
            )
            return []
        what = "force-delete the pods of"
        ready = actions.node_ready(self.client, node)
        fence = self.fence(node, override=fence_override, what=what) if ready is False else None
        return list(
            actions.force_delete_pods(
                self.client,
                node,
                namespace=namespace,
                only_terminating=only_terminating,
                fence=fence,
                timeline=self.timeline,
            )
        )

    def add_out_of_service_taint(self, node: str, *, fence_override: str | None = None) -> None:
        """The out-of-service taint, only once the node's BMC confirmed power OFF (or with
        ``fence_override``: the operator's reason, recorded in the journal and the report)."""
        if self.dry_run:
            self.plan.append(
                f"confirm {node} is powered OFF through its BMC, then taint it "
                f"{actions.OUT_OF_SERVICE_KEY}:NoExecute; undo: remove it"
            )
            return
        fence = self.fence(node, override=fence_override, what="set the out-of-service taint on")
        self._journaled(
            "out_of_service",
            f"node/{node}",
            UndoSpec.remove_taint(node, actions.OUT_OF_SERVICE_KEY, "NoExecute"),
            lambda: actions.add_out_of_service_taint(
                self.client, node, fence=fence, timeline=self.timeline
            ),
        )

    def remove_out_of_service_taint(self, node: str) -> None:
        if self.dry_run:
            self.plan.append(f"remove the out-of-service taint from {node}")
            return
        actions.remove_out_of_service_taint(self.client, node, timeline=self.timeline)
        self._undone("out_of_service", f"node/{node}")
