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
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from harness.errors import PermanentError, PowercutError
from harness.inventory import Inventory
from harness.journal import (
    Journal,
    JournalEntry,
    UndoSpec,
    UndoStack,
    install_signal_handlers,
    shield_signals,
)
from harness.kube import actions
from harness.kube.client import JSON, KubeClient, NotFound, Unreachable
from harness.kube.lock import ClusterLock
from harness.kube.timeline import Timeline
from harness.power.base import PowerDriver, PowerState
from harness.power.factory import driver_for
from harness.safety import Plan, plan_disruption

log = logging.getLogger(__name__)
Say = Callable[[str], None]


def state_dir() -> Path:
    return Path(os.environ.get("POWERCUT_STATE_DIR", Path.home() / ".local" / "state" / "powercut"))


def journal_path_for(inventory: Inventory) -> Path:
    """One journal per inventory file, so ``powercut recover --inventory X`` finds it."""
    src = str(inventory.source.resolve()) if inventory.source else (inventory.name or "inventory")
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

    def power_on(self, node: str) -> None:
        driver = driver_for(
            self.inventory.node(node),
            power_protocol_for_restore(self.inventory, node),
            budgets=self.inventory.timing_budgets(),
        )
        try:
            # A driver whose on() also undoes the failures of a running node (kind: a
            # partition, a stopped kubelet) is asked even when the node is on.
            if driver.state() is not PowerState.ON or getattr(driver, "on_restores_running", False):
                driver.on()
        finally:
            driver.close()

    def uncordon(self, node: str) -> None:
        with self._api() as client, contextlib.suppress(NotFound):
            actions.uncordon(client, node)

    def remove_taint(self, node: str, key: str, effect: str) -> None:
        with self._api() as client, contextlib.suppress(NotFound):
            actions.remove_taint(client, node, key, effect)

    def restore_node(self, node: str, manifest: dict[str, Any]) -> None:
        with self._api() as client:
            if client.get_or_none(f"/api/v1/nodes/{node}") is None:
                client.create("/api/v1/nodes", manifest)

    def release_stale_lock(self) -> str | None:
        """Delete the cluster lock of a crashed run on this machine; its holder, or None."""
        with self._api() as client:
            return ClusterLock.break_stale(client)


@dataclass
class PowerResult:
    """What a parallel power operation did, with its timings (monotonic seconds)."""

    nodes: list[str]
    sent: dict[str, float] = field(default_factory=dict)
    acknowledged: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def skew_s(self) -> float:
        """Between the first and the last acknowledgement."""
        acks = list(self.acknowledged.values())
        return max(acks) - min(acks) if len(acks) > 1 else 0.0

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
        if not str(t.get("key", "")).startswith("node.kubernetes.io/")
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
        self.timeline = timeline or Timeline()
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
        self._drivers: dict[tuple[str, str | None], PowerDriver] = {}
        self._drivers_lock = threading.Lock()
        self._entries: dict[tuple[str, str], str] = {}
        self._lock: ClusterLock | None = None
        self._restore_signals: Callable[[], None] | None = None
        self.journal: Journal | None = None
        self.undo: UndoStack | None = None

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
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self.undo is not None and self.undo_on_exit:
                self.undo.__exit__(exc_type, exc, tb)
        finally:
            self._close()

    def _close(self) -> None:
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
        with self.undo.disruption(action, target, undo=undo) as entry:
            self._entries[(action, target)] = entry.id
            fn()

    def _undone(self, action: str, target: str) -> None:
        entry_id = self._entries.pop((action, target), None)
        if entry_id is not None and self.journal is not None:
            self.journal.mark_undone(entry_id)

    def _journal_entries(self) -> list[JournalEntry]:
        if self.journal is not None:
            return self.journal.entries()
        if self.journal_path.exists():  # a dry run: read without taking the journal's lock
            return Journal.read(self.journal_path)
        return []

    def journal_down(self) -> set[str]:
        """Nodes the durable journal still owes a power-on: powered off (or partitioned, or
        caught in a power action that failed midway) by this run or an earlier one that was
        not undone, such as an earlier ``powercut power off``."""
        return {
            str(e.undo.args["node"])
            for e in self._journal_entries()
            if e.owes_undo and e.undo.action == "power_on" and "node" in e.undo.args
        }

    def nodes_down(self) -> set[str]:
        """The nodes the blast-radius rules count as down: this session's and the journal's."""
        return self.down | self.journal_down()

    def _check_blast_radius(self, names: list[str], action: str) -> Plan:
        down = self.nodes_down()
        earlier = sorted(down - self.down)
        if earlier:
            self.say(
                f"the journal {self.journal_path} still owes a power-on for {', '.join(earlier)}: "
                "counted as down (`powercut power on` or `powercut recover` settles it)"
            )
        return plan_disruption(self.inventory, names, already_down=sorted(down), action=action)

    def _power_restored(self, node: str) -> None:
        """The node is on: every power-on the journal owes for it is settled."""
        self._undone("power_off", f"node/{node}")
        self._undone("power_cycle", f"node/{node}")
        if self.journal is not None:
            for e in self.journal.entries():
                if e.owes_undo and e.undo.action == "power_on" and e.undo.args.get("node") == node:
                    self.journal.mark_undone(e.id)
        self.down.discard(node)

    # -- power ------------------------------------------------------------------------------

    def power_off(
        self, nodes: Iterable[str], *, graceful: bool = False, protocol: str | None = None
    ) -> PowerResult:
        """Power the nodes off in parallel; returns once every BMC acknowledged and the new
        state was read back. The skew between the first and last acknowledgement is kept."""
        names = list(nodes)
        plan = self._check_blast_radius(names, "power off")
        how = "graceful" if graceful else "forced"
        if self.dry_run:
            for n in names:
                proto = protocol or self.inventory.node(n).power.driver
                self.plan.append(f"power off {n} ({how}) through {proto}; undo: power on")
            self.plan.extend(plan.describe())
            return PowerResult(names)
        result = PowerResult(names)

        def one(node: str) -> None:
            driver = self.driver(node, protocol)

            def act() -> None:
                result.sent[node] = time.monotonic()
                self.timeline.action(
                    node, "power-off sent", graceful=graceful, protocol=protocol or ""
                )
                driver.off(graceful=graceful)
                result.acknowledged[node] = time.monotonic()
                self.timeline.action(node, "power-off acknowledged")

            self._journaled("power_off", f"node/{node}", UndoSpec.power_on(node), act)
            self.down.add(node)
            self._told(result, node, "power-off", PowerState.OFF)

        self._parallel(names, one, result, "power off")
        self.last_power = result
        self.say(f"powered off {', '.join(names)} ({how}); ack skew {result.skew_s * 1000:.0f} ms")
        return result

    def power_on(self, nodes: Iterable[str], *, protocol: str | None = None) -> PowerResult:
        names = list(nodes)
        if self.dry_run:
            self.plan.extend(f"power on {n}" for n in names)
            return PowerResult(names)
        result = PowerResult(names)

        def one(node: str) -> None:
            proto = protocol if protocol not in (None, "ssh") else None
            if proto is None:
                proto = power_protocol_for_restore(self.inventory, node)
            driver = self.driver(node, proto)
            result.sent[node] = time.monotonic()
            self.timeline.action(node, "power-on sent")
            driver.on()
            result.acknowledged[node] = time.monotonic()
            self.timeline.action(node, "power-on acknowledged")
            self._power_restored(node)
            self._told(result, node, "power-on", PowerState.ON)

        self._parallel(names, one, result, "power on")
        self.say(f"powered on {', '.join(names)}")
        return result

    def power_cycle(self, nodes: Iterable[str], *, protocol: str | None = None) -> PowerResult:
        """Power-cycle the nodes in parallel (off, then on again: a reset).

        Checked against the blast-radius rules like a power-off (the nodes are down
        meanwhile) and journaled with a power-on as its undo, since a cycle that fails
        midway can leave a node off. Each entry is marked undone once the driver returned,
        which it does only after reading the power state back as on.
        """
        names = list(nodes)
        plan = self._check_blast_radius(names, "power cycle")
        if self.dry_run:
            for n in names:
                proto = protocol or self.inventory.node(n).power.driver
                self.plan.append(
                    f"power-cycle {n} through {proto}; undo if it stops midway: power on"
                )
            self.plan.extend(plan.describe())
            return PowerResult(names)
        result = PowerResult(names)

        def one(node: str) -> None:
            driver = self.driver(node, protocol)
            target = f"node/{node}"

            def act() -> None:
                result.sent[node] = time.monotonic()
                self.timeline.action(node, "power-cycle sent", protocol=protocol or "")
                driver.cycle()  # returns once the node reads back as on
                result.acknowledged[node] = time.monotonic()
                self.timeline.action(node, "power-cycle acknowledged")

            self._journaled("power_cycle", target, UndoSpec.power_on(node), act)
            self._undone("power_cycle", target)
            self._told(result, node, "power cycle", PowerState.ON)

        self._parallel(names, one, result, "power cycle")
        self.last_power = result
        self.say(f"power-cycled {', '.join(names)}")
        return result

    def _told(self, result: PowerResult, node: str, what: str, state: PowerState) -> None:
        """Tell one node's acknowledgement (with its read-back) as soon as it arrived."""
        took = result.acknowledged[node] - result.sent[node]
        with self._say_lock:
            self.say(f"{node}: {what} acknowledged after {took:.1f} s, state {state.name}")

    def _parallel(
        self, names: list[str], fn: Callable[[str], None], result: PowerResult, what: str
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

        pool = ThreadPoolExecutor(max_workers=max(1, min(16, len(names))))
        futures = {n: pool.submit(run, n) for n in names}
        try:
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

    def restore_node(self, node: str) -> None:
        """Re-create a deleted Node (a real kubelet re-registers by itself; kwok does not)."""
        entry = self._entries.get(("delete_node", f"node/{node}"))
        if entry is None or self.journal is None:
            return
        spec = self.journal.get(entry).undo
        ClusterExecutor(self.inventory, self.client).restore_node(node, dict(spec.args["manifest"]))
        self._undone("delete_node", f"node/{node}")

    def force_delete_pods(self, node: str) -> list[str]:
        if self.dry_run:
            self.plan.append(f"force-delete the pods of {node} (grace 0)")
            return []
        return list(actions.force_delete_pods(self.client, node, timeline=self.timeline))

    def add_out_of_service_taint(self, node: str) -> None:
        if self.dry_run:
            self.plan.append(
                f"taint {node} {actions.OUT_OF_SERVICE_KEY}:NoExecute; undo: remove it"
            )
            return
        self._journaled(
            "out_of_service",
            f"node/{node}",
            UndoSpec.remove_taint(node, actions.OUT_OF_SERVICE_KEY, "NoExecute"),
            lambda: actions.add_out_of_service_taint(self.client, node, timeline=self.timeline),
        )

    def remove_out_of_service_taint(self, node: str) -> None:
        if self.dry_run:
            self.plan.append(f"remove the out-of-service taint from {node}")
            return
        actions.remove_out_of_service_taint(self.client, node, timeline=self.timeline)
        self._undone("out_of_service", f"node/{node}")
