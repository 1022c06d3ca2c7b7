"""A process killed in the middle of a failure, for the kill-and-recover tests of the lab and
of kind: a child opens a session, inflicts a failure kind on one node, says so, and is then
SIGKILLed, so that nothing of its own can undo what it did; the journal alone still owes it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def inflict_then_sigkill(
    inventory: Path, node: str, kind: str, env: dict[str, str], *, undo_after_s: float = 600
) -> None:
    """Inflict ``kind`` (a :class:`harness.failures.FailureKind` member's name) on ``node``
    in a child process, wait for it to say it has, and SIGKILL it."""
    script = textwrap.dedent(
        f"""
        import time
        from harness.failures import FailureKind, inflict
        from harness.inventory import load_inventory
        from harness.session import Session
        with Session(load_inventory({str(inventory)!r})) as s:
            inflict(s, [{node!r}], FailureKind.{kind}, undo_after_s={undo_after_s!r})
            print("INFLICTED", flush=True)
            time.sleep({undo_after_s!r})
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "INFLICTED", line
        proc.kill()
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def recover(powercut: list[str], inventory: Path, env: dict[str, str]) -> str:
    """``powercut recover -i INVENTORY``, which must succeed; its output."""
    out = subprocess.run(
        [*powercut, "recover", "-i", str(inventory)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout
