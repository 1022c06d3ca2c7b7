"""Child processes of the lab supervisor: start, stop by PID, never anyone else's."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
from pathlib import Path

from harness.journal.liveness import boot_id, process_alive, start_ticks


class Proc:
    """One child process with its own log file; restartable (power on after power off)."""

    def __init__(
        self, name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None
    ):
        self.name = name
        self.argv = argv
        self.log_path = log_dir / f"{name}.log"
        self.env = env
        self._p: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._p.pid if self._p else None

    def alive(self) -> bool:
        return self._p is not None and self._p.poll() is None

    def start(self) -> None:
        with self._lock:
            if self.alive():
                return
            with self.log_path.open("ab") as log:
                self._p = subprocess.Popen(
                    self.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self.env,
                )

    def kill(self) -> None:
        """SIGKILL now, without waiting for the exit (:meth:`stop` reaps it): from here on
        the process runs no more code, as a machine whose power was cut."""
        with self._lock:
            p = self._p
            if p is not None and p.poll() is None:
                p.kill()

    def stop(self, *, force: bool = False, timeout_s: float = 10.0) -> None:
        """SIGTERM (or SIGKILL when forced), then SIGKILL after the timeout; always reaped."""
        with self._lock:
            p = self._p
            if p is None:
                return
            if p.poll() is None:
                p.send_signal(signal.SIGKILL if force else signal.SIGTERM)
                try:
                    wait_exit(p, timeout_s)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            self._p = None

    def exit_info(self) -> str:
        if self._p is None:
            return "not started"
        rc = self._p.poll()
        return "running" if rc is None else f"exited {rc}"

    def log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""


def wait_exit(p: subprocess.Popen[bytes], timeout_s: float) -> None:
    """``p.wait(timeout_s)``, woken the moment the process exits.

    ``Popen.wait`` with a timeout polls, sleeping 1, 2, 4 ... 50 ms between looks, so a
    process that dies in 8 ms is seen dead at 15 ms: the lab's power changes (and the BMC
    answers that waited for them) were late by that much, and by a different amount for each
    node. A pidfd (Linux 5.3+) becomes readable at the exit itself; elsewhere, the polling.
    """
    if p.returncode is not None:
        return
    try:
        fd = os.pidfd_open(p.pid)
    except (AttributeError, OSError):  # no pidfd here, or already reaped by another thread
        p.wait(timeout_s)
        return
    try:
        # Not reaped before the pidfd was opened (an unreaped child keeps its PID), so the
        # pidfd is this process's, not one that reused the number.
        if p.poll() is not None:
            return
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(max(0, int(timeout_s * 1000))):
            raise subprocess.TimeoutExpired(p.args, timeout_s)
    finally:
        os.close(fd)
    p.wait()  # exited: reaps at once


def _boot_id() -> str:
    boot = boot_id()
    return "unknown-boot" if boot is None else boot


def process_identity(pid: int) -> str:
    """``boot:pid:start``: names one process for good, unlike a PID, which is reused."""
    return f"{_boot_id()}:{pid}:{start_ticks(pid) or '?'}"


def write_identity(path: Path, pid: int) -> None:
    path.write_text(process_identity(pid) + "\n")


def identity_pid(path: Path) -> tuple[int, str] | None:
    """The PID and identity recorded in ``path``; None when there is no readable record."""
    try:
        text = path.read_text().strip()
        return int(text.split(":")[1]), text
    except (OSError, ValueError, IndexError):
        return None


def recorded_alive(path: Path) -> int | None:
    """The PID recorded in ``path`` if that very process still runs: same boot, same start
    time. A stale record (a reboot, or a PID since given to someone else's process) gives
    None, so nobody else's process is ever reported as ours or signalled."""
    rec = identity_pid(path)
    if rec is None:
        return None
    pid, ident = rec
    return pid if process_alive(pid) and process_identity(pid) == ident else None


def group_is_ours(path: Path) -> int | None:
    """The process group led by the process recorded in ``path``, if signalling it can only
    reach our processes. The kernel never hands out a PID that is still some group's ID, so
    while any member of our group lives its ID stays ours: it is safe when the recorded
    leader still runs (same identity) or when no process has that PID at all (the leader
    exited, members may remain). A different process holding the PID means the group is
    gone and the ID reused. A record from another boot is never ours."""
    rec = identity_pid(path)
    if rec is None:
        return None
    pid, ident = rec
    if ident.split(":")[0] != _boot_id():
        return None
    if not process_alive(pid) or process_identity(pid) == ident:
        return pid
    return None
