"""What a Ctrl-C must not cut half-way (harness/power/_interrupts.py), with real signals
raised in this process (``signal.raise_signal`` runs the handler before it returns), and
the Redfish driver's session log-in and log-out under them, with fakes at sushy's seams."""

from __future__ import annotations

import logging
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from harness.power import redfish
from harness.power._interrupts import close_sockets_left_by, held_signals
from harness.power.redfish import RedfishDriver


@pytest.fixture(autouse=True)
def python_handlers() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, SIGTERM is the default; both restored afterwards."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def test_a_sigint_during_the_block_is_raised_when_the_block_has_finished() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), held_signals("logging out"):
        signal.raise_signal(signal.SIGINT)
        done.append("the rest of the block")
    assert done == ["the rest of the block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_sigint_stops_the_block_at_once_and_is_not_raised_twice() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), held_signals("logging out"):
        signal.raise_signal(signal.SIGINT)
        done.append("after the first")
        signal.raise_signal(signal.SIGINT)
        done.append("after the second")  # not reached
    assert done == ["after the first"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_held_sigterm_reaches_its_own_handler_once_after_the_block() -> None:
    calls: list[tuple[int, str]] = []

    def on_term(signum: int, _frame: FrameType | None) -> None:
        calls.append((signum, "handler"))

    signal.signal(signal.SIGTERM, on_term)
    with held_signals("logging in"):
        signal.raise_signal(signal.SIGTERM)
        calls.append((0, "block"))
    assert calls == [(0, "block"), (signal.SIGTERM, "handler")]
    assert signal.getsignal(signal.SIGTERM) is on_term


def test_without_a_signal_nothing_happens_and_the_handlers_are_put_back() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with held_signals("logging out"):
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # held
    assert {s: signal.getsignal(s) for s in before} == before


def test_an_ignored_signal_stays_ignored() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with held_signals("logging out"):
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN


def test_outside_the_main_thread_nothing_is_held() -> None:
    seen: list[object] = []

    def run() -> None:
        with held_signals("logging out"):
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]


def _connect_then_interrupted() -> None:
    near, far = socket.socketpair()  # what a request had connected when the Ctrl-C came
    assert near.fileno() != -1 and far.fileno() != -1
    raise KeyboardInterrupt


def test_the_sockets_an_interrupted_request_holds_are_closed() -> None:
    try:
        _connect_then_interrupted()
    except KeyboardInterrupt as exc:
        tb = exc.__traceback__
        assert tb is not None and tb.tb_next is not None
        frame_locals = tb.tb_next.tb_frame.f_locals
        near, far = frame_locals["near"], frame_locals["far"]
        assert close_sockets_left_by(exc) == 2
        assert (near.fileno(), far.fileno()) == (-1, -1)
        assert close_sockets_left_by(exc) == 0  # closed already


# -- the driver's session under a Ctrl-C ---------------------------------------------------


class SignallingAuth:
    """sushy's SessionAuth at its seam: ``close()`` (the DELETE) gets ``signals`` SIGINTs
    while it runs, then finishes, unless one of them stopped it."""

    def __init__(self, signals: int) -> None:
        self.signals = signals
        self.deleted = 0

    def close(self) -> None:
        for _ in range(self.signals):
            signal.raise_signal(signal.SIGINT)
        self.deleted += 1


class Connector:
    def __init__(self) -> None:
        self.timeouts: tuple[float, float] | None = None

    def close(self) -> None:
        pass

    def set_timeouts(self, *, connect_s: float, read_s: float) -> None:
        self.timeouts = (connect_s, read_s)


def session_driver(auth: Any) -> RedfishDriver:
    driver = RedfishDriver("node-a", "https://bmc.example", "ops", "s3cret-pw", auth="session")
    driver._auth, driver._connector, driver._root = auth, Connector(), object()
    return driver


def test_a_ctrl_c_during_the_logout_waits_for_the_delete_then_is_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    auth = SignallingAuth(signals=1)
    driver = session_driver(auth)
    connector = driver._connector
    with caplog.at_level(logging.WARNING), pytest.raises(KeyboardInterrupt):
        driver.close()
    assert auth.deleted == 1
    assert connector.timeouts == (redfish.LOGOUT_REQUEST_S, redfish.LOGOUT_REQUEST_S)
    assert "SIGINT received while node-a: logging the Redfish session out" in caplog.text
    assert "s3cret-pw" not in caplog.text


def test_a_second_ctrl_c_during_the_logout_stops_it_and_says_the_session_stays_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    auth = SignallingAuth(signals=2)
    with caplog.at_level(logging.WARNING), pytest.raises(KeyboardInterrupt):
        session_driver(auth).close()
    assert auth.deleted == 0
    assert "stays open on the BMC until it times out" in caplog.text


def test_a_ctrl_c_during_the_login_is_raised_once_the_driver_holds_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[Any] = []

    class Sushy:  # sushy.Sushy at its seam: the BMC makes the session, then it returns
        def __init__(self, url: str, *, auth: Any, connector: Any) -> None:
            signal.raise_signal(signal.SIGINT)
            made.append(auth)

    monkeypatch.setattr("sushy.Sushy", Sushy)
    driver = RedfishDriver("node-a", "https://bmc.example", "ops", "s3cret-pw", auth="session")
    with pytest.raises(KeyboardInterrupt):
        driver._get_root()
    assert made and driver._auth is made[0]  # known to the driver: close() logs it out
    driver._connector.close()
