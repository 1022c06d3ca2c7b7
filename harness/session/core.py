"""The session's core: its lifecycle and what it owes.

Entering a session installs the signal handlers, opens the journal and the undo stack,
takes the cluster lock and starts watching the stop conditions; ending it (``with``, or
:meth:`SessionCore.finish`) runs the undos still owed and releases all of it. In between,
every disruption goes through :meth:`SessionCore._journaled` (its undo journaled before it
acts) after :meth:`SessionCore._check_blast_radius` counted the nodes already down, this
session's and those an earlier run's journal still owes a power-on. The disruptions
themselves are the mixins over this class (see ``harness/session/__init__.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Self

from harness.errors import PowercutError
from harness.inventory import Inventory
from harness.journal import (
    Journal,
    JournalEntry,
    UndoResult,
    UndoSpec,
    UndoStack,
    install_signal_handlers,
)
from harness.kube.client import KubeClient
from harness.kube.ledger import UNDO
from harness.kube.lock import ClusterLock
from harness.kube.target import client_for
from harness.kube.timeline import Timeline
from harness.power.base import PowerDriver, PowerState
from harness.power.factory import driver_for
from harness.safety import Plan, plan_disruption
from harness.session.executor import ClusterExecutor
from harness.session.parallel import PowerResult
from harness.session.paths import journal_path_for
from harness.session.restore import read_power, recent_power_actions
from harness.session.stop import StopConditions, StoppedByCondition

log = logging.getLogger(__name__)
Say = Callable[[str], None]


class SessionCore:
    """A session's state, lifecycle and bookkeeping; :class:`harness.session.Session` adds
    the disruptions."""

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
        self._stops = StopConditions(inventory, self.timeline, self.say)

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            self._client = client_for(self.inventory)
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
                self._stops.watch()
        except BaseException:
            self._close()
            raise
        return self

    # -- stop conditions (harness/session/stop.py) ------------------------------------------

    @property
    def stopped_by(self) -> StoppedByCondition | None:
        """The stop condition that breached, if one did."""
        return self._stops.stopped_by

    def request_stop(self, condition: str, detail: str) -> None:
        """Stop the scenario: a stop condition breached (callable from any thread). The main
        thread raises :class:`StoppedByCondition` at once (blocked or not); a session used
        from another thread raises it before its next disruption. Its undos then run, even
        with ``keep_on_failure``."""
        self._stops.request(condition, detail)

    def check_stop(self) -> None:
        """Raise :class:`StoppedByCondition` (once) if a stop condition breached."""
        self._stops.check()

    # -- ending -----------------------------------------------------------------------------

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._stops.stop_watching()
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
            self._stops.stop_watching()
            if self.undo is None or not self.undo_on_exit:
                return []
            if self.stopped_by is not None:
                self.undo.keep_on_failure = False  # stopped: put everything back now
            with self.timeline.ledger.waiting(UNDO):  # BMC and API calls
                return self.undo.finish(failed=failed)
        finally:
            self._close()

    def _close(self) -> None:
        self._stops.stop_watching()
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

    def _tell(self, message: str) -> None:
        """Say ``message`` from any thread (power actions tell their progress from threads)."""
        with self._say_lock:
            self.say(message)

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
