"""Whether a process of this machine still runs, read from ``/proc``: who began a journal entry
(:func:`this_process`), and whether that run (or a cluster lock's holder) is alive.

Shared by the journal (``powercut recover`` skips a live run's entries), the cluster lock
(:mod:`harness.kube.lock`) and the lab's process records (:mod:`harness.lab.procs`).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def this_process() -> str:
    """Who begins an entry: ``host/pid-N``, the prefix the cluster lock's holder has too."""
    return f"{socket.gethostname()}/pid-{os.getpid()}"


def process_alive(pid: int, *, proc: Path = Path("/proc")) -> bool:
    """Whether process ``pid`` of this machine is alive. A zombie is not: it has exited and
    only waits for its parent to reap it (PID 1 in many containers does not at once), and
    neither is a process being torn down (state X). Read from ``/proc/PID/stat``; where
    there is no ``/proc``, a signal 0 decides (which counts zombies as alive)."""
    if pid <= 0:
        return False
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        if proc.is_dir():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # "PID (comm) STATE ...": comm may hold spaces and parentheses; the state follows the last ")".
    state = stat.rpartition(")")[2].split()[:1]
    return not state or state[0] not in ("Z", "X", "x")


def boot_id(*, proc: Path = Path("/proc")) -> str | None:
    """This boot's id (``/proc/sys/kernel/random/boot_id``), or None where it cannot be read."""
    try:
        return (proc / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return None


def start_ticks(pid: int, *, proc: Path = Path("/proc")) -> str | None:
    """Process ``pid``'s start time in clock ticks since boot (field 22 of
    ``/proc/PID/stat``), or None where it cannot be read."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The comm (field 2) may hold spaces and parentheses: the fields after it follow the
    # last ")"; the state is field 3, the start time field 22.
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def process_identity(pid: int, *, proc: Path = Path("/proc")) -> str | None:
    """What tells process ``pid`` from a later one that reuses its number: the boot id and
    the process's start time (``/proc``), or None where they cannot be read."""
    boot = boot_id(proc=proc)
    ticks = start_ticks(pid, proc=proc) if boot is not None else None
    return None if boot is None or ticks is None else f"{boot}:{ticks}"


def run_alive(pid: int, identity: str | None) -> bool:
    """Whether the process that wrote an entry (``pid``, with ``identity`` when recorded)
    is still running: alive, not a zombie, and not a later process with the same number."""
    if not process_alive(pid):
        return False
    return identity is None or process_identity(pid) in (None, identity)
