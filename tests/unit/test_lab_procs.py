"""The lab signals only its own processes: a recorded PID is checked against its identity."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.lab.procs import (
    group_is_ours,
    process_identity,
    recorded_alive,
    write_identity,
)


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )


def test_a_recorded_process_is_recognised_while_it_runs(tmp_path: Path) -> None:
    p = _sleeper()
    rec = tmp_path / "pid"
    try:
        write_identity(rec, p.pid)
        assert recorded_alive(rec) == p.pid
        assert group_is_ours(rec) == p.pid
    finally:
        p.kill()
        p.wait()
    assert recorded_alive(rec) is None
    # The leader is gone and nobody holds its PID: the group (if any member lived) is ours.
    assert group_is_ours(rec) == p.pid


def test_a_reused_pid_is_never_taken_for_ours(tmp_path: Path) -> None:
    p = _sleeper()
    rec = tmp_path / "pid"
    try:
        boot, pid, start = process_identity(p.pid).split(":")
        # Same PID, another start time: the number was handed to a different process.
        rec.write_text(f"{boot}:{pid}:{int(start) - 1}\n")
        assert recorded_alive(rec) is None
        assert group_is_ours(rec) is None
        # A record from another boot is stale whatever the PID holds now.
        rec.write_text(f"another-boot:{pid}:{start}\n")
        assert recorded_alive(rec) is None
        assert group_is_ours(rec) is None
    finally:
        p.kill()
        p.wait()


def test_missing_or_garbled_records_are_not_alive(tmp_path: Path) -> None:
    assert recorded_alive(tmp_path / "absent") is None
    (tmp_path / "old").write_text("12345\n")  # the old format: a bare PID proves nothing
    assert recorded_alive(tmp_path / "old") is None
    assert group_is_ours(tmp_path / "old") is None


def test_identity_survives_a_command_name_with_spaces_and_parentheses(tmp_path: Path) -> None:
    exe = tmp_path / "odd (name) x"
    exe.symlink_to(sys.executable)
    p = subprocess.Popen([str(exe), "-c", "import time; time.sleep(60)"])
    try:
        ident = process_identity(p.pid)
        assert not ident.endswith(":?"), ident
        write_identity(tmp_path / "rec", p.pid)
        assert recorded_alive(tmp_path / "rec") == p.pid
    finally:
        p.kill()
        p.wait()
