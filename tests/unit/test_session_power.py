"""Session power actions against fake BMCs and a fake API server: the blast radius counts
what the durable journal still owes, power cycles are journaled, and progress is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.budgets import profile
from harness.errors import PermanentError
from harness.inventory import Inventory, load_inventory
from harness.journal import EntryState, Journal
from harness.power.base import PowerState
from harness.safety import SafetyViolation
from harness.session import Session, journal_path_for
from tests.fakeapi import FakeApiServer
from tests.unit.powerfakes import FakeBmcs, write_inventory


@pytest.fixture
def bmcs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBmcs:
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    return FakeBmcs().install(monkeypatch)


@pytest.fixture
def inventory(tmp_path: Path, api: FakeApiServer, bmcs: FakeBmcs) -> Inventory:
    return load_inventory(write_inventory(tmp_path, api.url))  # max_nodes_down: 2


@pytest.fixture
def said() -> list[str]:
    return []


def owed(inventory: Inventory) -> list[str]:
    return [
        f"{e.action} {e.target}" for e in Journal.read(journal_path_for(inventory)) if e.owes_undo
    ]


def power_off(inventory: Inventory, api: FakeApiServer, nodes: list[str], **kw: object) -> None:
    with Session(inventory, client=api.client(), undo_on_exit=False, **kw) as s:  # type: ignore[arg-type]
        s.power_off(nodes)


# -- blast radius across invocations ---------------------------------------------------------


def test_nodes_an_earlier_invocation_left_off_count_against_max_nodes_down(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, said: list[str]
) -> None:
    power_off(inventory, api, ["w1"])  # `powercut power off w1`
    with (
        pytest.raises(SafetyViolation) as info,
        Session(inventory, client=api.client(), undo_on_exit=False, say=said.append) as s,
    ):
        s.power_off(["w2", "w3"])  # a second `powercut power off`, a new process
    assert info.value.rule == "safety.max_nodes_down"
    assert "3 nodes would be down at once (1 already down + 2 more); the limit is 2" in str(
        info.value
    )
    assert bmcs.ops("off") == ["w1"]
    assert any("still owes a power-on for w1: counted as down" in line for line in said)
    power_off(inventory, api, ["w2"])  # 2 down: allowed
    with pytest.raises(SafetyViolation, match="target already down: w1 already down"):
        power_off(inventory, api, ["w1"])


def test_powering_on_in_a_later_invocation_settles_what_the_journal_owes(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    power_off(inventory, api, ["w1", "w2"])
    assert owed(inventory) == ["power_off node/w1", "power_off node/w2"]
    with Session(inventory, client=api.client(), undo_on_exit=False) as s:
        assert s.nodes_down() == {"w1", "w2"}
        s.power_on(["w1"])
        assert s.nodes_down() == {"w2"}
    assert owed(inventory) == ["power_off node/w2"]
    power_off(inventory, api, ["w3"])  # w2 + w3: within the limit again
    assert bmcs.power["w3"] is PowerState.OFF


def test_a_power_off_that_failed_midway_still_counts_as_down(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    bmcs.fail[("w1", "off")] = PermanentError("w1: read-back timed out")
    with pytest.raises(PermanentError):
        power_off(inventory, api, ["w1"])
    (entry,) = Journal.read(journal_path_for(inventory))
    assert entry.state is EntryState.FAILED
    with pytest.raises(SafetyViolation, match="1 already down"):
        power_off(inventory, api, ["w2", "w3"])


def test_a_dry_run_counts_the_journal_too(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    power_off(inventory, api, ["w1"])
    with Session(inventory, dry_run=True, undo_on_exit=False) as s:
        with pytest.raises(SafetyViolation, match="max_nodes_down"):
            s.power_off(["w2", "w3"])
        s.power_off(["w2"])
        assert "already down: w1" in s.plan
    assert bmcs.ops("off") == ["w1"]


def test_session_drivers_get_the_inventory_power_budgets(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    power_off(inventory, api, ["w1"])
    assert bmcs.options == [{"budgets": profile("fast")}]  # the inventory's timings: fast
