"""The durable journal: a JSON-lines file, appended and ``fsync``-ed before each disruptive
action starts, read back (a torn last line ignored, damage elsewhere refused) by
``powercut recover``. The file format is in :mod:`harness.journal`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from harness.errors import PermanentError, has_acted
from harness.journal.entries import (
    OWED_STATES,
    EntryState,
    JournalEntry,
    JournalNote,
    UndoSpec,
    describe_exception,
)
from harness.journal.liveness import process_identity, this_process

log = logging.getLogger(__name__)

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
                self.mark_failed(entry.id, describe_exception(exc))
            else:
                self.mark_not_done(entry.id, describe_exception(exc))
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
