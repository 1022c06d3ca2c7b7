"""Running every undo a journal still owes (``powercut recover``): power-ons first, then the
others, each group newest first; idempotent. :func:`recover_owed` is the whole recovery the
command runs: the runs still alive keep theirs, a power action a BMC may still apply is
waited out, then the undos, then a crashed run's cluster lock.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from harness.clock import SYSTEM_CLOCK
from harness.errors import PowercutError
from harness.journal.entries import JournalEntry, UndoExecutor, UndoResult, describe_exception
from harness.journal.liveness import run_alive
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


# --------------------------------------------------------------------------------------------
# The whole recovery (powercut recover)
# --------------------------------------------------------------------------------------------


@dataclass
class Recovered:
    """What :func:`recover_owed` did: the undos run, whether a crashed run's lock could not
    be checked, and the runs still alive that keep their undos."""

    results: list[UndoResult] = field(default_factory=list)
    lock_failed: bool = False
    alive: set[int] = field(default_factory=set)

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.results)

    @property
    def ok(self) -> bool:
        return not (self.failed or self.lock_failed or self.alive)

    def problems(self) -> str:
        """What is left to fix, in one line (empty when :attr:`ok`)."""
        what = [f"{self.failed} undo(s) failed"] if self.failed else []
        what += ["the cluster lock could not be checked"] if self.lock_failed else []
        what += ["a run that is still alive owes undos"] if self.alive else []
        return " and ".join(what)


def recover_owed(
    path: Path,
    executor: UndoExecutor,
    *,
    settling: Callable[[list[JournalEntry]], Mapping[str, float]],
    release_lock: Callable[[Mapping[int, bool]], str | None],
    say: Callable[[str], None],
    on_result: Callable[[UndoResult], None] | None = None,
    sleep: Callable[[float], None] = SYSTEM_CLOCK.sleep,
) -> Recovered:
    """Recover what the journal at ``path`` still owes.

    Each run that wrote an owed entry is judged once: alive (its undos stay its own) or
    gone (a zombie is gone). ``settling(entries)``: per node, how long a power action of
    ``entries`` may still be applied by its BMC; the longest is waited out first, so the
    node's power is read after it. Then :func:`recover` (power-ons first), and
    ``release_lock(verdicts)`` deletes a gone run's cluster lock (its holder, or None);
    a failure there is reported, never raised."""
    out = Recovered()
    with Journal(path) as journal:
        pending = journal.pending_undos()
        verdicts: dict[int, bool] = {}
        for e in pending:
            if e.pid is not None and e.pid != os.getpid() and e.pid not in verdicts:
                verdicts[e.pid] = run_alive(e.pid, e.proc)
        out.alive = {pid for pid, is_alive in verdicts.items() if is_alive}
        theirs = [e for e in pending if e.pid in out.alive]
        if theirs:
            say(
                f"left to the run(s) still alive (pid {', '.join(map(str, sorted(out.alive)))}): "
                f"{len(theirs)} disruption(s); stop that run (it undoes them) or wait"
            )
        mine = len(pending) - len(theirs)
        young = settling([e for e in pending if e.pid not in out.alive])
        if young:
            wait = max(young.values())
            say(
                f"waiting {wait:.0f} s: a power action on {', '.join(sorted(young))} "
                "began less than one power deadline ago and a BMC may still apply it; "
                "its node's power is read after that"
            )
            sleep(wait)
        if mine:
            say(
                f"recovering {mine} disruption(s) from {path} "
                "(power-ons first, then the rest, newest first):"
            )
            out.results = recover(
                journal, executor, on_result=on_result, skip=lambda e: e.pid in out.alive
            )
        elif not pending:
            say(f"nothing to recover: every disruption in {path} was undone")
    try:
        stale = release_lock(verdicts)
    except PowercutError as exc:
        out.lock_failed = True
        say(
            f"  FAILED: release the cluster lock of a crashed run: {exc} (a lock nobody "
            "renews also expires by itself after its lease duration)"
        )
    else:
        if stale:
            say(f"  done: released the cluster lock of a run that is gone ({stale})")
    return out
