"""``Session.finish``: the session ends with an explicit call that returns what its undos
did (the scenario fixture no longer calls ``__exit__`` with a made-up exception)."""

from __future__ import annotations

from pathlib import Path

from harness.errors import PermanentError
from harness.inventory import Inventory
from harness.journal import Journal
from harness.power.base import PowerState
from harness.session import Session, journal_path_for
from tests.fakes.api import FakeApiServer
from tests.fakes.power import FakeBmcs


def owed(inventory: Inventory) -> list[str]:
    return sorted(e.target for e in Journal.read(journal_path_for(inventory)) if e.owes_undo)


def test_finish_undoes_and_returns_each_undo(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    s = Session(inventory, client=api.client(), lock=False).__enter__()
    s.power_off(["w1", "w2"])
    results = s.finish()
    assert sorted(r.description.split(" ")[0] for r in results) == [
        "power_on(node='w1')",
        "power_on(node='w2')",
    ]
    assert all(r.ok for r in results)
    assert bmcs.power["w1"] is PowerState.ON and bmcs.power["w2"] is PowerState.ON
    assert owed(inventory) == []


def test_a_failed_undo_is_returned_not_raised_and_stays_owed(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    s = Session(inventory, client=api.client(), lock=False).__enter__()
    s.power_off(["w1"])
    bmcs.fail[("w1", "on")] = PermanentError("the BMC refused")
    (result,) = s.finish()
    assert not result.ok and "the BMC refused" in (result.error or "")
    assert owed(inventory) == ["node/w1"]


def test_a_failed_scenario_kept_for_inspection_returns_nothing_and_owes_it(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, tmp_path: Path
) -> None:
    s = Session(inventory, client=api.client(), lock=False, keep_on_failure=True).__enter__()
    s.power_off(["w3"])
    assert s.finish(failed=True) == []
    assert s.undo is not None and s.undo.kept == ["power_on(node='w3') (undoes power_off node/w3)"]
    assert bmcs.power["w3"] is PowerState.OFF
    assert owed(inventory) == ["node/w3"]
    # not failed: the same session kind undoes even with keep_on_failure
    s2 = Session(inventory, client=api.client(), lock=False, keep_on_failure=True).__enter__()
    s2.power_on(["w3"])
    assert s2.finish() == []  # nothing of its own to undo; the power-on settled the journal
    assert owed(inventory) == []
