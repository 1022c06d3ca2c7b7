"""``powercut journal``: what the journal owes, by whom and why; ``forget`` an entry fixed by
hand."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from harness.errors import ConfigError, PermanentError
from harness.inventory import load_inventory
from harness.journal import Journal, JournalEntry, run_alive
from harness.session import journal_path_for
from harness.settings import attached

_WHY = {
    "pending": "the action started and never reported back (the run stopped during it)",
    "done": "the action completed; its undo has not run",
    "failed": "the action raised and may have half-happened",
}


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    journal = sub.add_parser(
        "journal",
        help="list what the journal owes (by whom, why); `forget ID --reason` a manual fix",
        description="List the undos the inventory's journal still owes: each entry's id, "
        "action and target, who began it (host/pid, and whether that process is still "
        "alive), why it is owed, and the last undo attempt's error. `--all` lists settled "
        "entries too (undone, not done, forgotten). `powercut journal forget ID --reason "
        "TEXT` records that an operator fixed that entry's target by hand: it owes nothing "
        "from then on, and the reason stays in the journal.",
    )
    _where(journal, argparse.SUPPRESS)
    journal.add_argument("--all", action="store_true", help="list settled entries too")
    jsub = journal.add_subparsers(dest="journal_command", metavar="ACTION")
    forget = jsub.add_parser(
        "forget",
        help="record an operator's manual fix of one owed entry",
        description="Record that an operator fixed an owed entry's target by hand (say, "
        "powered a node on at its front panel): the entry owes nothing from then on and "
        "the reason is kept in the journal. Refused while another powercut process holds "
        "the journal.",
    )
    forget.add_argument("entry", metavar="ID", help="the entry id (`powercut journal` lists them)")
    forget.add_argument(
        "--reason", required=True, help="what was fixed by hand, by whom (kept in the journal)"
    )
    _where(forget, argparse.SUPPRESS)
    journal.set_defaults(func=cmd_journal, inventory=None, journal=None)


def _where(p: argparse.ArgumentParser, default: object) -> None:
    p.add_argument("--inventory", "-i", type=Path, default=default, help="inventory YAML")
    p.add_argument(
        "--journal", type=Path, default=default, help="journal file (default: the inventory's)"
    )


def _path(args: argparse.Namespace) -> Path:
    if args.journal is not None:
        return Path(args.journal)
    if args.inventory is None:
        raise ConfigError("give the inventory (-i FILE) or the journal (--journal FILE)")
    return journal_path_for(load_inventory(args.inventory), attached(args))


def _at(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _by(entry: JournalEntry) -> str:
    if entry.by is None:
        return "unknown (an older journal)"
    if entry.pid is None:
        return f"{entry.by} (another machine)"
    return f"{entry.by} ({'alive' if run_alive(entry.pid, entry.proc) else 'gone'})"


def describe(entry: JournalEntry) -> list[str]:
    """The lines ``powercut journal`` prints for one entry."""
    lines = [
        f"{entry.id}  {entry.action} {entry.target}  [{entry.state}]  since "
        f"{_at(entry.started_at)}",
        f"    by:   {_by(entry)}",
    ]
    if entry.owes_undo:
        why = _WHY.get(str(entry.state), str(entry.state))
        lines.append(f"    owes: {entry.undo}")
        lines.append(f"    why:  {why}" + (f": {entry.error}" if entry.error else ""))
        if entry.undo_error:
            lines.append(
                f"    last undo attempt failed ({entry.undo_attempts}x): {entry.undo_error}"
            )
    elif str(entry.state) == "not-done":
        lines.append(f"    owes nothing: it failed before it acted: {entry.error}")
    elif str(entry.state) == "forgotten":
        lines.append(f"    owes nothing: forgotten {_at(entry.undone_at)}: {entry.note}")
    else:
        how = f": {entry.note}" if entry.note else ""
        lines.append(f"    owes nothing: undone {_at(entry.undone_at)}{how}")
    return lines


def cmd_journal(args: argparse.Namespace) -> int:
    path = _path(args)
    if args.journal_command == "forget":
        if not path.exists():
            raise PermanentError(f"no journal at {path}: nothing to forget")
        with Journal(path) as journal:
            entry = journal.forget(args.entry, args.reason)
        print(f"forgotten: {entry.id} {entry.action} {entry.target}: {entry.note}")
        return 0
    if not path.exists():
        print(f"no journal at {path}: nothing owed")
        return 0
    entries = Journal.read(path)  # (notes, such as fencing overrides, are listed after)
    owed = [e for e in entries if e.owes_undo]
    print(f"journal {path}: {len(owed)} owed of {len(entries)} entries")
    for entry in reversed(entries if args.all else owed):
        for line in describe(entry):
            print(line)
    for note in Journal.read_notes(path):
        print(f"note {_at(note.at)}  {note.action} {note.target}  by {note.by}: {note.detail}")
    if owed:
        print(
            "undo them: powercut recover -i INVENTORY; or after a manual fix: powercut journal "
            "forget ID --reason TEXT"
        )
    return 0
