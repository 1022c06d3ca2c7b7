"""powercut's CSI driver (harness/kindlab/csi, Go): its own tests, through `go test`.

They call the driver's gRPC methods on a temporary shared directory: a volume attaches to
one node at a time (a second node is refused until it is detached from the first), only
the node it is attached to may stage it, and its data stays where it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from harness.kindlab.binaries import CSI_SOURCE


@pytest.mark.skipif(shutil.which("go") is None, reason="no Go toolchain")
def test_the_csi_driver_go_tests_pass() -> None:
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOWORK": "off", "CGO_ENABLED": "0"}
    proc = subprocess.run(
        ["go", "test", "-count=1", "./..."],
        cwd=CSI_SOURCE,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok  \tpowercut.local/pcsi" in proc.stdout
