"""Session power actions against fake BMCs and a fake API server: the blast radius counts
what the durable journal still owes, power cycles are journaled, and progress is told."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from harness.budgets import profile
from harness.errors import PermanentError, WaitTimeout, not_acted
from harness.inventory import Inventory, load_inventory
from harness.journal import EntryState, Journal
from harness.kube.timeline import ACTION
from harness.power.base import PowerState
from harness.safety import SafetyViolation
from harness.session import Session, journal_path_for
from tests.fakes.api import FakeApiServer
from tests.fakes.power import FakeBmcs, write_inventory


@pytest.fixture
def said() -> list[str]:
    return []


@pytest.fixture
def inventory(tmp_path: Path, api: FakeApiServer, bmcs: FakeBmcs) -> Inventory:
    return load_inventory(write_inventory(tmp_path, api.url))  # max_nodes_down: 2


def owed(inventory: Inventory) -> list[str]:
    """What the journal owes, sorted (the nodes of one cut are journaled in parallel)."""
    return sorted(
        f"{e.action} {e.target}" for e in Journal.read(journal_path_for(inventory)) if e.owes_undo
    )


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
    # Journaled by parallel threads: in either order.
    assert sorted(owed(inventory)) == ["power_off node/w1", "power_off node/w2"]
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
    # The BMC took the power-off, then the read-back failed: the node reads OFF.
    bmcs.during[("w1", "off")] = lambda: bmcs.power.__setitem__("w1", PowerState.OFF)
    bmcs.fail[("w1", "off")] = PermanentError("w1: read-back timed out")
    with pytest.raises(PermanentError):
        power_off(inventory, api, ["w1"])
    (entry,) = Journal.read(journal_path_for(inventory))
    assert entry.state is EntryState.FAILED
    with pytest.raises(SafetyViolation, match="1 already down"):
        power_off(inventory, api, ["w2", "w3"])


def test_a_failed_power_off_whose_node_reads_on_is_settled_and_not_counted(
    inventory: Inventory,
    api: FakeApiServer,
    bmcs: FakeBmcs,
    said: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # It may have half-happened (so it is owed), but the node reads ON when next counted.
    bmcs.fail[("w1", "off")] = PermanentError("w1: read-back timed out")
    with pytest.raises(PermanentError):
        power_off(inventory, api, ["w1"])
    assert owed(inventory) == ["power_off node/w1"]
    # Within one power deadline of the attempt a BMC may still apply it: still counted.
    with pytest.raises(SafetyViolation, match="1 already down"):
        power_off(inventory, api, ["w2", "w3"])
    later = time.time() + 31  # the fast profile's power deadline is 30 s
    monkeypatch.setattr("harness.session.restore._wall", lambda: later)
    with Session(inventory, client=api.client(), undo_on_exit=False, say=said.append) as s:
        s.power_off(["w2", "w3"])  # 2 down: within max_nodes_down only if w1 is not counted
    assert bmcs.power["w2"] is bmcs.power["w3"] is PowerState.OFF
    assert owed(inventory) == ["power_off node/w2", "power_off node/w3"]
    entry = next(e for e in Journal.read(journal_path_for(inventory)) if e.target == "node/w1")
    assert entry.state is EntryState.UNDONE and entry.note == "reads on through ipmi"
    assert any("owed a power-on for w1, which reads on through ipmi" in m for m in said)


def test_a_power_off_refused_before_it_acted_owes_nothing(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    bmcs.fail[("w1", "off")] = not_acted(PermanentError("w1: HTTP 401 refused the credentials"))
    with pytest.raises(PermanentError, match="401"):
        power_off(inventory, api, ["w1"])
    (entry,) = Journal.read(journal_path_for(inventory))
    assert entry.state is EntryState.NOT_DONE and not entry.owes_undo
    assert "401" in (entry.error or "")
    power_off(inventory, api, ["w2", "w3"])  # w1 is not counted as down
    assert bmcs.ops("state").count("w1") == 0  # and was not even read: nothing was owed


def test_a_node_without_a_bmc_that_reads_on_settles_a_power_on(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, monkeypatch: pytest.MonkeyPatch
) -> None:
    power_off(inventory, api, ["w1"])
    bmcs.power["w1"] = PowerState.ON  # it came back by itself (or by hand)
    for module in ("harness.session.power", "harness.session.restore"):  # both ask
        monkeypatch.setattr(
            f"{module}.power_protocol_for_restore",
            lambda _inv, node: (_ for _ in ()).throw(PermanentError(f"{node}: no BMC")),
        )
    with Session(inventory, client=api.client(), undo_on_exit=False) as s:
        s.power_on(["w1"])
    assert owed(inventory) == []
    assert bmcs.ops("on") == []


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


# -- power cycle -----------------------------------------------------------------------------


def test_a_power_cycle_is_safety_checked_and_journaled_then_settled(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, said: list[str]
) -> None:
    journal_states: list[EntryState] = []
    path = journal_path_for(inventory)
    with Session(inventory, client=api.client(), undo_on_exit=False, say=said.append) as s:
        # While the BMC cycles w1, the journal (on disk before it is in memory) already
        # holds the cycle with its power-on undo.
        journal = s.journal
        assert journal is not None
        bmcs.during[("w1", "cycle")] = lambda: journal_states.extend(
            e.state for e in journal.entries() if (e.action, e.target) == ("power_cycle", "node/w1")
        )
        result = s.power_cycle(["w1", "w2"], synchronized=False)
        assert s.nodes_down() == set()
    assert journal_states == [EntryState.PENDING]
    assert sorted(bmcs.ops("cycle")) == ["w1", "w2"]
    entries = sorted(Journal.read(path), key=lambda e: e.target)
    assert [(e.action, e.target, str(e.undo)) for e in entries] == [
        ("power_cycle", "node/w1", "power_on(node='w1')"),
        ("power_cycle", "node/w2", "power_on(node='w2')"),
    ]
    assert all(e.state is EntryState.UNDONE for e in entries)
    assert set(result.acknowledged) == {"w1", "w2"}
    assert any(line.startswith("w1: power cycle acknowledged after ") for line in said)
    assert any(line.endswith("s, state ON") for line in said)


def test_a_power_cycle_that_fails_midway_stays_owed_and_counts_as_down(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, said: list[str]
) -> None:
    def left_off() -> None:
        bmcs.power["w1"] = PowerState.OFF

    bmcs.during[("w1", "cycle")] = left_off
    bmcs.fail[("w1", "cycle")] = PermanentError("w1: no power-on read-back")
    with (
        pytest.raises(PermanentError, match="power cycle failed for 1 node"),
        Session(inventory, client=api.client(), undo_on_exit=False, say=said.append) as s,
    ):
        s.power_cycle(["w1"], synchronized=False)
    (entry,) = Journal.read(journal_path_for(inventory))
    assert (entry.action, entry.state) == ("power_cycle", EntryState.FAILED)
    assert entry.owes_undo
    assert any(line.startswith("w1: power cycle FAILED after ") for line in said)
    with pytest.raises(SafetyViolation, match="1 already down"):
        power_off(inventory, api, ["w2", "w3"])


def test_a_synchronized_power_cycle_releases_the_offs_then_the_ons_together(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, said: list[str]
) -> None:
    with Session(inventory, client=api.client(), undo_on_exit=False, say=said.append) as s:
        result = s.power_cycle(["w1", "w2"])
        assert s.nodes_down() == set()
        timeline = s.timeline
    assert sorted(bmcs.ops("off")) == sorted(bmcs.ops("on")) == ["w1", "w2"]
    assert bmcs.ops("cycle") == []
    # every off before any on: the ons are released once both nodes read back off
    order = [(n, op) for n, op in bmcs.calls if op in ("off", "on")]
    assert [op for _n, op in order] == ["off", "off", "on", "on"]
    off, on = result.phases["off"], result.phases["on"]
    assert result.synchronized and off.synchronized and on.synchronized
    assert (
        set(result.acknowledged)
        == set(off.acknowledged)
        == set(on.acknowledged)
        == {
            "w1",
            "w2",
        }
    )
    for n in ("w1", "w2"):  # the whole cycle: from its power-off sent to read back on
        assert result.sent[n] == off.sent[n] or result.sent[n] <= off.sent[n]
        assert result.acknowledged[n] >= on.confirmed[n]
    sent = timeline.all(transition="power-cycle sent")
    acked = timeline.all(transition="power-cycle acknowledged")
    assert {t.name for t in sent} == {t.name for t in acked} == {"w1", "w2"}
    (skew,) = timeline.all(transition="power-cycle ack skew")
    assert skew.detail["off_skew_ms"] >= 0 and skew.detail["on_skew_ms"] >= 0
    assert all(e.state is EntryState.UNDONE for e in Journal.read(journal_path_for(inventory)))
    assert all(bmcs.power[n] is PowerState.ON for n in ("w1", "w2"))


def test_a_synchronized_power_cycle_never_leaves_a_node_off_when_another_fails(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, said: list[str]
) -> None:
    bmcs.fail[("w1", "off")] = PermanentError("w1: the BMC refused the power-off")
    with (
        pytest.raises(PermanentError, match="power cycle failed for 1 node"),
        Session(inventory, client=api.client(), undo_on_exit=False, say=said.append) as s,
    ):
        s.power_cycle(["w1", "w2"])
    assert bmcs.power["w2"] is PowerState.ON  # powered on by itself, without waiting for w1
    assert "w2" in bmcs.ops("on")


def test_a_power_cycle_held_off_keeps_each_node_off_that_long_even_alone(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, said: list[str]
) -> None:
    """A reboot "for N seconds": the power stays off N seconds from its read-back to the
    power-on request, for one node too (no BMC reset can hold the power off)."""
    with Session(inventory, client=api.client(), undo_on_exit=False, say=said.append) as s:
        result = s.power_cycle(["w1"], off_s=0.4)
        timeline = s.timeline
    assert bmcs.ops("cycle") == [] and bmcs.ops("off") == bmcs.ops("on") == ["w1"]
    off, on = result.phases["off"], result.phases["on"]
    assert on.sent["w1"] - off.confirmed["w1"] >= 0.4
    (held,) = timeline.all(transition="power-cycle held off")
    assert held.name == "w1" and held.detail["seconds"] == 0.4
    assert bmcs.power["w1"] is PowerState.ON
    with Session(inventory, dry_run=True) as s:
        s.power_cycle(["w2"], off_s=30)
    assert s.plan[0] == (
        "power-cycle w2 (off for 30s) through ipmi; undo if it stops midway: power on"
    )


def test_a_power_cycle_is_refused_beyond_the_blast_radius(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    power_off(inventory, api, ["w1"])
    with (
        pytest.raises(SafetyViolation, match="max_nodes_down"),
        Session(inventory, client=api.client(), undo_on_exit=False) as s,
    ):
        s.power_cycle(["w2", "w3"])
    with (
        pytest.raises(SafetyViolation, match="allow_control_plane_majority"),
        Session(inventory, client=api.client(), undo_on_exit=False) as s,
    ):
        s.power_cycle(["cp1", "cp2"])
    assert bmcs.ops("cycle") == []
    assert [e.action for e in Journal.read(journal_path_for(inventory))] == ["power_off"]


def test_a_power_cycle_dry_run_only_plans(inventory: Inventory, bmcs: FakeBmcs) -> None:
    with Session(inventory, dry_run=True) as s:
        s.power_cycle(["w1"])
    assert s.plan[0] == "power-cycle w1 through ipmi; undo if it stops midway: power on"
    assert "verdict: allowed" in s.plan
    assert bmcs.calls == []


# -- progress --------------------------------------------------------------------------------


def test_each_node_is_told_as_its_acknowledgement_arrives(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, said: list[str]
) -> None:
    # w2 answers only once w1's line has been told: the lines come one by one, not at the end.
    told_w1 = threading.Event()
    bmcs.during[("w2", "off")] = lambda: told_w1.wait(5) or None

    def say(line: str) -> None:
        said.append(line)
        if line.startswith("w1: "):
            told_w1.set()

    with Session(inventory, client=api.client(), undo_on_exit=False, say=say) as s:
        s.power_off(["w1", "w2"])
        s.power_on(["w1"])
    assert told_w1.is_set()
    off_lines = [line for line in said if "power-off acknowledged" in line]
    assert [line.split(":")[0] for line in off_lines] == ["w1", "w2"]
    assert re.fullmatch(r"w1: power-off acknowledged after \d+\.\d s, state OFF", off_lines[0])
    assert said[2].startswith("powered off w1, w2 (forced); ack skew ")
    assert re.fullmatch(r"w1: power-on acknowledged after \d+\.\d s, state ON", said[3])
    assert said[4] == "powered on w1"


def test_power_off_failing_on_several_nodes_keeps_the_error_type_and_its_fields(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, said: list[str]
) -> None:
    # A BMC that stops answering: every node's read-back times out. The error that comes
    # out names each node, keeps its type and fields (a TypeError came out instead, once).
    for node in ("w1", "w2"):
        bmcs.fail[(node, "off")] = WaitTimeout(f"{node}: BMC to report OFF", "no session", 30.0)
    with (
        pytest.raises(WaitTimeout) as info,
        Session(inventory, client=api.client(), undo_on_exit=False, say=said.append) as s,
    ):
        s.power_off(["w1", "w2"])
    message = str(info.value)
    assert message.startswith("power off failed for 2 node(s): ")
    assert "w1: timed out after 30.0s waiting for w1: BMC to report OFF" in message
    assert "w2: timed out after 30.0s" in message
    assert info.value.waited_s == 30.0 and info.value.last_seen == "no session"
    assert isinstance(info.value.__cause__, WaitTimeout)


STAGES = ("sent", "acknowledged", "confirmed")


# -- the synchronized cut --------------------------------------------------------------------


def test_a_cut_prepares_every_node_before_any_request_is_sent(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    with Session(inventory, client=api.client(), undo_on_exit=False) as s:
        result = s.power_off(["w1", "w2"])
        marker = s.timeline.first(ACTION, "w1", "power-off ack skew")
    ops = [op for _n, op in bmcs.calls]
    assert sorted(ops) == ["off", "off", "prepare", "prepare"]
    assert ops[:2] == ["prepare", "prepare"]  # the barrier: no request before all are ready
    assert result.synchronized and set(result.confirmed) == {"w1", "w2"}
    assert marker is not None
    assert marker.detail["nodes"] == "w1,w2" and marker.detail["synchronized"] is True
    assert marker.detail["skew_ms"] == round(result.skew_s * 1000, 1)


def test_if_one_node_cannot_be_prepared_no_node_of_the_cut_is_sent_anything(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    bmcs.fail[("w2", "prepare")] = not_acted(PermanentError("w2: Redfish refused (HTTP 401)"))
    with pytest.raises(PermanentError, match="HTTP 401"):
        power_off(inventory, api, ["w1", "w2"])
    assert bmcs.ops("off") == []
    assert bmcs.power["w1"] is bmcs.power["w2"] is PowerState.ON
    states = {e.target: e.state for e in Journal.read(journal_path_for(inventory))}
    assert states == {"node/w1": EntryState.NOT_DONE, "node/w2": EntryState.NOT_DONE}


def test_the_earlier_way_is_still_there_for_comparison(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    with Session(inventory, client=api.client(), undo_on_exit=False) as s:
        result = s.power_off(["w1", "w2"], synchronized=False, graceful=True)
        stages = [s.timeline.first(ACTION, "w1", f"power-off {stage}") for stage in STAGES]
        marker = s.timeline.first(ACTION, "w1", "power-off ack skew")
    assert not result.synchronized
    assert bmcs.ops("prepare") == [] and sorted(bmcs.ops("off")) == ["w1", "w2"]
    sent, acknowledged, confirmed = stages  # each step on the timeline, as in a volley
    assert sent is not None and sent.detail == {"graceful": True, "protocol": ""}
    assert acknowledged is not None and confirmed is not None
    assert set(result.confirmed) == {"w1", "w2"}
    assert marker is not None and marker.detail["synchronized"] is False
