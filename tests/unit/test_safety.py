"""Blast-radius rules."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness.errors import ConfigError, PermanentError
from harness.inventory import Inventory, parse_inventory
from harness.safety import SafetyViolation, dry_run, plan_disruption


def inventory(
    *,
    control_planes: int = 3,
    racks: dict[str, int] | None = None,
    unracked_workers: int = 0,
    safety: str = "{max_nodes_down: 10}",
) -> Inventory:
    """Control-plane nodes cp1..cpN (no rack), workers <rack>-w1.. per rack, u1.. unracked."""
    lines = ["cluster: {kubeconfig: k}", f"safety: {safety}", "nodes:"]
    for i in range(1, control_planes + 1):
        lines.append(f"  - {{name: cp{i}, role: control-plane, power: {{driver: kind}}}}")
    for rack, count in (racks or {}).items():
        for i in range(1, count + 1):
            lines.append(
                f"  - {{name: {rack}-w{i}, role: worker, rack: {rack}, power: {{driver: kind}}}}"
            )
    for i in range(1, unracked_workers + 1):
        lines.append(f"  - {{name: u{i}, role: worker, power: {{driver: kind}}}}")
    return parse_inventory("\n".join(lines) + "\n", base_dir=Path("/"))


def test_a_single_worker_is_allowed() -> None:
    plan = plan_disruption(inventory(racks={"a": 3}), ["a-w1"])
    assert plan.target_names == ("a-w1",)
    assert plan.down_after == {"a-w1"}
    assert plan.refused == ()
    assert plan.warnings == ()


def test_max_nodes_down_counts_nodes_already_down() -> None:
    inv = inventory(racks={"a": 4, "b": 4}, safety="{max_nodes_down: 2}")
    plan_disruption(inv, ["a-w1", "b-w1"])
    with pytest.raises(SafetyViolation) as info:
        plan_disruption(inv, ["b-w1"], already_down=["a-w1", "a-w2"])
    error = info.value
    assert isinstance(error, PermanentError)
    assert error.rule == "safety.max_nodes_down"
    assert "3 nodes would be down at once (2 already down + 1 more); the limit is 2" in str(error)


def test_default_allows_one_node_down() -> None:
    inv = inventory(racks={"a": 3}, safety="{}")
    plan_disruption(inv, ["a-w1"])
    with pytest.raises(SafetyViolation, match=r"safety.max_nodes_down"):
        plan_disruption(inv, ["a-w1", "a-w2"])


@pytest.mark.parametrize(
    ("control_planes", "down", "allowed"),
    [(3, 1, True), (3, 2, False), (4, 1, True), (4, 2, False), (5, 2, True), (1, 1, False)],
)
def test_control_plane_majority(control_planes: int, down: int, allowed: bool) -> None:
    inv = inventory(control_planes=control_planes)
    targets = [f"cp{i}" for i in range(1, down + 1)]
    if allowed:
        plan = plan_disruption(inv, targets)
        assert plan.control_plane_down == down
        return
    with pytest.raises(SafetyViolation) as info:
        plan_disruption(inv, targets)
    assert info.value.rule == "safety.allow_control_plane_majority"
    assert "etcd" in str(info.value)
    assert f"need a majority ({control_planes // 2 + 1})" in str(info.value)


def test_control_plane_majority_counts_nodes_already_down() -> None:
    with pytest.raises(SafetyViolation, match="only 1 of 3 control-plane nodes would stay up"):
        plan_disruption(inventory(), ["cp2"], already_down=["cp1"])


def test_control_plane_majority_can_be_allowed_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inv = inventory(safety="{max_nodes_down: 10, allow_control_plane_majority: true}")
    with caplog.at_level(logging.WARNING):
        plan = plan_disruption(inv, ["cp1", "cp2"])
    assert len(plan.warnings) == 1
    assert "allowed by safety.allow_control_plane_majority" in plan.warnings[0]
    assert "only 1 of 3 control-plane nodes" in caplog.text


def test_rack_fraction_refused_with_the_eviction_explanation() -> None:
    inv = inventory(racks={"a": 5, "b": 5})
    plan_disruption(inv, ["a-w1", "a-w2"])  # 40%
    with pytest.raises(SafetyViolation) as info:
        plan_disruption(inv, ["a-w1", "a-w2", "a-w3"])  # 60% > 55%
    error = info.value
    assert error.rule == "safety.max_rack_fraction"
    message = str(error)
    assert "rack a would have 3 of 5 nodes down (60% > 55%)" in message
    assert "stops evicting pods from a zone in which more than 55% of the nodes" in message


def test_rack_fraction_needs_three_nodes_down_as_kubernetes_does() -> None:
    inv = inventory(racks={"a": 3, "b": 3})
    plan = plan_disruption(inv, ["a-w1", "a-w2"])  # 67% but only 2 NotReady: normal eviction
    assert plan.refused == ()


def test_a_whole_rack_may_go_down() -> None:
    inv = inventory(racks={"a": 4, "b": 4})
    plan = plan_disruption(inv, [f"a-w{i}" for i in range(1, 5)])
    (rack_a,) = [r for r in plan.racks if r.rack == "a"]
    assert rack_a.fully_down
    assert rack_a.fraction == 1.0


def test_every_rack_down_is_refused() -> None:
    inv = inventory(control_planes=0, racks={"a": 2, "b": 2})
    with pytest.raises(SafetyViolation, match="every rack would be wholly down"):
        plan_disruption(inv, ["a-w1", "a-w2", "b-w1", "b-w2"])


def test_nodes_without_a_rack_count_as_one_zone() -> None:
    inv = inventory(control_planes=0, unracked_workers=5)
    with pytest.raises(SafetyViolation, match=r"rack \(no rack\) would have 3 of 5"):
        plan_disruption(inv, ["u1", "u2", "u3"])


def test_rack_fraction_policy_warn(caplog: pytest.LogCaptureFixture) -> None:
    inv = inventory(racks={"a": 5}, safety="{max_nodes_down: 10, rack_fraction_policy: warn}")
    with caplog.at_level(logging.WARNING):
        plan = plan_disruption(inv, ["a-w1", "a-w2", "a-w3"])
    assert plan.refused == ()
    assert "60% > 55%" in plan.warnings[0]
    assert "60% > 55%" in caplog.text


def test_configured_rack_fraction() -> None:
    inv = inventory(racks={"a": 10}, safety="{max_nodes_down: 10, max_rack_fraction: 0.3}")
    plan_disruption(inv, ["a-w1", "a-w2", "a-w3"])  # exactly 30%: allowed
    with pytest.raises(SafetyViolation, match="40% > 30%"):
        plan_disruption(inv, ["a-w1", "a-w2", "a-w3", "a-w4"])


def test_every_broken_rule_is_named() -> None:
    inv = inventory(racks={"a": 4}, safety="{max_nodes_down: 2}")
    with pytest.raises(SafetyViolation) as info:
        plan_disruption(inv, ["cp1", "cp2", "a-w1", "a-w2", "a-w3"])
    rules = [v.rule for v in info.value.violations]
    assert rules == [
        "safety.max_nodes_down",
        "safety.allow_control_plane_majority",
        "safety.max_rack_fraction",
    ]
    assert str(info.value).startswith("refused: safety.max_nodes_down: ")


def test_unknown_nodes_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"unknown node 'w9' in the targets; the inventory has"):
        plan_disruption(inventory(), ["w9"])
    with pytest.raises(ConfigError, match=r"in the nodes already down"):
        plan_disruption(inventory(), ["cp1"], already_down=["w9"])


def test_targets_must_not_be_empty_or_already_down() -> None:
    with pytest.raises(PermanentError, match="no target nodes"):
        plan_disruption(inventory(), [])
    with pytest.raises(SafetyViolation, match="cp1 already down"):
        plan_disruption(inventory(), ["cp1"], already_down=["cp1"])


def test_duplicate_targets_count_once() -> None:
    assert plan_disruption(inventory(racks={"a": 3}), ["a-w1", "a-w1"]).target_names == ("a-w1",)


def test_dry_run_describes_an_allowed_plan() -> None:
    inv = parse_inventory(
        """\
cluster: {kubeconfig: k}
racks: [{name: r1}]
safety: {max_nodes_down: 2}
nodes:
  - {name: cp1, role: control-plane, rack: r1, power: {driver: kind}}
  - name: w1
    role: worker
    rack: r1
    power: {driver: ipmi, endpoint: "10.0.0.1:623", username: u, password_env: PW}
  - {name: w2, role: worker, rack: r1, power: {driver: ssh}, ssh: {host: 10.0.1.2}}
""",
        base_dir=Path("/"),
    )
    lines = dry_run(inv, ["w1"], action="power off")
    assert lines == [
        "power off 1 node(s):",
        "  - w1 (worker, rack r1) via ipmi 10.0.0.1:623",
        "nodes down during the disruption: 1 (limit 2)",
        "control-plane nodes up: 1 of 1 (quorum needs 1)",
        "rack r1: 1 of 3 nodes down (33%; limit 55%)",
        "verdict: allowed",
    ]
    assert "  - w2 (worker, rack r1) via ssh 10.0.1.2" in dry_run(inv, ["w2"], already_down=["w1"])


def test_dry_run_lists_refusals_instead_of_raising() -> None:
    inv = inventory(racks={"a": 2}, safety="{max_nodes_down: 1}")
    lines = dry_run(inv, ["a-w1", "cp1"], already_down=["a-w2"], action="drain")
    assert lines[0] == "drain 2 node(s):"
    assert "already down: a-w2" in lines
    assert any(line.startswith("REFUSED by safety.max_nodes_down: ") for line in lines)
    assert "rack a: 2 of 2 nodes down (100%, whole rack; limit 55%)" in lines
    assert lines[-1] == "verdict: refused"
