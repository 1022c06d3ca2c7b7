"""The disruption journal, recovery and the in-process undo stack."""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.errors import PermanentError
from harness.journal import (
    EntryState,
    Journal,
    Terminated,
    UndoExecutor,
    UndoFailed,
    UndoSpec,
    UndoStack,
    install_signal_handlers,
    recover,
)
from tests.fakes.clock import FakeClock


class FakeExecutor:
    """Records undo calls; ``fail`` makes the named (action, node) raise once or always."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: dict[tuple[str, str], Exception] = {}
        self.on_call: Callable[[], None] | None = None

    def _do(self, action: str, **args: Any) -> None:
        self.calls.append((action, args))
        if self.on_call is not None:
            self.on_call()
        error = self.fail.get((action, args["node"]))
        if error is not None:
            raise error

    def power_on(self, node: str) -> None:
        self._do("power_on", node=node)

    def uncordon(self, node: str) -> None:
        self._do("uncordon", node=node)

    def remove_taint(self, node: str, key: str, effect: str) -> None:
        self._do("remove_taint", node=node, key=key, effect=effect)

    def restore_node(self, node: str, manifest: dict[str, Any]) -> None:
        self._do("restore_node", node=node, manifest=manifest)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1_700_000_000.0)


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "run" / "journal.jsonl"


@pytest.fixture
def journal(journal_path: Path, clock: FakeClock) -> Iterator[Journal]:
    ids = (f"e{i}" for i in itertools.count(1))
    with Journal(journal_path, clock=clock, new_id=lambda: next(ids)) as j:
        yield j


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_executor_satisfies_the_protocol() -> None:
    assert isinstance(FakeExecutor(), UndoExecutor)


# -- journal ----------------------------------------------------------------------------------


def test_undo_is_on_disk_and_fsynced_before_the_action(
    journal: Journal, journal_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        events.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr("harness.journal.store.os.fsync", fsync)
    with journal.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")) as entry:
        events.append("act")
        on_disk = records(journal_path)
        assert on_disk[-1]["op"] == "begin"
        assert on_disk[-1]["undo"] == {"action": "power_on", "args": {"node": "w1"}}
        assert entry.state is EntryState.PENDING
    assert events[:2] == ["fsync", "act"]
    assert events[-1] == "fsync"  # the done mark is durable too
    assert journal.get(entry.id).state is EntryState.DONE


def test_entry_fields_and_timestamps(journal: Journal, clock: FakeClock) -> None:
    with journal.disruption("cordon", "node/w2", undo=UndoSpec.uncordon("w2")) as entry:
        clock.advance(2.5)
    stored = journal.get(entry.id)
    assert (stored.id, stored.action, stored.target) == ("e1", "cordon", "node/w2")
    assert stored.undo == UndoSpec.uncordon("w2")
    assert stored.started_at == 1_700_000_000.0
    assert stored.duration_s == 2.5
    assert stored.undone_at is None
    assert stored.owes_undo
    journal.mark_undone(entry.id)
    assert journal.get(entry.id).undone_at == clock.now
    assert not journal.get(entry.id).owes_undo


def test_failed_action_is_marked_failed_and_still_owes_its_undo(journal: Journal) -> None:
    with (
        pytest.raises(TimeoutError),
        journal.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")),
    ):
        raise TimeoutError("BMC did not report Off")
    (entry,) = journal.pending_undos()
    assert entry.state is EntryState.FAILED
    assert entry.error == "TimeoutError: BMC did not report Off"


def test_pending_undos_newest_first_and_mark_undone(journal: Journal) -> None:
    for node in ("w1", "w2", "w3"):
        with journal.disruption("power_off", f"node/{node}", undo=UndoSpec.power_on(node)):
            pass
    assert [e.target for e in journal.pending_undos()] == ["node/w3", "node/w2", "node/w1"]
    journal.mark_undone("e2")
    journal.mark_undone("e2")  # idempotent
    assert [e.id for e in journal.pending_undos()] == ["e3", "e1"]
    with pytest.raises(PermanentError, match="already undone"):
        journal.mark_done("e2")
    with pytest.raises(PermanentError, match="no entry 'nope'"):
        journal.mark_undone("nope")


def test_journal_reloads_from_disk(journal_path: Path, clock: FakeClock) -> None:
    with Journal(journal_path, clock=clock) as first:
        with first.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")):
            pass
        with first.disruption(
            "taint", "node/w1", undo=UndoSpec.remove_taint("w1", "k", "NoExecute")
        ):
            pass
        first.mark_undone(first.entries()[0].id)
        first.mark_undo_failed(first.entries()[1].id, "ConnectionError: refused")
    with Journal(journal_path) as second:
        entries = second.entries()
    assert [e.state for e in entries] == [EntryState.UNDONE, EntryState.DONE]
    assert entries[1].undo == UndoSpec.remove_taint("w1", "k", "NoExecute")
    assert entries[1].undo_attempts == 1
    assert entries[1].undo_error == "ConnectionError: refused"
    assert Journal.read(journal_path) == entries


def test_records_are_readable_json_lines(journal: Journal, journal_path: Path) -> None:
    with journal.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")):
        pass
    begin, done = records(journal_path)
    assert begin["at"] == "2023-11-14T22:13:20.000+00:00"
    assert done == {
        "op": "state",
        "id": "e1",
        "state": "done",
        "ts": 1_700_000_000.0,
        "at": "2023-11-14T22:13:20.000+00:00",
    }


def test_a_crash_mid_write_leaves_a_loadable_journal(
    journal_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Journal(journal_path) as first:
        with first.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")):
            pass
        with first.disruption("power_off", "node/w2", undo=UndoSpec.power_on("w2")):
            pass
    full = journal_path.read_bytes()
    partial = b'{"op":"state","id":"abc","sta'
    journal_path.write_bytes(full + partial)

    assert len(Journal.read(journal_path)) == 2  # read-only load ignores the torn line
    with caplog.at_level(logging.WARNING), Journal(journal_path) as reopened:
        assert len(reopened.pending_undos()) == 2
        assert journal_path.read_bytes() == full  # the torn line was trimmed
        with reopened.disruption("cordon", "node/w3", undo=UndoSpec.uncordon("w3")):
            pass
    assert "incomplete last line" in caplog.text
    assert [r["op"] for r in records(journal_path)] == ["begin", "state"] * 3


def test_a_complete_but_unterminated_last_record_is_dropped(journal_path: Path) -> None:
    # fsync never returned for it, so the action never started
    line = {
        "op": "begin",
        "id": "x",
        "action": "power_off",
        "target": "node/w1",
        "undo": {"action": "power_on", "args": {"node": "w1"}},
        "ts": 1.0,
    }
    journal_path.parent.mkdir(parents=True)
    journal_path.write_text(json.dumps(line), encoding="utf-8")
    assert Journal.read(journal_path) == []


def test_damage_before_the_last_line_is_an_error(journal_path: Path) -> None:
    with (
        Journal(journal_path) as first,
        first.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")),
    ):
        pass
    lines = journal_path.read_text(encoding="utf-8").splitlines()
    journal_path.write_text(lines[0] + "\n{garbage\n" + lines[1] + "\n", encoding="utf-8")
    with pytest.raises(PermanentError, match=r"journal .* line 2 is damaged"):
        Journal(journal_path)


def test_one_writer_at_a_time(journal: Journal, journal_path: Path) -> None:
    with pytest.raises(PermanentError, match="in use by another powercut process"):
        Journal(journal_path)
    journal.close()
    Journal(journal_path).close()  # the lock went with the first writer


def test_closed_journal_refuses_writes(journal: Journal) -> None:
    journal.close()
    with pytest.raises(PermanentError, match="closed"):
        journal.begin("power_off", "node/w1", UndoSpec.power_on("w1"))


def test_undo_spec_validation() -> None:
    with pytest.raises(PermanentError, match="unknown undo action 'poweron'; must be one of"):
        UndoSpec("poweron", {"node": "w1"})
    with pytest.raises(PermanentError, match="not JSON-serialisable"):
        UndoSpec("power_on", {"node": object()})
    manifest = {"metadata": {"name": "w1"}}
    assert str(UndoSpec.restore_node("w1", manifest)) == "restore_node(node='w1')"


# -- recover ----------------------------------------------------------------------------------


def test_recover_runs_pending_undos_newest_first_then_does_nothing(
    journal_path: Path, journal: Journal
) -> None:
    with journal.disruption("cordon", "node/w1", undo=UndoSpec.uncordon("w1")):
        pass
    with journal.disruption(
        "taint",
        "node/w1",
        undo=UndoSpec.remove_taint("w1", "node.kubernetes.io/out-of-service", "NoExecute"),
    ):
        pass
    with journal.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")):
        pass
    journal.mark_undone("e1")  # the run managed to uncordon before it died
    journal.close()

    executor = FakeExecutor()
    with Journal(journal_path) as reopened:
        results = recover(reopened, executor)
        assert executor.calls == [
            ("power_on", {"node": "w1"}),
            (
                "remove_taint",
                {"node": "w1", "key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"},
            ),
        ]
        assert [r.ok for r in results] == [True, True]
        assert results[0].description == "power_on(node='w1') (undoes power_off node/w1)"
        assert reopened.pending_undos() == []
        assert recover(reopened, executor) == []  # idempotent
    with Journal(journal_path) as again:
        assert recover(again, executor) == []
    assert len(executor.calls) == 2


def test_recover_powers_on_first_then_undoes_the_rest_newest_first(
    journal: Journal, clock: FakeClock
) -> None:
    """A node is powered on before it is uncordoned or untainted, and no power-on waits
    behind an API call (the API may be down until the control-plane nodes are back)."""
    undos = [
        ("cordon", "w1", UndoSpec.uncordon("w1")),
        ("power_off", "w1", UndoSpec.power_on("w1")),
        ("out_of_service", "w1", UndoSpec.remove_taint("w1", "k", "NoExecute")),
        ("delete_node", "w2", UndoSpec.restore_node("w2", {"metadata": {"name": "w2"}})),
        ("power_off", "cp1", UndoSpec.power_on("cp1")),
    ]
    for action, node, undo in undos:
        with journal.disruption(action, f"node/{node}", undo=undo):
            pass
    executor = FakeExecutor()
    executor.on_call = lambda: clock.advance(2.5)  # recover times each undo on its clock
    seen: list[tuple[str, bool]] = []
    results = recover(
        journal, executor, on_result=lambda r: seen.append((r.description, r.ok)), clock=clock
    )
    assert [(action, args["node"]) for action, args in executor.calls] == [
        ("power_on", "cp1"),
        ("power_on", "w1"),
        ("restore_node", "w2"),
        ("remove_taint", "w1"),
        ("uncordon", "w1"),
    ]
    assert seen == [(r.description, r.ok) for r in results]  # reported as each one finished
    assert [r.seconds for r in results] == [2.5] * 5


def test_recover_reports_each_result_as_it_finishes(journal: Journal) -> None:
    for node in ("w1", "w2"):
        with journal.disruption("power_off", f"node/{node}", undo=UndoSpec.power_on(node)):
            pass
    executor = FakeExecutor()
    executor.fail[("power_on", "w2")] = ConnectionError("BMC unreachable")
    seen: list[str] = []
    executor.on_call = lambda: seen.append(f"call {len(executor.calls)}")
    recover(journal, executor, on_result=lambda r: seen.append(f"result {r.ok}"))
    assert seen == ["call 1", "result False", "call 2", "result True"]


def test_recover_continues_after_a_failed_undo(journal: Journal) -> None:
    for node in ("w1", "w2"):
        with journal.disruption("power_off", f"node/{node}", undo=UndoSpec.power_on(node)):
            pass
    executor = FakeExecutor()
    executor.fail[("power_on", "w2")] = ConnectionError("BMC unreachable")
    results = recover(journal, executor)
    assert [(r.entry_id, r.ok) for r in results] == [("e2", False), ("e1", True)]
    assert results[0].error == "ConnectionError: BMC unreachable"
    (left,) = journal.pending_undos()
    assert left.id == "e2"
    assert left.undo_attempts == 1
    executor.fail.clear()
    assert [r.ok for r in recover(journal, executor)] == [True]
    assert journal.pending_undos() == []


def test_recover_undoes_actions_that_failed_halfway(journal: Journal) -> None:
    with (
        pytest.raises(TimeoutError),
        journal.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")),
    ):
        raise TimeoutError
    executor = FakeExecutor()
    assert [r.ok for r in recover(journal, executor)] == [True]
    assert executor.calls == [("power_on", {"node": "w1"})]


def test_recover_with_an_executor_that_lacks_the_action(journal: Journal) -> None:
    class PowerOnly:
        def power_on(self, node: str) -> None:
            pass

    with journal.disruption("cordon", "node/w1", undo=UndoSpec.uncordon("w1")):
        pass
    (result,) = recover(journal, PowerOnly())  # type: ignore[arg-type]
    assert not result.ok
    assert result.error == "PermanentError: the undo executor cannot uncordon"


# -- UndoStack --------------------------------------------------------------------------------


def test_undo_stack_runs_newest_first_on_normal_exit() -> None:
    done: list[str] = []
    with UndoStack() as stack:
        stack.push("first", lambda: done.append("first"))
        stack.push("second", lambda: done.append("second"))
    assert done == ["second", "first"]
    assert len(stack) == 0


def test_undo_stack_runs_on_failure_and_keeps_the_error() -> None:
    done: list[str] = []
    with pytest.raises(AssertionError, match="pod not rescheduled"), UndoStack() as stack:
        stack.push("power on w1", lambda: done.append("w1"))
        raise AssertionError("pod not rescheduled")
    assert done == ["w1"]


def test_keep_on_failure_leaves_the_disruption_and_the_journal_entry(
    journal: Journal, caplog: pytest.LogCaptureFixture
) -> None:
    executor = FakeExecutor()
    with (
        pytest.raises(AssertionError),
        UndoStack(journal, executor, keep_on_failure=True) as stack,
    ):
        with stack.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")):
            pass
        raise AssertionError("check failed")
    assert executor.calls == []
    assert stack.kept == ["power_on(node='w1') (undoes power_off node/w1)"]
    assert [e.id for e in journal.pending_undos()] == ["e1"]
    assert "keep-on-failure" in caplog.text
    assert "powercut recover" in caplog.text


def test_keep_on_failure_still_undoes_on_interrupt(journal: Journal) -> None:
    executor = FakeExecutor()
    with (
        pytest.raises(KeyboardInterrupt),
        UndoStack(journal, executor, keep_on_failure=True) as stack,
    ):
        with stack.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")):
            pass
        raise KeyboardInterrupt
    assert executor.calls == [("power_on", {"node": "w1"})]
    assert journal.pending_undos() == []


def test_keep_on_failure_does_nothing_on_success() -> None:
    done: list[str] = []
    with UndoStack(keep_on_failure=True) as stack:
        stack.push("x", lambda: done.append("x"))
    assert done == ["x"]


def test_stack_disruption_registers_the_undo_before_acting(journal: Journal) -> None:
    executor = FakeExecutor()
    with (
        pytest.raises(TimeoutError),
        UndoStack(journal, executor) as stack,
        stack.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")),
    ):
        assert len(stack) == 1
        raise TimeoutError("read-back timed out")  # the node may be off: undo anyway
    assert executor.calls == [("power_on", {"node": "w1"})]
    assert journal.get("e1").state is EntryState.UNDONE


def test_stack_disruption_needs_journal_and_executor() -> None:
    with (
        pytest.raises(PermanentError, match="needs a journal and an executor"),
        UndoStack().disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")),
    ):
        pass


def test_undo_failures_raise_after_a_passing_body(journal: Journal) -> None:
    executor = FakeExecutor()
    executor.fail[("uncordon", "w1")] = RuntimeError("API down")
    with pytest.raises(UndoFailed) as info, UndoStack(journal, executor) as stack:
        with stack.disruption("cordon", "node/w1", undo=UndoSpec.uncordon("w1")):
            pass
        with stack.disruption("power_off", "node/w2", undo=UndoSpec.power_on("w2")):
            pass
    assert "1 of 2 undos failed" in str(info.value)
    assert "RuntimeError: API down" in str(info.value)
    assert [r.ok for r in info.value.results] == [True, False]
    assert [e.id for e in journal.pending_undos()] == ["e1"]


def test_undo_failures_become_notes_on_a_failing_body() -> None:
    def broken() -> None:
        raise RuntimeError("BMC refused")

    with pytest.raises(AssertionError) as info, UndoStack() as stack:
        stack.push("power on w1", broken)
        raise AssertionError("check failed")
    assert info.value.__notes__ == ["undo failed: power on w1: RuntimeError: BMC refused"]


# -- signals ----------------------------------------------------------------------------------


@pytest.fixture
def sigterm_handlers() -> Iterator[None]:
    before = signal.getsignal(signal.SIGTERM)
    restore = install_signal_handlers()
    try:
        yield
    finally:
        restore()
        assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.usefixtures("sigterm_handlers")
def test_sigterm_unwinds_and_undoes(journal: Journal) -> None:
    executor = FakeExecutor()
    with pytest.raises(Terminated) as info, UndoStack(journal, executor) as stack:
        with stack.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")):
            pass
        signal.raise_signal(signal.SIGTERM)
        pytest.fail("SIGTERM did not interrupt")  # pragma: no cover
    assert isinstance(info.value, KeyboardInterrupt)
    assert info.value.signum == signal.SIGTERM
    assert executor.calls == [("power_on", {"node": "w1"})]
    assert journal.pending_undos() == []


@pytest.mark.usefixtures("sigterm_handlers")
def test_sigterm_during_undo_is_deferred_until_the_undos_ran(journal: Journal) -> None:
    executor = FakeExecutor()
    executor.on_call = lambda: (
        signal.raise_signal(signal.SIGTERM) if len(executor.calls) == 1 else None
    )
    stack = UndoStack(journal, executor)
    with pytest.raises(Terminated), stack:
        for node in ("w1", "w2"):
            with stack.disruption("power_off", f"node/{node}", undo=UndoSpec.power_on(node)):
                pass
    assert [args["node"] for _, args in executor.calls] == ["w2", "w1"]
    assert journal.pending_undos() == []


def test_signal_handlers_only_from_the_main_thread() -> None:
    import threading

    errors: list[BaseException] = []

    def worker() -> None:
        try:
            install_signal_handlers()
        except PermanentError as exc:
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert "main thread" in str(errors[0])
