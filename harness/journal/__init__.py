"""The disruption journal: every disruption is written down, with its undo, before it is done.

Two layers:

* :class:`Journal` — durable. A JSON-lines file, one record per line, appended and
  ``fsync``-ed *before* the disruptive action starts. If the harness dies (SIGKILL, power
  loss of the runner, OOM), ``powercut recover`` reads the journal and :func:`recover` runs
  every undo still owed: power-ons first, then the others, each group newest first.
* :class:`UndoStack` — in-process. Undo callables pushed before each action and run in
  reverse order when the scenario ends, fails, or is interrupted (Ctrl-C, SIGTERM via
  :func:`install_signal_handlers`). With ``keep_on_failure`` a failed scenario leaves the
  cluster as it is for inspection; the journal still lists what to undo.

Entry life cycle (``state``)::

    pending --action returned--> done --undo ran / target reads restored--> undone
       |\\--action raised--> failed --undo ran / target reads restored--> undone
       \\--action raised before it acted--> not-done
    pending, done, failed --operator: `powercut journal forget ID --reason`--> forgotten

``pending``, ``done`` and ``failed`` still owe their undo: an action that raised may have
half-happened (the BMC took the power-off, the read-back timed out). An action that raised
*before* it changed anything (a Redfish 401 before any command reached the BMC; an SSH
power-off after which the host kept answering: see ``PowercutError.acted``) is
``not-done`` and owes nothing. An undo is also settled when its target already reads
restored (a node that reads ON through any of its ways, a taint already gone): the
executor says so and the entry is marked ``undone`` with that note. ``forgotten`` records
an operator's manual fix, with the reason given. Undo operations must be idempotent
(powering on a node that is on is a no-op), and so is :func:`recover`: settled entries are
skipped, so running it twice is harmless.

Each entry records who began it (``by``: host and process id, as the cluster lock names
its holder), so ``recover`` can tell whether that run is still alive.

This module has no Kubernetes or BMC dependency: undos are data (:class:`UndoSpec`) carried
out by an injected :class:`UndoExecutor`.

File format (one JSON object per line)::

    {"op": "begin", "id": "...", "action": "power_off", "target": "node/w1",
     "undo": {"action": "power_on", "args": {"node": "w1"}}, "ts": 1700000000.0, "at": "..."}
    {"op": "state", "id": "...", "state": "done", "ts": ..., "at": "..."}
    {"op": "undo_failed", "id": "...", "error": "...", "ts": ..., "at": "..."}
    {"op": "state", "id": "...", "state": "undone", "note": "already on (ipmi)", ...}
    {"op": "state", "id": "...", "state": "forgotten", "note": "<operator's reason>", ...}

A crash can leave only the last line incomplete; it is ignored on load and trimmed before
the next append. Damage anywhere else raises ``PermanentError`` naming the line: silently
skipping a ``begin`` record could leave a node powered off.

The package, one concern a module: :mod:`~harness.journal.entries` (states, undo specs,
entries), :mod:`~harness.journal.store` (the file), :mod:`~harness.journal.recovery`
(``recover``), :mod:`~harness.journal.undo` (the in-process stack),
:mod:`~harness.journal.signals` (SIGTERM / SIGINT around undos) and
:mod:`~harness.journal.liveness` (whether a run's process still runs, from ``/proc``; the
cluster lock and the lab's process records use it too). Import from ``harness.journal``.
"""

from __future__ import annotations

from harness.journal.entries import (
    OWED_STATES,
    EntryState,
    JournalEntry,
    JournalNote,
    UndoExecutor,
    UndoFailed,
    UndoResult,
    UndoSpec,
)
from harness.journal.liveness import process_alive, process_identity, run_alive
from harness.journal.recovery import Recovered, recover, recover_owed, recovery_order
from harness.journal.signals import Terminated, install_signal_handlers, shield_signals
from harness.journal.store import Journal
from harness.journal.undo import UndoStack

__all__ = [
    "OWED_STATES",
    "EntryState",
    "Journal",
    "JournalEntry",
    "JournalNote",
    "Recovered",
    "Terminated",
    "UndoExecutor",
    "UndoFailed",
    "UndoResult",
    "UndoSpec",
    "UndoStack",
    "install_signal_handlers",
    "process_alive",
    "process_identity",
    "recover",
    "recover_owed",
    "recovery_order",
    "run_alive",
    "shield_signals",
]
