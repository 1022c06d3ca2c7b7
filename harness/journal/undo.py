"""The in-process undo stack: undo callables pushed before each action and run in reverse
order when the scenario ends, fails or is interrupted.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Self

from harness.errors import PermanentError, has_acted
from harness.journal.entries import (
    JournalEntry,
    UndoExecutor,
    UndoFailed,
    UndoResult,
    UndoSpec,
    describe_exception,
)
from harness.journal.signals import shield_signals
from harness.journal.store import Journal

log = logging.getLogger(__name__)


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
                    error = describe_exception(exc)
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

    def finish(self, *, failed: bool = False) -> list[UndoResult]:
        """End the scenario explicitly: run every undo, newest first, and return what each
        did (a failed undo is in the list, not raised). ``failed`` with ``keep_on_failure``:
        leave the disruptions in place for inspection instead (:attr:`kept`; the journal
        still owes them) and return nothing."""
        if failed and self.keep_on_failure:
            self._keep()
            return []
        return self.run()

    def _keep(self) -> None:
        self.kept = [description for description, _, _ in reversed(self._stack)]
        self._stack.clear()
        if self.kept:
            log.warning(
                "keep-on-failure: leaving %d disruption(s) in place: %s; "
                "run `powercut recover` to undo them",
                len(self.kept),
                "; ".join(self.kept),
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, Exception) and self.keep_on_failure:
            self._keep()
            return
        results = self.run()
        failed = [r for r in results if not r.ok]
        if not failed:
            return
        if exc is None:
            raise UndoFailed(results)
        for result in failed:
            exc.add_note(f"undo failed: {result.description}: {result.error}")
