"""A stop condition that breaches aborts the scenario through the session: the main thread
stops at once (even blocked in a wait), the undos run (even with keep-on-failure), and a
breach reported once the session is ending is not raised. The watcher is a fake here; the
real one against a real Prometheus is in tests/lab/test_slo_lab.py."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.inventory import Inventory, load_inventory
from harness.journal import Journal
from harness.power.base import PowerState
from harness.session import STOP_SIGNAL, Session, StoppedByCondition, journal_path_for
from tests.fakes.api import FakeApiServer
from tests.fakes.clock import STUCK_S
from tests.fakes.power import FakeBmcs, write_inventory

SLO_SECTIONS = """
prometheus: {url: "http://127.0.0.1:9"}
slos:
  - {name: api-available, expr: 'sum(up{job="apiserver"})', comparison: ">=", threshold: 2}
stop_conditions:
  - slo: api-available
"""


class FakeWatcher:
    """Reports a breach, from a thread of its own, once ``breach`` is set (never if None)."""

    def __init__(
        self, on_breach: Callable[[str, str], None], breach: threading.Event | None
    ) -> None:
        self.on_breach = on_breach
        self.breach = breach
        self.started = False
        self.stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> FakeWatcher:
        self.started = True
        if self.breach is not None:
            self._thread = threading.Thread(target=self._report, args=(self.breach,))
            self._thread.start()
        return self

    def _report(self, breach: threading.Event) -> None:
        if breach.wait(STUCK_S):
            self.on_breach("SLO api-available", "sum(up) = 1; objective >= 2")

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.join()
        self.stopped = True


class Watchers:
    def __init__(self) -> None:
        self.made: list[FakeWatcher] = []
        self.breach: threading.Event | None = None  # set it: the watcher reports a breach

    def factory(
        self, prometheus: Any, conditions: Any, slos: Any, alerts: Any, on_breach: Any, **kw: Any
    ) -> FakeWatcher:
        assert [c.slo for c in conditions] == ["api-available"]
        w = FakeWatcher(on_breach, self.breach)
        self.made.append(w)
        return w


@pytest.fixture
def watchers(monkeypatch: pytest.MonkeyPatch) -> Watchers:
    w = Watchers()
    monkeypatch.setattr("harness.session.stop.watcher_for", w.factory)
    return w


@pytest.fixture
def inventory(tmp_path: Path, api: FakeApiServer, bmcs: FakeBmcs) -> Inventory:
    path = write_inventory(tmp_path, api.url)
    path.write_text(path.read_text() + SLO_SECTIONS)
    return load_inventory(path)


def owed(inventory: Inventory) -> list[str]:
    return [e.target for e in Journal.read(journal_path_for(inventory)) if e.owes_undo]


def test_a_breach_stops_the_main_thread_at_once_and_the_undos_run(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, watchers: Watchers
) -> None:
    said: list[str] = []
    before = signal.getsignal(STOP_SIGNAL)
    watchers.breach = threading.Event()
    blocked_to_the_end = False
    silent, peer = socket.socketpair()
    with (
        silent,
        peer,
        pytest.raises(StoppedByCondition) as info,
        Session(inventory, client=api.client(), keep_on_failure=True, say=said.append) as s,
    ):
        s.power_off(["w1"])
        assert bmcs.power["w1"] is PowerState.OFF
        watchers.breach.set()
        # A step blocked reading a peer that never answers (as a wait reads the API): only
        # the breach's signal ends it (a lock's wait, Event.wait, would not be interrupted).
        silent.settimeout(STUCK_S)
        silent.recv(1)
        blocked_to_the_end = True
    assert not blocked_to_the_end, "the wait ran to its end: the stop did not interrupt it"
    assert info.value.condition == "SLO api-available"
    assert str(info.value) == "stopped by SLO api-available: sum(up) = 1; objective >= 2"
    # keep-on-failure does not keep a stopped scenario's disruptions
    assert bmcs.power["w1"] is PowerState.ON
    assert owed(inventory) == []
    assert watchers.made[0].started and watchers.made[0].stopped
    assert any(line.startswith("STOP: stopped by SLO api-available") for line in said)
    breached = [t for t in s.timeline.all("Action") if t.transition == "breached"]
    assert [t.detail["condition"] for t in breached] == ["SLO api-available"]
    assert signal.getsignal(STOP_SIGNAL) == before  # the handler is put back


def test_off_the_main_thread_the_next_disruption_is_refused(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, watchers: Watchers
) -> None:
    errors: list[BaseException] = []

    def scenario() -> None:
        try:
            with Session(inventory, client=api.client()) as s:
                s.power_off(["w1"])
                s.request_stop("alert LabAPIQuorumLost", "alert firing: LabAPIQuorumLost")
                s.power_off(["w2"])
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    t = threading.Thread(target=scenario)
    t.start()
    t.join(30)
    [error] = errors
    assert isinstance(error, StoppedByCondition)
    assert error.condition == "alert LabAPIQuorumLost"
    assert bmcs.ops("off") == ["w1"]  # w2 was never touched
    assert bmcs.power["w1"] is PowerState.ON
    assert owed(inventory) == []


def test_a_breach_reported_while_the_session_ends_is_not_raised(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, watchers: Watchers
) -> None:
    with Session(inventory, client=api.client()) as s:
        s.power_off(["w1"])
        watcher = watchers.made[0]
    # after the session: a late report changes nothing
    s.request_stop("SLO api-available", "late")
    assert s.stopped_by is None
    assert watcher.stopped and bmcs.power["w1"] is PowerState.ON


def test_no_stop_conditions_no_watcher(
    tmp_path: Path, api: FakeApiServer, bmcs: FakeBmcs, watchers: Watchers
) -> None:
    inventory = load_inventory(write_inventory(tmp_path, api.url))
    with Session(inventory, client=api.client()) as s:
        s.power_off(["w1"])
    assert watchers.made == []
    with Session(load_inventory(inventory.source or ""), client=api.client(), undo_on_exit=False):
        pass
    assert watchers.made == []
