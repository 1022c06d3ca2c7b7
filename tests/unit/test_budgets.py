"""Timing budgets: profiles, name resolution, overrides."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.budgets import (
    PROFILES,
    Budgets,
    budget_for,
    budget_names,
    canonical_budget_name,
    parse_duration,
    profile,
)
from harness.errors import ConfigError


def test_budgets_are_frozen() -> None:
    budgets = profile("fast")
    with pytest.raises(dataclasses.FrozenInstanceError):
        budgets.node_not_ready = 1.0  # type: ignore[misc]


def test_every_budget_is_documented() -> None:
    budgets = Budgets()
    for name in budget_names():
        assert len(budgets.describe(name)) > 20, name


def test_fast_profile_follows_the_lab_timings() -> None:
    fast = profile("fast")
    # grace period ~12 s: NotReady well before a minute
    assert 8 < fast.node_not_ready <= 30
    # tolerations 10 s
    assert 10 < fast.pod_eviction <= 30
    # force detach is fixed at 6 min in kube-controller-manager, fast or not
    assert fast.volume_detach >= 360


def test_upstream_profile_follows_kubernetes_defaults() -> None:
    upstream = profile("upstream")
    assert upstream.node_not_ready >= 50  # grace period 40-50 s
    assert upstream.pod_eviction >= 300  # DefaultTolerationSeconds
    assert upstream.volume_detach >= 360  # maxWaitForUnmountDuration
    assert upstream == Budgets()


def test_fast_is_faster_than_upstream_for_what_the_lab_shortens() -> None:
    fast, upstream = PROFILES["fast"], PROFILES["upstream"]
    for name in ("node_not_ready", "taint_applied", "pod_eviction", "service_outage"):
        assert fast.get(name) < upstream.get(name), name


def test_unknown_profile_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown budget profile 'lab'; must be one of: fast"):
        profile("lab")


@pytest.mark.parametrize(
    "spelling",
    [
        "node_not_ready",
        "node-not-ready",
        "node not ready",
        "node-not-ready budget",
        "the Node Not Ready budget",
        "  NODE-NOT-READY  ",
    ],
)
def test_budget_names_resolve_in_any_spelling(spelling: str) -> None:
    budgets = profile("fast")
    assert canonical_budget_name(spelling) == "node_not_ready"
    assert budget_for(spelling, budgets) == budgets.node_not_ready
    assert budgets.get(spelling) == budgets.node_not_ready


def test_unknown_budget_suggests_and_lists_valid_names() -> None:
    with pytest.raises(ConfigError) as info:
        budget_for("node-not-redy budget", Budgets())
    message = str(info.value)
    assert "did you mean 'node-not-ready'" in message
    for name in budget_names():
        assert name.replace("_", "-") in message


def test_overrides_replace_single_budgets() -> None:
    base = profile("fast")
    changed = base.with_overrides({"node-not-ready": 12, "drain": "2m", "power ack": "500ms"})
    assert changed.node_not_ready == 12.0
    assert changed.drain == 120.0
    assert changed.power_ack == 0.5
    assert changed.pod_eviction == base.pod_eviction
    assert base.node_not_ready == PROFILES["fast"].node_not_ready  # the profile is untouched


def test_override_with_unknown_name_names_the_key_and_lists_valid_names() -> None:
    with pytest.raises(ConfigError) as info:
        Budgets().with_overrides({"evicton": 3}, source="inv.yaml", field="budgets.overrides")
    error = info.value
    assert error.source == "inv.yaml"
    assert error.field == "budgets.overrides.evicton"
    assert "valid budgets: power-ack, power-state-verify, node-not-ready" in str(error)


@pytest.mark.parametrize("bad", [0, -1, "soon", "", True, None, float("nan"), float("inf"), "5d"])
def test_override_values_must_be_positive_durations(bad: object) -> None:
    with pytest.raises(ConfigError, match="not a valid duration"):
        Budgets().with_overrides({"drain": bad})


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(90, 90.0), (1.5, 1.5), ("90", 90.0), ("90s", 90.0), ("6m", 360.0), ("1h", 3600.0)],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_scaled_multiplies_every_budget() -> None:
    doubled = profile("fast").scaled(2)
    assert doubled.node_not_ready == 2 * PROFILES["fast"].node_not_ready
    with pytest.raises(ConfigError):
        profile("fast").scaled(0)


def test_an_inventory_override_with_underscores_is_read_with_a_warning_naming_the_dashed_key(
    tmp_path: Path,
) -> None:
    from harness.budgets import BudgetSpellingWarning
    from harness.inventory import load_inventory

    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "name: spelled\ncluster: {kubeconfig: kube.conf}\nnodes:\n"
        "  - {name: w1, role: worker, power: {driver: kind}}\n"
        "budgets:\n  profile: fast\n  overrides:\n    node-not-ready: 41s\n"
        "    service_outage: 42s\n"
    )
    with pytest.warns(BudgetSpellingWarning) as caught:
        loaded = load_inventory(inv)
    assert len(caught) == 1  # the dashed key is the one spelling: no warning for it
    warning = caught[0]
    assert "'service-outage'" in str(warning.message)
    assert (warning.filename, warning.lineno) == (str(inv), 9)
    budgets = loaded.timing_budgets()
    assert (budgets.node_not_ready, budgets.service_outage) == (41.0, 42.0)


def test_every_example_inventory_writes_budget_names_with_dashes() -> None:
    import re

    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "inventories").glob("*.yaml")):
        for key in re.findall(r"^\s+([a-z]+(?:_[a-z]+)+):", path.read_text(), re.M):
            assert key not in budget_names(), f"{path.name}: {key!r} written with underscores"
