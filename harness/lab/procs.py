"""Child processes of the lab supervisor: start, stop by PID, never anyone else's."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path


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

    def stop(self, *, force: bool = False, timeout_s: float = 10.0) -> None:
        """SIGTERM (or SIGKILL when forced), then SIGKILL after the timeout; always reaped."""
        with self._lock:
            p = self._p
            if p is None:
                return
            if p.poll() is None:
                p.send_signal(signal.SIGKILL if force else signal.SIGTERM)
                try:
                    p.wait(timeout_s)
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


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
