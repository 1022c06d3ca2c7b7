"""The lab's graceful power-off on a real child process that takes 0.3 s to stop on SIGTERM:
the node reads on until the process has stopped by itself, in order, then off.

Real time in tests/integration, not tests/unit: that the node still reads on right after the
power-off answers holds only while the child is still in its 0.3 s shutdown, and the child's
handler is waited for by polling its log. A fake clock does not slow a real process down.
"""

from __future__ import annotations

import sys

from harness.lab.procs import Proc
from harness.lab.supervisor import Lab
from harness.power.base import PowerState
from tests.polling import poll_until
from tests.unit.test_lab_power_switch import lab, popen  # noqa: F401 - lab is a fixture

# Shuts down in order on SIGTERM: takes 0.3 s, then exits. Says "handler installed" (to its
# log) once SIGTERM would be handled.
SLOW_TO_STOP = [
    sys.executable,
    "-c",
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(0.3), sys.exit(0)))\n"
    "print('handler installed', flush=True)\n"
    "time.sleep(60)\n",
]


def test_a_graceful_power_off_reads_on_until_the_processes_stopped(
    lab: Lab,  # noqa: F811
) -> None:
    lab.kwok["w-a1"].stop(force=True)
    lab.kwok["w-a1"] = Proc("kwok-w-a1", SLOW_TO_STOP, lab.logs)
    lab.kwok["w-a1"].start()
    # Its SIGTERM handler is installed (an interpreter start can take seconds on a busy
    # machine: a fixed pause was not enough at load 50).
    log = lab.kwok["w-a1"].log_path
    poll_until(
        f"the child to say its handler is in ({log})",
        lambda: "handler installed" in (log.read_text() if log.exists() else ""),
        timeout_s=60,
        every_s=0.02,
    )
    process = popen(lab.kwok["w-a1"])
    lab.power_off("w-a1", graceful=True)
    assert lab.power_state("w-a1") is PowerState.ON  # shutting down
    lab._settle("w-a1")
    assert process.returncode == 0  # stopped by itself, in order: not killed
    assert lab.power_state("w-a1") is PowerState.OFF
