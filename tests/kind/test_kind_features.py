"""The kind feature set (features/kind/) run by ``powercut run`` against the
session's real-kubelet cluster, as a user runs it: every scenario must pass, none may skip
(``--fail-on-skip``), and the cluster must be as it was found afterwards."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.steps import BUILTIN_FEATURES
from tests.kind.conftest import POWERCUT, KindCluster

pytestmark = [pytest.mark.kind, pytest.mark.disruptive, pytest.mark.serial, pytest.mark.slow]

KIND_FEATURES = BUILTIN_FEATURES / "kind"


def test_the_kind_features_pass_on_real_kubelets(cluster: KindCluster, tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = subprocess.run(
        [
            *POWERCUT, "run", "-i", str(cluster.inventory_path), "--out", str(out),
            "--features", str(KIND_FEATURES), "--no-builtin", "--fail-on-skip",
            "--no-html", "--progress", "plain",
        ],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    log = out / "run.log"
    detail = f"{proc.stdout}\n{proc.stderr}\n{log.read_text() if log.is_file() else ''}"
    assert proc.returncode == 0, f"powercut run exited {proc.returncode}:\n{detail[-20000:]}"
    cases = ET.parse(out / "junit.xml").getroot().iter("testcase")  # noqa: S314 (ours)
    bad = {"failure", "error", "skipped"}
    outcomes = {c.get("name", ""): [child.tag for child in c if child.tag in bad] for c in cases}
    scenarios = len(list(KIND_FEATURES.glob("*.feature")))
    assert len(outcomes) == scenarios, outcomes
    assert all(not o for o in outcomes.values()), outcomes
    assert cluster.all_ready() and cluster.workloads_ready()
