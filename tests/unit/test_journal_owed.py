"""What the journal owes: nothing for an action that failed before it acted, nothing once the
target reads restored or an operator forgot the entry; who began each entry, and whether
that process is alive (a zombie is not)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.errors import PermanentError, TemporaryError, not_acted
from harness.inventory import load_inventory
from harness.journal import (
    EntryState,
    Journal,
    UndoSpec,
    UndoStack,
    process_alive,
    process_identity,
    recover,
    run_alive,
)
from harness.kube.actions import OUT_OF_SERVICE_KEY
from harness.kube.lock import ClusterLock
from harness.power.base import PowerState
from harness.session import journal_path_for
from tests.fakes.api import FakeApiServer, node
from tests.fakes.power import FakeBmcs, write_inventory

pytestmark = pytest.mark.filterwarnings("ignore:.cgi. is deprecated:DeprecationWarning")


class NoteExecutor:
    """Undos that report their target already restored (a note) or act (None)."""

    def __init__(self, restored: set[str]) -> None:
        self.restored = restored
        self.acted: list[str] = []

    def _do(self, what: str) -> str | None:
        if what in self.restored:
            return f"{what} already restored"
        self.acted.append(what)
        return None

    def power_on(self, node: str) -> str | None:
        return self._do(f"power_on {node}")

    def uncordon(self, node: str) -> str | None:
        return self._do(f"uncordon {node}")

    def remove_taint(self, node: str, key: str, effect: str) -> str | None:
        return self._do(f"remove_taint {node}")

    def restore_node(self, node: str, manifest: dict[str, Any]) -> str | None:
        return self._do(f"restore_node {node}")


# -- the journal -------------------------------------------------------------------------------


def test_an_action_that_raised_before_it_acted_is_not_done_and_owes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path) as journal:
        with (
            pytest.raises(PermanentError),
            journal.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")),
        ):
            raise not_acted(PermanentError("w1: Redfish refused the credentials (HTTP 401)"))
        with (
            pytest.raises(TemporaryError),
            journal.disruption("power_off", "node/w2", undo=UndoSpec.power_on("w2")),
        ):
            raise TemporaryError("w2: read-back timed out")  # may have half-happened
        assert [e.target for e in journal.pending_undos()] == ["node/w2"]
    w1, w2 = Journal.read(path)  # and so it stays on disk
    assert w1.state is EntryState.NOT_DONE and not w1.owes_undo
    assert w1.error is not None and "HTTP 401" in w1.error
    assert w2.state is EntryState.FAILED and w2.owes_undo


def test_the_undo_stack_drops_the_undo_of_an_action_that_did_not_act(tmp_path: Path) -> None:
    executor = NoteExecutor(set())
    with Journal(tmp_path / "j.jsonl") as journal:
        stack = UndoStack(journal, executor)
        with (
            pytest.raises(PermanentError),
            stack.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")),
        ):
            raise not_acted(PermanentError("refused"))
        with stack.disruption("cordon", "node/w2", undo=UndoSpec.uncordon("w2")):
            pass
        assert len(stack) == 1
        stack.run()
    assert executor.acted == ["uncordon w2"]


def test_an_undo_whose_target_reads_restored_is_settled_with_its_note(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path) as journal:
        for n in ("w1", "w2"):
            with journal.disruption("power_off", f"node/{n}", undo=UndoSpec.power_on(n)):
                pass
        results = recover(journal, NoteExecutor({"power_on w1"}))
    assert [(r.ok, r.note) for r in results] == [
        (True, None),
        (True, "power_on w1 already restored"),
    ]
    entries = {e.target: e for e in Journal.read(path)}
    assert entries["node/w1"].state is EntryState.UNDONE
    assert entries["node/w1"].note == "power_on w1 already restored"
    assert entries["node/w2"].note is None


def test_forget_records_the_operators_reason_and_refuses_what_is_not_owed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path) as journal:
        with journal.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")) as entry:
            pass
        with pytest.raises(PermanentError, match="needs a reason"):
            journal.forget(entry.id, "  ")
        forgotten = journal.forget(entry.id, "powered on at the front panel by ops (J. Doe)")
        assert forgotten.state is EntryState.FORGOTTEN
        with pytest.raises(PermanentError, match=r"owes nothing \(it is forgotten\)"):
            journal.forget(entry.id, "again")
        with pytest.raises(PermanentError, match="has no entry 'nope'"):
            journal.forget("nope", "typo")
        journal.mark_undone(entry.id)  # a later power-on: a no-op, not an error
    (entry,) = Journal.read(path)
    assert entry.state is EntryState.FORGOTTEN and not entry.owes_undo
    assert entry.note == "powered on at the front panel by ops (J. Doe)"


def test_each_entry_names_the_process_that_began_it(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.jsonl") as journal:
        entry = journal.begin("cordon", "node/w1", UndoSpec.uncordon("w1"))
    (read,) = Journal.read(tmp_path / "j.jsonl")
    assert entry.by == read.by == f"{socket.gethostname()}/pid-{os.getpid()}"
    assert read.pid == os.getpid()
    assert read.proc is not None and read.proc == process_identity(os.getpid())
    assert run_alive(os.getpid(), read.proc)


# -- alive or gone -----------------------------------------------------------------------------


def exited(child: subprocess.Popen[bytes]) -> None:
    """Return once ``child`` has exited, leaving it unreaped (a zombie): waited for by the
    kernel (waitid with WNOWAIT), not polled."""
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)


def test_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # not reaped until wait()
    try:
        exited(child)
        stat = Path(f"/proc/{child.pid}/stat").read_text()
        assert stat.rpartition(")")[2].split()[0] == "Z"  # it is a zombie, and
        assert not process_alive(child.pid)  # a zombie is gone
        os.kill(child.pid, 0)  # although a signal 0 still reaches it
    finally:
        child.wait()
    assert not process_alive(child.pid)
    assert process_alive(os.getpid())


def test_a_reused_pid_is_not_the_run_that_wrote_the_entry() -> None:
    me = process_identity(os.getpid())
    assert me is not None
    boot, _, start = me.rpartition(":")
    assert run_alive(os.getpid(), me)
    assert not run_alive(os.getpid(), f"{boot}:{int(start) + 1}")  # another process, same pid
    assert not run_alive(os.getpid(), f"another-boot:{start}")
    assert run_alive(os.getpid(), None)  # an older journal: the pid alone decides


# -- `powercut recover`: judged once ---------------------------------------------------------


def crashed_run(path: Path, pid: int, proc: str | None) -> None:
    """A journal written by process ``pid`` that stopped with w1 off and cordoned."""
    with Journal(path) as journal:
        journal.by = f"{socket.gethostname()}/pid-{pid}"
        journal.proc = proc
        with journal.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")):
            pass
        with journal.disruption("cordon", "node/w1", undo=UndoSpec.uncordon("w1")):
            pass


def lease(api: FakeApiServer, holder: str) -> None:
    api.add(
        "leases",
        {
            "metadata": {"name": "powercut-lock", "namespace": "kube-system"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60},
        },
    )


def test_recover_undoes_a_zombie_runs_journal_and_releases_its_lock_in_one_go(
    tmp_path: Path,
    api: FakeApiServer,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    inventory = write_inventory(tmp_path, api.url)
    path = journal_path_for(load_inventory(inventory))
    api.add("nodes", node("w1"))
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        exited(zombie)
        crashed_run(path, zombie.pid, None)
        bmcs.power["w1"] = PowerState.OFF
        lease(api, f"{socket.gethostname()}/pid-{zombie.pid}/abcd1234")

        assert main(["recover", "-i", str(inventory)]) == 0
    finally:
        zombie.wait()
    out, err = capsys.readouterr()
    assert "recovering 2 disruption(s)" in out
    assert f"released the cluster lock of a run that is gone ({socket.gethostname()}" in out
    assert api.get("leases", "kube-system", "powercut-lock") is None
    assert bmcs.power["w1"] is PowerState.ON
    assert [e for e in Journal.read(path) if e.owes_undo] == []
    assert err == ""


def test_recover_leaves_a_live_runs_undos_and_lock_to_it(
    tmp_path: Path,
    api: FakeApiServer,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    inventory = write_inventory(tmp_path, api.url)
    path = journal_path_for(load_inventory(inventory))
    api.add("nodes", node("w1"))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        crashed_run(path, sleeper.pid, process_identity(sleeper.pid))
        bmcs.power["w1"] = PowerState.OFF
        lease(api, f"{socket.gethostname()}/pid-{sleeper.pid}/abcd1234")
        assert main(["recover", "-i", str(inventory)]) == 4
    finally:
        sleeper.kill()
        sleeper.wait()
    out, err = capsys.readouterr()
    assert f"left to the run(s) still alive (pid {sleeper.pid}): 2 disruption(s)" in out
    assert "a run that is still alive owes undos" in err
    assert bmcs.ops("on") == [] and bmcs.power["w1"] is PowerState.OFF
    assert api.get("leases", "kube-system", "powercut-lock") is not None
    assert len([e for e in Journal.read(path) if e.owes_undo]) == 2


def test_break_stale_releases_a_zombies_lock(api: FakeApiServer) -> None:
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        exited(zombie)
        holder = f"{socket.gethostname()}/pid-{zombie.pid}/abcd1234"
        lease(api, holder)
        assert ClusterLock.break_stale(api.client()) == holder
    finally:
        zombie.wait()


def test_recover_settles_a_power_on_whose_node_reads_on(
    tmp_path: Path,
    api: FakeApiServer,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    inventory = write_inventory(tmp_path, api.url)
    path = journal_path_for(load_inventory(inventory))
    api.add("nodes", node("w1", taints=[]))
    with Journal(path) as journal:
        with journal.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")):
            pass
        undo = UndoSpec.remove_taint("w1", OUT_OF_SERVICE_KEY, "NoExecute")
        with journal.disruption("out_of_service", "node/w1", undo=undo):
            pass
    assert main(["recover", "-i", str(inventory)]) == 0
    out, _ = capsys.readouterr()
    assert "settled (" in out and "already on, read through ipmi" in out
    assert f"taint {OUT_OF_SERVICE_KEY}:NoExecute already gone" in out
    assert bmcs.ops("on") == []
    assert {e.note for e in Journal.read(path)} == {
        "already on, read through ipmi",
        f"taint {OUT_OF_SERVICE_KEY}:NoExecute already gone",
    }


# -- `powercut journal` -------------------------------------------------------------------------


def test_powercut_journal_lists_what_is_owed_by_whom_and_why_and_forget_settles_it(
    tmp_path: Path, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = write_inventory(tmp_path, "http://127.0.0.1:9")
    path = journal_path_for(load_inventory(inventory))
    with Journal(path) as journal:
        with (
            pytest.raises(TemporaryError),
            journal.disruption("power_off", "node/w1", undo=UndoSpec.power_on("w1")),
        ):
            raise TemporaryError("w1: read-back timed out")
        with journal.disruption("cordon", "node/w2", undo=UndoSpec.uncordon("w2")) as cordon:
            pass
        journal.mark_undone(cordon.id)
        failed = journal.pending_undos()[0]
        journal.mark_undo_failed(failed.id, "PermanentError: w1: IPMI refused the credentials")

    assert main(["journal", "-i", str(inventory)]) == 0
    out = capsys.readouterr().out
    assert f"journal {path}: 1 owed of 2 entries" in out
    assert f"{failed.id}  power_off node/w1  [failed]" in out
    assert f"by:   {socket.gethostname()}/pid-{os.getpid()} (alive)" in out
    assert "owes: power_on(node='w1')" in out
    assert (
        "why:  the action raised and may have half-happened: TemporaryError: w1: read-back" in out
    )
    assert "last undo attempt failed (1x): PermanentError: w1: IPMI refused" in out
    assert "cordon" not in out  # settled entries only with --all

    assert (
        main(
            ["journal", "forget", failed.id, "--reason", "ops powered w1 on", "-i", str(inventory)]
        )
        == 0
    )
    assert f"forgotten: {failed.id} power_off node/w1: ops powered w1 on" in capsys.readouterr().out
    assert main(["journal", "--all", "--journal", str(path)]) == 0
    out = capsys.readouterr().out
    assert "0 owed of 2 entries" in out
    assert "owes nothing: forgotten" in out and "ops powered w1 on" in out
    assert "owes nothing: undone" in out

    assert main(["journal", "forget", failed.id, "--reason", "again", "-i", str(inventory)]) == 2
    assert "owes nothing (it is forgotten)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["journal", "forget", failed.id, "-i", str(inventory)])  # no --reason
    assert exited.value.code == 2
    assert "required: --reason" in capsys.readouterr().err


def test_recover_waits_out_a_power_action_that_a_bmc_may_still_apply(
    tmp_path: Path,
    bmcs: FakeBmcs,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    inventory = write_inventory(tmp_path, "http://127.0.0.1:9")
    path = journal_path_for(load_inventory(inventory))
    with Journal(path) as journal:  # killed in the middle of a power-off, just now
        journal.begin("power_off", "node/w1", UndoSpec.power_on("w1"))
    slept: list[float] = []
    monkeypatch.setattr("harness.cli.power.time.sleep", slept.append)
    main(["recover", "-i", str(inventory)])
    out = capsys.readouterr().out
    assert "a power action on w1 began less than one power deadline ago" in out
    assert len(slept) == 1 and 25 < slept[0] <= 30  # the fast profile's deadline: 30 s
    assert "settled (" in out and "already on, read through ipmi" in out  # read afterwards
