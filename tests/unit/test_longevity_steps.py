"""The longevity feature's Then-steps (steps/longevity_steps.py) on recorded cycles.

The cycles are written to a ``cycles.jsonl`` and read back as the step reads them, each
shaped as :mod:`harness.longevity.cycle` records one: a ``missed`` status with its reason,
misses and incomplete phases, and the violations and remediation in its detail.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.checks import CheckFailed
from harness.longevity.records import CYCLES_FILE, PHASES, CycleLog, CycleRecord, read_log
from harness.longevity.verdict import LongevityRun, availability_dips, cycle_problems
from harness.report.allure_env import BUDGET_OVERRUNS, PRODUCT_FAILURES, classify
from harness.steps.longevity_steps import every_cycle_within_budgets, no_cycle_missed

BUDGETS = {
    "not_ready": 20.0,
    "evacuation": 60.0,
    "recovery": 80.0,
    "service_outage": 10.0,
    "volume_reattach": 30.0,
    "cleanup": 120.0,
}
GOOD = {
    "not_ready": 8.2,
    "evacuation": 31.0,
    "recovery": 40.5,
    "service_outage": 1.5,
    "volume_reattach": 6.0,
    "cleanup": 45.0,
}


def record(
    cycle: int,
    *,
    status: str = "passed",
    phases: dict[str, float | None] | None = None,
    incomplete: tuple[str, ...] = (),
    violations: tuple[str, ...] = (),
    remediation: dict[str, list[str]] | None = None,
    reason: str = "",
    below_min: tuple[str, ...] = (),
) -> dict[str, Any]:
    values = {**GOOD, **(phases or {})}
    misses = [p for p, v in values.items() if v is not None and v > BUDGETS[p]]
    return {
        "type": "cycle",
        "schema": 1,
        "cycle": cycle,
        "group": f"g{cycle % 3 + 1}",
        "nodes": [f"w{cycle}"],
        "status": status,
        "started_at": 1_700_000_000.0 + 100 * cycle,
        "ended_at": 1_700_000_090.0 + 100 * cycle,
        "duration_s": 90.0,
        "phases": values,
        "budgets": BUDGETS,
        "misses": misses,
        "incomplete": list(incomplete),
        "reason": reason,
        "detail": {
            "protocol": "inventory",
            "remediation": remediation or {},
            "violations": [*violations, *below_min],
            **({"below_min_available": list(below_min)} if below_min else {}),
        },
        "timeline": None,
    }


def recorded(tmp_path: Path, *cycles: dict[str, Any], expected: int | None = None) -> LongevityRun:
    with CycleLog(tmp_path / CYCLES_FILE) as log:
        log.append({"type": "run", "event": "start", "at": 1.0, "run_id": "r1"})
        for c in cycles:
            log.append(c)
        log.append({"type": "run", "event": "stop", "at": 2.0, "reason": "3 cycles done"})
    result = SimpleNamespace(failed=False, reason="3 cycles done")
    outcome = SimpleNamespace(result=result, report=None, out=tmp_path)
    return LongevityRun(outcome, read_log(tmp_path / CYCLES_FILE), expected or len(cycles))  # type: ignore[arg-type]


def failure(run: LongevityRun) -> CheckFailed:
    with pytest.raises(CheckFailed) as err:
        every_cycle_within_budgets(run)
    return err.value


def category(err: CheckFailed) -> str | None:
    return classify("failed", f"{type(err).__module__}.{type(err).__name__}: {err}")


def test_three_good_cycles_pass(tmp_path: Path) -> None:
    every_cycle_within_budgets(recorded(tmp_path, record(1), record(2), record(3)))


@pytest.mark.parametrize(
    ("phase", "value"),
    [("recovery", 95.0), ("service_outage", 14.0), ("volume_reattach", 44.0)],
)
def test_a_late_phase_the_old_steps_let_through_is_a_budget_overrun(
    tmp_path: Path, phase: str, value: float
) -> None:
    """recovery, service_outage and volume_reattach were never checked by the feature."""
    late = record(2, status="missed", phases={phase: value}, reason=f"{phase} {value}s over")
    run = recorded(tmp_path, record(1), late, record(3))
    for checked in ("not_ready", "evacuation", "cleanup"):  # what the feature used to check
        no_cycle_missed(run, checked)
    err = failure(run)
    assert err.seen == f"cycle 2 (g3): {phase} {value}s over its {BUDGETS[phase]}s budget"
    assert err.late and category(err) == BUDGET_OVERRUNS


def test_a_phase_that_never_completed_is_a_product_failure(tmp_path: Path) -> None:
    """The service still down when the cycle ended: its outage is a lower bound."""
    down = record(
        1, status="missed", phases={"service_outage": 12.0}, incomplete=("service_outage",)
    )
    err = failure(recorded(tmp_path, down))
    assert "service_outage did not complete (12.0s waited, budget 10.0s)" in err.seen
    assert not err.late and category(err) == PRODUCT_FAILURES
    with pytest.raises(CheckFailed) as one:
        no_cycle_missed(recorded(tmp_path / "again", down), "service_outage")
    assert not one.value.late and "did not complete" in one.value.seen


def test_a_cycle_the_harness_had_to_help_fails_though_every_phase_was_in_time(
    tmp_path: Path,
) -> None:
    helped = record(
        2,
        status="missed",
        violations=(
            "the cluster did not settle by itself (force deleted: lab/quorum-1; "
            "restarted: lab/web-7)",
        ),
        remediation={"force_deleted": ["lab/quorum-1"], "restarted": ["lab/web-7"]},
        reason="the cluster did not settle by itself (force deleted: lab/quorum-1)",
    )
    err = failure(recorded(tmp_path, record(1), helped))
    assert "cycle 2 (g3): the cluster did not settle by itself (force deleted" in err.seen
    assert not err.late and category(err) == PRODUCT_FAILURES


def test_remediation_without_its_violation_still_fails(tmp_path: Path) -> None:
    helped = record(1, status="missed", remediation={"restarted": ["lab/web-7"]})
    problems, late = cycle_problems(recorded(tmp_path, helped).log.cycles, 1)
    assert problems == [
        "cycle 1 (g2): the harness helped the cluster settle: {'restarted': ['lab/web-7']}"
    ]
    assert not late


DIP = "lab/Deployment/web: 1 Ready pod(s) at the lowest, below its min_available 2"


def test_a_workload_below_its_minimum_is_reported_not_failed(tmp_path: Path) -> None:
    """Which pods a group takes depends on placement: the dip is listed, the phases judge."""
    below = record(3, status="missed", below_min=(DIP,))
    run = recorded(tmp_path, below)
    assert cycle_problems(run.log.cycles, 1) == ([], False)
    assert availability_dips(run.log.cycles) == [f"cycle 3 (g1): {DIP}"]
    every_cycle_within_budgets(run)  # passes


def test_a_dip_does_not_hide_another_violation(tmp_path: Path) -> None:
    lost = "lab/StatefulSet/quorum: surviving member(s) lost readiness while the nodes were off"
    both = record(3, status="missed", violations=(lost,), below_min=(DIP,))
    err = failure(recorded(tmp_path, both))
    assert "lost readiness" in err.seen and "min_available" not in err.seen
    assert not err.late


def test_a_failed_cycle_and_missing_cycles_fail(tmp_path: Path) -> None:
    failed = record(
        1,
        status="failed",
        phases={"cleanup": 300.0},
        incomplete=("cleanup",),
        reason="steady state not back within 600s: w1 NotReady",
    )
    err = failure(recorded(tmp_path, failed, expected=3))
    assert err.seen.startswith("1 of 3 cycles ran; cycle 1 (g2): the cluster did not come back")
    assert "cleanup did not complete" in err.seen
    assert not err.late


def test_every_phase_is_judged(tmp_path: Path) -> None:
    every = record(1, status="missed", phases={p: BUDGETS[p] + 1 for p in PHASES})
    problems, late = cycle_problems(recorded(tmp_path, every).log.cycles, 1)
    assert [p.split(": ")[1].split()[0] for p in problems] == list(PHASES)
    assert late


def test_the_feature_uses_the_step(tmp_path: Path) -> None:
    feature = Path(__file__).resolve().parents[2] / "features/longevity/longevity.feature"
    assert (
        "every cycle kept every phase within its budget, with no help from the harness"
        in feature.read_text()
    )
    assert isinstance(CycleRecord.from_json(record(1)), CycleRecord)
