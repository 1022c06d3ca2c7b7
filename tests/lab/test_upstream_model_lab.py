"""The cluster's own model on the lab with upstream timings (issue #34, item 5: the second of
three shapes): Kubernetes 1.36's defaults (node-monitor-grace-period 50 s, monitor period 5 s,
Leases of 40 s, tolerations 300 s), read from the flags the lab publishes; a built-in
scenario's measured phases fall within the modelled bounds, or are flagged as deviations.

Only the built-in scenario that waits on no toleration runs (a worker rebooted through its
BMC: NotReady after the 50 s grace period, Ready after the 60 s boot): the others wait out
300 s tolerations. Opt-in (a lab of its own, about 5 minutes): `make upstream-test`, or
POWERCUT_TEST_UPSTREAM=1 with the lab tests' port, never beside another lab of the same
port block.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.report.history import from_allure_results
from tests.lab.conftest import LabHandle, lab_session, powercut

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(
        os.environ.get("POWERCUT_TEST_UPSTREAM") != "1",
        reason="opt-in: a lab with upstream timings of its own, about 5 minutes "
        "(make upstream-test, or POWERCUT_TEST_UPSTREAM=1)",
    ),
]


@pytest.fixture(scope="module")
def upstream_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    with lab_session(tmp_path_factory.mktemp("upstream-lab"), "upstream", 900) as handle:
        yield handle


def test_the_model_reads_the_upstream_defaults_the_lab_runs_with(upstream_lab: LabHandle) -> None:
    out = powercut("budgets", "model", "-i", str(upstream_lab.inventory_path), "--json")
    doc = json.loads(out.stdout)
    s = doc["settings"]
    assert (
        s["node-monitor-grace-period"]["value"] == 50
        and not s["node-monitor-grace-period"]["assumed"]
    )
    assert s["node-monitor-period"]["value"] == 5
    assert s["nodeLeaseDurationSeconds"]["value"] == 40
    bounds = doc["bounds"]
    assert bounds["node_not_ready"]["low_s"] == 40  # grace - the Lease's renewal (40 / 4)
    assert bounds["node_not_ready"]["high_s"] == 57  # grace + period + observation slack
    assert bounds["pod_eviction"]["low_s"] == 300


@pytest.mark.timeout(1200)
def test_a_reboots_phases_fall_within_the_modelled_bounds(
    upstream_lab: LabHandle, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    proc = powercut(
        "run", "-i", str(upstream_lab.inventory_path), "--out", str(out), "--no-html",
        "--", "-k", "a_worker_is_rebooted_through_its_bmc",
        check=False, timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 scenario: 1 passed" in proc.stdout, proc.stdout
    record = from_allure_results(
        out / "allure-results",
        run_id="r",
        target="lab",
        started="",
        finished="",
        powercut_version="",
        inventory="",
    )
    phases = {k: p for sc in record.scenarios for k, p in sc.phases.items()}
    for name, p in phases.items():  # what each took, shown with -s
        print(f"{name}: {p.value_s:.1f} s (model <= {p.model_s}, budget {p.budget_s})")
    [not_ready] = [p for k, p in phases.items() if k.endswith(" NotReady")]
    assert not_ready.model_s is not None and "node-monitor-grace-period" in not_ready.model_setting
    assert not_ready.value_s >= 40 - 1, not_ready  # the grace period, not the lab's fast one
    deviations = {k: (p.value_s, p.model_s) for k, p in phases.items() if p.deviation}
    assert deviations == {}, deviations
