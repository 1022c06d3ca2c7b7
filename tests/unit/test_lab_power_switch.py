"""The lab's power switch, as its BMCs use it, on real child processes standing in for a
node's kwok and control-plane components.

A forced power-off answers once every process of the node got SIGKILL and leaves the
reaping to another thread; a graceful one once the shutdown began. Either way the node
reads on until every process has exited; a power-on starts them again only once the
power-off's reaping is done. The graceful power-off, whose child takes real time to stop, is in
tests/integration/test_lab_power_switch_graceful.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.lab.procs import Proc, wait_exit
from harness.lab.spec import LabSpec
from harness.lab.supervisor import Lab
from harness.power.base import PowerState

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    fake = {
        name: "/nonexistent/" + name
        for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
    }
    spec = LabSpec(
        state_dir=str(tmp_path / "lab"),
        racks=1,
        workers_per_rack=1,
        control_planes=1,
        base_port=20000,
        binaries=fake,
        boot_seconds=0,  # processes start at the power-on (test_lab_boot.py: with a boot)
    )
    lab = Lab(spec)
    # Real child processes in place of the node's components (never started here).
    for name in list(lab.kwok):
        lab.kwok[name] = Proc(f"kwok-{name}", SLEEPER, lab.logs)
    for name, procs in lab.cp_procs.items():
        lab.cp_procs[name] = [Proc(f"{p.name}", SLEEPER, lab.logs) for p in procs[:2]]
    for name in lab.power:
        for proc in [*lab.cp_procs.get(name, []), lab.kwok[name]]:
            proc.start()
        lab.power[name] = True
    try:
        yield lab
    finally:
        lab.stop()


def popen(proc: Proc) -> subprocess.Popen[bytes]:
    p = proc._p
    assert p is not None
    return p


def test_a_forced_power_off_kills_every_process_and_reads_off_once_they_exited(lab: Lab) -> None:
    procs = [lab.kwok["cp-1"], *lab.cp_procs["cp-1"]]
    running = [popen(p) for p in procs]
    lab.power_off("cp-1", graceful=False)
    lab._settle("cp-1")  # the reaping, done on another thread
    assert lab.power_state("cp-1") is PowerState.OFF
    assert [p.returncode for p in running] == [-signal.SIGKILL] * len(running)
    assert all(not p.alive() for p in procs)
    lab._after.shutdown(wait=True)  # then the state file
    state = (lab.root / "state.json").read_text()
    assert '"cp-1": "off"' in state


def test_a_power_on_right_after_a_power_off_starts_new_processes(lab: Lab) -> None:
    before = popen(lab.kwok["w-a1"])
    lab.power_off("w-a1", graceful=False)
    lab.power_on("w-a1")  # waits for the reaping: a killed process still reads alive
    after = popen(lab.kwok["w-a1"])
    assert before.returncode == -signal.SIGKILL
    assert after.pid != before.pid and after.poll() is None
    assert lab.power_state("w-a1") is PowerState.ON
    lab.power_on("w-a1")  # already on: nothing changes
    assert popen(lab.kwok["w-a1"]) is after


def test_wait_exit_returns_at_the_exit_and_reaps() -> None:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    wait_exit(p, 10)
    assert p.returncode == 0
    wait_exit(p, 10)  # already reaped: returns at once


def test_wait_exit_times_out_on_a_process_that_keeps_running() -> None:
    p = subprocess.Popen(SLEEPER)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exit(p, 0.2)
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()
