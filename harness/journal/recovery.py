"""Running every undo a journal still owes (``powercut recover``): power-ons first, then the
others, each group newest first; idempotent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from harness.journal.entries import JournalEntry, UndoExecutor, UndoResult, describe_exception
from harness.journal.store import Journal

log = logging.getLogger(__name__)

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
            error = describe_exception(exc)
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
