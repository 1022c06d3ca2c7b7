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
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import fcntl
import json
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Final, Protocol, Self, runtime_checkable

from harness.errors import PermanentError, has_acted

__all__ = [
    "OWED_STATES",
    "EntryState",
    "Journal",
    "JournalEntry",
    "JournalNote",
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
    "recovery_order",
    "run_alive",
    "shield_signals",
]

log = logging.getLogger(__name__)


class EntryState(enum.StrEnum):
    PENDING = "pending"  # undo registered, action started
    DONE = "done"  # action completed; undo owed
    FAILED = "failed"  # action raised; it may have half-happened; undo owed
    NOT_DONE = "not-done"  # action raised before it changed anything; nothing owed
    UNDONE = "undone"  # undo completed, or the target already read restored
    FORGOTTEN = "forgotten"  # an operator fixed it by hand (`powercut journal forget`)


#: The states in which an entry still owes its undo.
OWED_STATES: Final[frozenset[EntryState]] = frozenset(
    (EntryState.PENDING, EntryState.DONE, EntryState.FAILED)
)


def this_process() -> str:
    """Who begins an entry: ``host/pid-N``, the prefix the cluster lock's holder has too."""
    return f"{socket.gethostname()}/pid-{os.getpid()}"


def process_alive(pid: int, *, proc: Path = Path("/proc")) -> bool:
    """Whether process ``pid`` of this machine is alive. A zombie is not: it has exited and
    only waits for its parent to reap it (PID 1 in many containers does not at once), and
    neither is a process being torn down (state X). Read from ``/proc/PID/stat``; where
    there is no ``/proc``, a signal 0 decides (which counts zombies as alive)."""
    if pid <= 0:
        return False
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        if proc.is_dir():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # "PID (comm) STATE ...": comm may hold spaces and parentheses; the state follows the last ")".
    state = stat.rpartition(")")[2].split()[:1]
    return not state or state[0] not in ("Z", "X", "x")


def process_identity(pid: int, *, proc: Path = Path("/proc")) -> str | None:
    """What tells process ``pid`` from a later one that reuses its number: the boot id and
    the process's start time (``/proc``), or None where they cannot be read."""
    try:
        boot = (proc / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
        fields = (proc / str(pid) / "stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    # Fields after the comm: state is field 3 of stat, starttime field 22.
    return f"{boot}:{fields[19]}" if len(fields) > 19 else None


def run_alive(pid: int, identity: str | None) -> bool:
    """Whether the process that wrote an entry (``pid``, with ``identity`` when recorded)
    is still running: alive, not a zombie, and not a later process with the same number."""
    if not process_alive(pid):
        return False
    return identity is None or process_identity(pid) in (None, identity)


@runtime_checkable
class UndoExecutor(Protocol):
    """What :func:`recover` needs to put the cluster back. Every method must be idempotent.

    A method may return a note saying the target already read restored (``"already on,
    read through ipmi"``): the entry is then settled with that note instead of "undone".
    """

    def power_on(self, node: str) -> str | None: ...

    def uncordon(self, node: str) -> str | None: ...

    def remove_taint(self, node: str, key: str, effect: str) -> str | None: ...

    def restore_node(self, node: str, manifest: dict[str, Any]) -> str | None: ...

    # Optional, for the failure kinds beyond power (an executor without them reports the
    # undo as failed, naming it): ``heal(node, protocol)`` reconnects a partitioned node,
    # ``start_kubelet(node, protocol)`` starts a stopped kubelet, through that driver;
    # ``restore_job(namespace, name, manifest)`` creates a re-run Job again from the manifest
    # stored before it was deleted, unless it exists.


UNDO_ACTIONS: Final[frozenset[str]] = frozenset(
    ("power_on", "uncordon", "remove_taint", "restore_node", "heal", "start_kubelet", "restore_job")
)


@dataclasses.dataclass(frozen=True, slots=True)
class UndoSpec:
    """An undo as data: the :class:`UndoExecutor` method to call and its keyword arguments."""

    action: str
    args: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.action not in UNDO_ACTIONS:
            raise PermanentError(
                f"unknown undo action {self.action!r}; must be one of: "
                f"{', '.join(sorted(UNDO_ACTIONS))}"
            )
        try:
            json.dumps(dict(self.args))
        except (TypeError, ValueError) as exc:
            raise PermanentError(
                f"undo {self.action} arguments are not JSON-serialisable: {exc}"
            ) from None

    @classmethod
    def power_on(cls, node: str) -> UndoSpec:
        return cls("power_on", {"node": node})

    @classmethod
    def uncordon(cls, node: str) -> UndoSpec:
        return cls("uncordon", {"node": node})

    @classmethod
    def remove_taint(cls, node: str, key: str, effect: str) -> UndoSpec:
        return cls("remove_taint", {"node": node, "key": key, "effect": effect})

    @classmethod
    def restore_node(cls, node: str, manifest: Mapping[str, Any]) -> UndoSpec:
        return cls("restore_node", {"node": node, "manifest": dict(manifest)})

    @classmethod
    def heal(cls, node: str, protocol: str) -> UndoSpec:
        """Reconnect a partitioned node through the driver that cut it."""
        return cls("heal", {"node": node, "protocol": protocol})

    @classmethod
    def start_kubelet(cls, node: str, protocol: str) -> UndoSpec:
        """Start a stopped kubelet through the driver that stopped it."""
        return cls("start_kubelet", {"node": node, "protocol": protocol})

    def run(self, executor: UndoExecutor) -> str | None:
        """Carry the undo out; returns the executor's note when the target already read
        restored (nothing had to be done), else None."""
        method = getattr(executor, self.action, None)
        if not callable(method):
            raise PermanentError(f"the undo executor cannot {self.action}")
        note = method(**self.args)
        return note if isinstance(note, str) else None

    @classmethod
    def restore_job(cls, namespace: str, name: str, manifest: Mapping[str, Any]) -> UndoSpec:
        """Create a Job again from its manifest (a re-run that deleted it and did not get to
        create it again)."""
        return cls(
            "restore_job", {"namespace": namespace, "name": name, "manifest": dict(manifest)}
        )

    def __str__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.args.items() if k != "manifest")
        return f"{self.action}({shown})"


@dataclasses.dataclass(slots=True)
class JournalEntry:
    """One disruption as the journal knows it."""

    id: str
    action: str
    target: str
    undo: UndoSpec
    state: EntryState
    started_at: float  # wall clock, seconds since the epoch
    ended_at: float | None = None  # when the action returned or raised
    undone_at: float | None = None
    error: str | None = None  # why the action failed
    undo_error: str | None = None  # why the last undo attempt failed
    undo_attempts: int = 0
    by: str | None = None  # host/pid-N of the process that began it (None: older journals)
    note: str | None = None  # how it was settled: "already on ...", an operator's reason
    proc: str | None = None  # boot id and start time of ``by`` (tells a reused pid apart)

    @property
    def owes_undo(self) -> bool:
        return self.state in OWED_STATES

    @property
    def pid(self) -> int | None:
        """The process id of ``by`` when it ran on this host, else None."""
        if self.by is None:
            return None
        host, _, rest = self.by.partition("/pid-")
        text = rest.split("/", 1)[0]
        return int(text) if host == socket.gethostname() and text.isdigit() else None

    @property
    def duration_s(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.started_at

    def __str__(self) -> str:
        return f"{self.action} {self.target} [{self.state}] (undo: {self.undo})"


@dataclasses.dataclass(frozen=True, slots=True)
class JournalNote:
    """Something the journal keeps that owes nothing, such as a fencing override: an
    operator's explicit permission to act as if a node were off when no BMC confirmed it."""

    action: str
    target: str
    detail: str
    at: float  # wall clock, seconds since the epoch
    by: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class UndoResult:
    """What one undo did (``seconds``: how long it took, when measured)."""

    description: str
    ok: bool
    error: str | None = None
    entry_id: str | None = None
    seconds: float | None = None
    note: str | None = None  # the target already read restored: nothing had to be done


class UndoFailed(PermanentError):
    """Some undos failed: the cluster is not fully back. ``results`` says which."""

    def __init__(self, results: list[UndoResult]) -> None:
        self.results = results
        failed = [r for r in results if not r.ok]
        lines = "; ".join(f"{r.description}: {r.error}" for r in failed)
        super().__init__(
            f"{len(failed)} of {len(results)} undos failed, the cluster is not fully restored "
            f"(run `powercut recover`): {lines}"
        )


def _describe_exception(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------------------------
# The durable journal
# --------------------------------------------------------------------------------------------


class Journal:
    """An append-only, fsync-ed JSON-lines journal of disruptions.

    Opening takes an exclusive ``flock`` on the file, so two runs cannot write one journal;
    the lock goes with the process, so a crashed run never blocks ``recover``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex[:12],
    ) -> None:
        self.path = Path(path)
        self.by = this_process()
        self.proc = process_identity(os.getpid())
        self._clock = clock
        self._new_id = new_id
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise PermanentError(
                f"journal {self.path} is in use by another powercut process"
            ) from None
        self._fd: int | None = fd
        try:
            if created:
                _fsync_dir(self.path.parent)
            self._entries, self._notes, valid_length = _load(self.path)
            if valid_length < os.fstat(fd).st_size:
                # The previous writer died mid-line; that record was never acknowledged.
                log.warning("journal %s: dropping an incomplete last line", self.path)
                os.ftruncate(fd, valid_length)
                os.fsync(fd)
        except BaseException:
            self.close()
            raise

    # -- reading ----------------------------------------------------------------------------

    @staticmethod
    def read(path: str | os.PathLike[str]) -> list[JournalEntry]:
        """Entries of a journal file without opening it for writing (no lock)."""
        entries, _notes, _ = _load(Path(path))
        return list(entries.values())

    @staticmethod
    def read_notes(path: str | os.PathLike[str]) -> list[JournalNote]:
        """The notes of a journal file (fencing overrides...), oldest first, without a lock."""
        _entries, notes, _ = _load(Path(path))
        return notes

    def notes(self) -> list[JournalNote]:
        with self._lock:
            return list(self._notes)

    def note(self, action: str, target: str, detail: str) -> JournalNote:
        """Record something that owes nothing (a fencing override); durable on return."""
        now = self._clock()
        with self._lock:
            self._append(
                {
                    "op": "note",
                    "id": "-",
                    "action": action,
                    "target": target,
                    "detail": detail,
                    "by": self.by,
                    "ts": now,
                }
            )
            note = JournalNote(action, target, detail, now, self.by)
            self._notes.append(note)
            return note

    def entries(self) -> list[JournalEntry]:
        """All entries, oldest first."""
        with self._lock:
            return [dataclasses.replace(e) for e in self._entries.values()]

    def get(self, entry_id: str) -> JournalEntry:
        with self._lock:
            return dataclasses.replace(self._entry(entry_id))

    def pending_undos(self) -> list[JournalEntry]:
        """Entries that still owe their undo, newest first (the order to undo them in)."""
        with self._lock:
            owed = [dataclasses.replace(e) for e in self._entries.values() if e.owes_undo]
        return owed[::-1]

    # -- writing ----------------------------------------------------------------------------

    def begin(self, action: str, target: str, undo: UndoSpec) -> JournalEntry:
        """Record a disruption about to happen, with its undo. Durable when this returns."""
        entry_id = self._new_id()
        now = self._clock()
        with self._lock:
            if entry_id in self._entries:
                raise PermanentError(f"journal {self.path}: duplicate entry id {entry_id!r}")
            self._append(
                {
                    "op": "begin",
                    "id": entry_id,
                    "action": action,
                    "target": target,
                    "undo": {"action": undo.action, "args": dict(undo.args)},
                    "by": self.by,
                    "proc": self.proc,
                    "ts": now,
                }
            )
            entry = JournalEntry(
                entry_id, action, target, undo, EntryState.PENDING, now, by=self.by, proc=self.proc
            )
            self._entries[entry_id] = entry
            return dataclasses.replace(entry)

    def mark_done(self, entry_id: str) -> None:
        """The action completed; its undo is still owed."""
        self._set_state(entry_id, EntryState.DONE)

    def mark_failed(self, entry_id: str, error: str) -> None:
        """The action raised; it may have half-happened, so its undo is still owed."""
        self._set_state(entry_id, EntryState.FAILED, error=error)

    def mark_not_done(self, entry_id: str, error: str) -> None:
        """The action raised before it changed anything: nothing is owed."""
        self._set_state(entry_id, EntryState.NOT_DONE, error=error)

    def mark_undone(self, entry_id: str, note: str | None = None) -> None:
        """The undo completed (``note``: or the target already read restored, and how that
        was seen). Marking an entry that owes nothing undone is a no-op."""
        self._set_state(entry_id, EntryState.UNDONE, note=note)

    def forget(self, entry_id: str, reason: str) -> JournalEntry:
        """An operator fixed the entry's target by hand: it owes nothing any more. The
        reason is recorded (``powercut journal`` shows it); it may not be empty."""
        if not reason.strip():
            raise PermanentError(
                f"journal {self.path}: forgetting entry {entry_id} needs a reason "
                "(what was fixed by hand, by whom)"
            )
        with self._lock:
            entry = self._entry(entry_id)
            if not entry.owes_undo:
                raise PermanentError(
                    f"journal {self.path}: entry {entry_id} ({entry.action} {entry.target}) "
                    f"owes nothing (it is {entry.state}); only entries that are "
                    f"{', '.join(sorted(OWED_STATES))} can be forgotten"
                )
        self._set_state(entry_id, EntryState.FORGOTTEN, note=reason.strip())
        return self.get(entry_id)

    def mark_undo_failed(self, entry_id: str, error: str) -> None:
        """An undo attempt failed; the entry keeps owing its undo."""
        now = self._clock()
        with self._lock:
            entry = self._entry(entry_id)
            self._append({"op": "undo_failed", "id": entry_id, "error": error, "ts": now})
            entry.undo_error = error
            entry.undo_attempts += 1

    @contextlib.contextmanager
    def disruption(self, action: str, target: str, *, undo: UndoSpec) -> Iterator[JournalEntry]:
        """Journal ``action`` on ``target`` around the ``with`` body.

        The entry (and its undo) is on disk before the body runs; it is marked ``done`` when
        the body returns, ``failed`` when it raises, and ``not-done`` when it raises an error
        that says it acted on nothing (``PowercutError.acted is False``); the exception
        propagates.
        """
        entry = self.begin(action, target, undo)
        try:
            yield entry
        except BaseException as exc:
            if has_acted(exc):
                self.mark_failed(entry.id, _describe_exception(exc))
            else:
                self.mark_not_done(entry.id, _describe_exception(exc))
            raise
        self.mark_done(entry.id)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)  # also releases the flock
                self._fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------

    def _entry(self, entry_id: str) -> JournalEntry:
        try:
            return self._entries[entry_id]
        except KeyError:
            raise PermanentError(f"journal {self.path} has no entry {entry_id!r}") from None

    def _set_state(
        self,
        entry_id: str,
        state: EntryState,
        *,
        error: str | None = None,
        note: str | None = None,
    ) -> None:
        now = self._clock()
        with self._lock:
            entry = self._entry(entry_id)
            if entry.state is state:
                return
            if not entry.owes_undo:
                if state is EntryState.UNDONE:
                    return  # settled already (not done, undone, forgotten): nothing to undo
                raise PermanentError(
                    f"journal {self.path}: entry {entry_id} is already {entry.state}, "
                    f"cannot mark it {state}"
                )
            record: dict[str, Any] = {"op": "state", "id": entry_id, "state": str(state)}
            if error is not None:
                record["error"] = error
            if note is not None:
                record["note"] = note
            record["ts"] = now
            self._append(record)
            _apply_state(entry, state, now, error, note)

    def _append(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            raise PermanentError(f"journal {self.path} is closed")
        record["at"] = datetime.fromtimestamp(record["ts"], UTC).isoformat(timespec="milliseconds")
        line = json.dumps(record, separators=(",", ":"), sort_keys=False) + "\n"
        data = line.encode("utf-8")
        written = 0
        while written < len(data):
            written += os.write(self._fd, data[written:])
        os.fsync(self._fd)


def _apply_state(
    entry: JournalEntry, state: EntryState, ts: float, error: str | None, note: str | None
) -> None:
    entry.state = state
    if state in (EntryState.DONE, EntryState.FAILED, EntryState.NOT_DONE):
        entry.ended_at = ts
        entry.error = error
    elif state in (EntryState.UNDONE, EntryState.FORGOTTEN):
        entry.undone_at = ts
        entry.undo_error = None
        entry.note = note


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _load(path: Path) -> tuple[dict[str, JournalEntry], list[JournalNote], int]:
    """Entries by id (in begin order), notes, and the byte length of the well-formed
    prefix."""
    entries: dict[str, JournalEntry] = {}
    notes: list[JournalNote] = []
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return entries, notes, 0
    except OSError as exc:
        raise PermanentError(f"cannot read journal {path}: {exc.strerror}") from None
    offset = 0
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        is_last = number == len(lines)
        if is_last and not raw:
            break  # the file ends with a newline
        if not is_last and not raw.strip():
            offset += len(raw) + 1
            continue  # a blank line (hand-edited journal)
        try:
            if is_last:
                raise ValueError("no newline at the end")
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
            if record.get("op") == "note":
                notes.append(
                    JournalNote(
                        str(record["action"]),
                        str(record["target"]),
                        str(record["detail"]),
                        float(record["ts"]),
                        str(record["by"]) if record.get("by") else None,
                    )
                )
            else:
                _fold(entries, record)
        except (ValueError, KeyError, TypeError, PermanentError) as exc:
            if is_last:
                # A write cut short by a crash: never acknowledged, so never acted upon.
                break
            raise PermanentError(
                f"journal {path} line {number} is damaged ({exc}); fix or delete that line, "
                "then run recover again"
            ) from None
        offset += len(raw) + 1
    return entries, notes, offset


def _fold(entries: dict[str, JournalEntry], record: dict[str, Any]) -> None:
    op = record["op"]
    entry_id = str(record["id"])
    ts = float(record["ts"])
    if op == "begin":
        undo = record["undo"]
        entries[entry_id] = JournalEntry(
            id=entry_id,
            action=str(record["action"]),
            target=str(record["target"]),
            undo=UndoSpec(str(undo["action"]), dict(undo.get("args", {}))),
            state=EntryState.PENDING,
            started_at=ts,
            by=str(record["by"]) if record.get("by") else None,
            proc=str(record["proc"]) if record.get("proc") else None,
        )
        return
    entry = entries.get(entry_id)
    if entry is None:
        raise ValueError(f"record for unknown entry {entry_id!r}")
    if op == "state":
        note = record.get("note")
        _apply_state(
            entry,
            EntryState(record["state"]),
            ts,
            record.get("error"),
            None if note is None else str(note),
        )
    elif op == "undo_failed":
        entry.undo_error = str(record.get("error"))
        entry.undo_attempts += 1
    else:
        raise ValueError(f"unknown op {op!r}")


# --------------------------------------------------------------------------------------------
# Recovery
# --------------------------------------------------------------------------------------------


#: Undos that :func:`recover` runs before all others: they need only the BMCs, not the
#: Kubernetes API, which may be down until they ran (lost control-plane nodes).
FIRST_UNDOS: Final[frozenset[str]] = frozenset({"power_on"})


def recovery_order(entries: list[JournalEntry]) -> list[JournalEntry]:
    """``entries`` (newest first) in the order to undo them: power-ons first, then the rest,
    each group newest first. A node is powered on before it is uncordoned or untainted, and
    no power-on waits behind an API call that cannot succeed while the API is down."""
    first = [e for e in entries if e.undo.action in FIRST_UNDOS]
    return first + [e for e in entries if e.undo.action not in FIRST_UNDOS]


def recover(
    journal: Journal,
    executor: UndoExecutor,
    *,
    on_result: Callable[[UndoResult], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    skip: Callable[[JournalEntry], bool] = lambda _entry: False,
) -> list[UndoResult]:
    """Run every undo the journal still owes (see :func:`recovery_order`); return what was
    done. ``on_result`` is called as each undo finishes.

    Each success is marked ``undone`` at once, so an interrupted recovery resumes where it
    stopped and a second run does nothing. A failed undo is recorded and the others still
    run; check ``all(r.ok for r in results)``. ``KeyboardInterrupt`` stops recovery (what
    remains stays owed in the journal). Entries for which ``skip`` is true are left owed
    (a run that is still alive: its undos are its own).
    """
    results: list[UndoResult] = []
    for entry in recovery_order([e for e in journal.pending_undos() if not skip(e)]):
        description = f"{entry.undo} (undoes {entry.action} {entry.target})"
        started = clock()
        try:
            note = entry.undo.run(executor)
        except Exception as exc:  # noqa: BLE001 - recorded, reported, and the others still run
            error = _describe_exception(exc)
            journal.mark_undo_failed(entry.id, error)
            log.error("recover: %s failed: %s", description, error)
            result = UndoResult(description, False, error, entry.id, clock() - started)
        else:
            journal.mark_undone(entry.id, note)
            log.info("recover: %s%s", description, f" ({note})" if note else "")
            result = UndoResult(description, True, None, entry.id, clock() - started, note)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


# --------------------------------------------------------------------------------------------
# In-process undo
# --------------------------------------------------------------------------------------------


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM (see :func:`install_signal_handlers`), so the
    stack unwinds through ``finally`` blocks and undos exactly as on Ctrl-C."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


class _SignalShield:
    """Defers :class:`Terminated` while undos run, so a SIGTERM cannot abort them halfway."""

    def __init__(self) -> None:
        self.depth = 0
        self.deferred: int | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.depth:
            log.warning(
                "%s received while undoing; finishing the undos first",
                signal.Signals(signum).name,
            )
            self.deferred = signum
            return
        raise Terminated(signum)


_SHIELD: Final = _SignalShield()


def install_signal_handlers(
    signums: tuple[int, ...] = (signal.SIGTERM,),
) -> Callable[[], None]:
    """Make SIGTERM (and the other ``signums``) raise :class:`Terminated` in the main thread.

    ``Terminated`` is a ``KeyboardInterrupt``: it is not caught by ``except Exception``, and
    it unwinds through :class:`UndoStack` and ``Journal.disruption`` so undos run. While an
    :class:`UndoStack` runs its undos the signal is deferred and raised afterwards. Returns a
    function that restores the previous handlers. Must be called from the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        raise PermanentError("signal handlers can only be installed from the main thread")
    previous = {s: signal.signal(s, _SHIELD.handler) for s in signums}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore


@contextlib.contextmanager
def shield_signals() -> Iterator[None]:
    """Defer :class:`Terminated` until the block ends (then raise it). Ctrl-C still works."""
    _SHIELD.depth += 1
    try:
        yield
    finally:
        _SHIELD.depth -= 1
        if not _SHIELD.depth and _SHIELD.deferred is not None:
            signum, _SHIELD.deferred = _SHIELD.deferred, None
            raise Terminated(signum)


class UndoStack:
    """Undos of the current scenario, run newest first when the ``with`` block ends.

    * Normal end: every undo runs; failures raise :class:`UndoFailed`.
    * The body raised an ``Exception`` (a failed check): undos run, unless
      ``keep_on_failure`` is set, in which case the cluster is left as it is for inspection
      and the journal (if any) still owes the undos (``powercut recover``).
    * ``KeyboardInterrupt`` / :class:`Terminated`: undos always run; the user asked to stop,
      not to keep evidence.

    Undo failures during a failing body are attached to that exception as notes, never
    replacing it.
    """

    def __init__(
        self,
        journal: Journal | None = None,
        executor: UndoExecutor | None = None,
        *,
        keep_on_failure: bool = False,
    ) -> None:
        self.journal = journal
        self.executor = executor
        self.keep_on_failure = keep_on_failure
        self._stack: list[tuple[str, Callable[[], object], str | None]] = []
        self.kept: list[str] = []

    def __len__(self) -> int:
        return len(self._stack)

    def push(
        self, description: str, undo: Callable[[], object], *, entry_id: str | None = None
    ) -> None:
        """Register ``undo`` (call it *before* the action it undoes). ``entry_id`` links it to
        a journal entry, which is marked undone when the undo succeeds."""
        self._stack.append((description, undo, entry_id))

    @contextlib.contextmanager
    def disruption(self, action: str, target: str, *, undo: UndoSpec) -> Iterator[JournalEntry]:
        """Journal the disruption and push its undo, both before the body acts."""
        if self.journal is None or self.executor is None:
            raise PermanentError("UndoStack.disruption needs a journal and an executor")
        executor = self.executor
        with self.journal.disruption(action, target, undo=undo) as entry:
            pushed = (f"{undo} (undoes {action} {target})", lambda: undo.run(executor), entry.id)
            self._stack.append(pushed)
            try:
                yield entry
            except BaseException as exc:
                if not has_acted(exc) and pushed in self._stack:
                    self._stack.remove(pushed)  # nothing happened: nothing to undo
                raise

    def run(self) -> list[UndoResult]:
        """Run and pop every undo, newest first; failures are recorded and the rest still run.

        SIGTERM is deferred until all undos ran; Ctrl-C stops (what is left stays owed in the
        journal).
        """
        results: list[UndoResult] = []
        with shield_signals():
            while self._stack:
                description, undo, entry_id = self._stack.pop()
                try:
                    outcome = undo()
                except Exception as exc:  # noqa: BLE001 - recorded; the other undos still run
                    error = _describe_exception(exc)
                    log.error("undo %s failed: %s", description, error)
                    if self.journal is not None and entry_id is not None:
                        self.journal.mark_undo_failed(entry_id, error)
                    results.append(UndoResult(description, False, error, entry_id))
                    continue
                note = outcome if isinstance(outcome, str) else None
                if self.journal is not None and entry_id is not None:
                    self.journal.mark_undone(entry_id, note)
                log.info("undone: %s%s", description, f" ({note})" if note else "")
                results.append(UndoResult(description, True, None, entry_id, note=note))
        return results

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, Exception) and self.keep_on_failure:
            self.kept = [description for description, _, _ in reversed(self._stack)]
            self._stack.clear()
            if self.kept:
                log.warning(
                    "keep-on-failure: leaving %d disruption(s) in place: %s; "
                    "run `powercut recover` to undo them",
                    len(self.kept),
                    "; ".join(self.kept),
                )
            return
        results = self.run()
        failed = [r for r in results if not r.ok]
        if not failed:
            return
        if exc is None:
            raise UndoFailed(results)
        for result in failed:
            exc.add_note(f"undo failed: {result.description}: {result.error}")
