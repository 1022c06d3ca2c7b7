"""The timeline: recording, queries, waits (fake clock and real threads), JSON export."""

from __future__ import annotations

import threading

import orjson
import pytest

from harness.errors import WaitTimeout
from harness.kube.timeline import (
    ACTION,
    Timeline,
    Transition,
    WaitFailed,
    match,
)
from tests.fakes.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=100.0, wall=1_700_000_000.0)


@pytest.fixture
def tl(clock: FakeClock) -> Timeline:
    return Timeline(clock)


def test_record_stamps_with_the_clock_and_keeps_detail(tl: Timeline, clock: FakeClock) -> None:
    clock.advance(2.5)
    t = tl.record("Node", "w1", "not-ready", detail={"status": "Unknown"})
    assert (t.mono, t.wall) == (102.5, 1_700_000_002.5)
    assert (t.kind, t.namespace, t.name, t.transition) == ("Node", "", "w1", "not-ready")
    assert t.detail == {"status": "Unknown"}
    assert len(tl) == 1
    assert t.ref == "Node w1"
    assert "not-ready at +2.500s" in tl.describe(t)


def test_actions_are_recorded_as_action_transitions(tl: Timeline) -> None:
    sent = tl.action("w1", "power-off sent", driver="redfish")
    assert sent.kind == ACTION
    assert sent.detail == {"driver": "redfish"}
    assert tl.first(ACTION, "w1", "power-off sent") is sent


def test_queries_filter_and_order_by_time(tl: Timeline, clock: FakeClock) -> None:
    a = tl.record("Pod", "p1", "ready", namespace="ns", detail={"node": "w1"})
    clock.advance(1)
    b = tl.record("Pod", "p2", "ready", namespace="ns", detail={"node": "w2"})
    clock.advance(1)
    c = tl.record("Pod", "p1", "not-ready", namespace="ns", detail={"node": "w1"})
    # recorded late but stamped early (e.g. another watch thread): ordered by mono
    early = tl.record("Node", "w1", "not-ready", mono=100.5)
    assert tl.all("Pod") == [a, b, c]
    assert tl.all() == [a, early, b, c]
    assert tl.first("Pod", transition="ready", after=a) is b
    assert tl.first("Pod", transition="ready", after=a.mono) is b
    assert tl.last("Pod", "p1") is c
    assert tl.all("Pod", before=c) == [a, b]
    assert tl.first("Pod", where=lambda t: t.detail["node"] == "w2") is b
    assert tl.first("Pod", namespace="other") is None
    assert tl.first("Service") is None
    assert match("Pod", "p1", "ready")(a)
    assert not match("Pod", "p1", "ready", after=a)(a)  # bounds are strict


def test_wait_for_returns_an_existing_match_at_once(tl: Timeline, clock: FakeClock) -> None:
    t = tl.record("Node", "w1", "not-ready")
    assert tl.wait_for(match("Node", "w1", "not-ready"), clock.monotonic() + 60, "w1 down") is t
    assert clock.monotonic() == 100.0


def test_wait_for_blocks_until_a_transition_arrives(tl: Timeline, clock: FakeClock) -> None:
    clock.call_later(42.0, lambda: tl.record("Node", "w1", "not-ready"))
    t = tl.wait_for(match("Node", "w1", "not-ready"), 100.0 + 60, "node w1 NotReady")
    assert t.mono == pytest.approx(142.0)
    assert clock.monotonic() == pytest.approx(142.0)


def test_wait_for_times_out_with_expected_last_seen_and_waited(
    tl: Timeline, clock: FakeClock
) -> None:
    clock.call_later(5.0, lambda: tl.record("Node", "w1", "taint-added"))
    with pytest.raises(WaitTimeout) as err:
        tl.wait_for(
            match("Node", "w1", "not-ready"),
            clock.monotonic() + 30,
            "node w1 NotReady",
            last_seen=lambda: "node w1 Ready=True",
        )
    assert err.value.expected == "node w1 NotReady"
    assert err.value.last_seen == "node w1 Ready=True"
    assert err.value.waited_s == pytest.approx(30.0)
    assert clock.monotonic() == pytest.approx(130.0)


def test_wait_for_default_last_seen_counts_transitions(tl: Timeline, clock: FakeClock) -> None:
    tl.record("Node", "w1", "ready")
    with pytest.raises(WaitTimeout, match="no match among 1 transitions"):
        tl.wait_for(match("Node", "w1", "not-ready"), clock.monotonic() + 1, "w1 down")


def test_terminal_transition_ends_the_wait_at_once(tl: Timeline, clock: FakeClock) -> None:
    clock.call_later(3.0, lambda: tl.record("Pod", "p", "phase", detail={"phase": "Failed"}))
    with pytest.raises(WaitFailed) as err:
        tl.wait_for(
            match("Pod", "p", "ready"),
            clock.monotonic() + 300,
            "pod p Ready",
            terminal=lambda t: t.detail.get("phase") == "Failed",
        )
    assert err.value.waited_s == pytest.approx(3.0)
    assert "phase" in err.value.seen
    assert clock.monotonic() == pytest.approx(103.0)


def test_wait_until_reevaluates_state_after_each_append(tl: Timeline, clock: FakeClock) -> None:
    state = {"ready": 0}

    def bump() -> None:
        state["ready"] += 1
        tl.record("Pod", f"p{state['ready']}", "ready")

    for delay in (1.0, 2.0, 3.0):
        clock.call_later(delay, bump)
    got = tl.wait_until(
        lambda: state["ready"] if state["ready"] >= 3 else None,
        clock.monotonic() + 10,
        "3 ready",
        last_seen=lambda: f"{state['ready']} ready",
    )
    assert got == 3
    assert clock.monotonic() == pytest.approx(103.0)
    with pytest.raises(WaitTimeout, match="last seen: 3 ready"):
        tl.wait_until(
            lambda: None,
            clock.monotonic() + 5,
            "never",
            last_seen=lambda: f"{state['ready']} ready",
        )
    with pytest.raises(WaitFailed, match="observer stopped"):
        tl.wait_until(
            lambda: None,
            clock.monotonic() + 5,
            "never",
            last_seen=str,
            terminal=lambda: "observer stopped",
        )


def test_wait_for_wakes_on_an_append_from_another_thread() -> None:
    clock = FakeClock(manual=True)  # only an append can end the wait: no one moves the clock
    tl = Timeline(clock)
    test = threading.current_thread()

    def append_once_it_waits() -> None:
        clock.block_until_waiting(thread=test)
        tl.record("Node", "w1", "ready")

    other = threading.Thread(target=append_once_it_waits)
    other.start()
    t = tl.wait_for(match("Node", "w1", "ready"), clock.monotonic() + 5, "w1 Ready")
    other.join()
    assert t.name == "w1"
    assert clock.monotonic() == FakeClock().monotonic()  # woken by the append, not timed out


def test_concurrent_appends_lose_nothing() -> None:
    tl = Timeline()

    def writer(i: int) -> None:
        for j in range(500):
            tl.record("Pod", f"p{i}-{j}", "created")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(tl) == 4000
    assert len({t.name for t in tl}) == 4000
    assert len(tl.all("Pod")) == 4000


def test_read_from_returns_whole_batches(tl: Timeline) -> None:
    tl.record("Pod", "a", "created")
    tl.extend([Transition(1.0, 1.0, "Pod", "", n, "deleted", {}) for n in ("a", "b")])
    assert [t.name for t in tl.read_from(1)] == ["a", "b"]
    assert tl.read_from(3) == []


def test_json_export_round_trips(tl: Timeline, clock: FakeClock, tmp_path: object) -> None:
    tl.action("w1", "power-off acknowledged", driver="ipmi")
    clock.advance(41.25)
    tl.record("Node", "w1", "not-ready", detail={"status": "Unknown", "relist": True})
    doc = orjson.loads(tl.to_json())
    assert doc["version"] == 1
    assert [d["t"] for d in doc["transitions"]] == [0.0, 41.25]
    assert doc["transitions"][1]["detail"] == {"status": "Unknown", "relist": True}
    again = Timeline.from_json(tl.to_json())
    assert again.snapshot() == tl.snapshot()
    assert again.start_mono == tl.start_mono
    path = tl.write_json(f"{tmp_path}/timeline.json")
    assert Timeline.from_json(path.read_bytes()).snapshot() == tl.snapshot()
