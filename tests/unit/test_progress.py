"""Progress events (harness.progress), their renderers (harness.progress.display) and the quiet
logging of the CLI (harness.cli.log)."""

from __future__ import annotations

import io
import logging
import warnings
from pathlib import Path

import pytest

from harness import progress
from harness.cli.log import configure_logging
from harness.errors import WaitTimeout
from harness.inventory import InlinePasswordWarning
from harness.kube.timeline import FakeClock, Timeline
from harness.power._wait import Deadline, wait_until
from harness.progress import Event
from harness.progress.display import ANNOUNCE_AFTER_S, REMIND_EVERY_S, PlainRenderer, RichRenderer


def test_a_timeline_wait_reports_what_it_waits_for_its_budget_and_how_it_ended() -> None:
    events: list[Event] = []
    clock = FakeClock()
    tl = Timeline(clock)
    with progress.listen(events.append), pytest.raises(WaitTimeout):
        tl.wait_for(lambda _t: False, clock.monotonic() + 40, "node w3 NotReady")
    assert [(e.kind, e.text, e.budget_s, e.outcome) for e in events] == [
        ("wait", "node w3 NotReady", 40.0, ""),
        ("wait-end", "node w3 NotReady", 40.0, "timeout"),
    ]
    assert events[0].key == events[1].key != 0


def test_a_power_wait_reports_too_and_nothing_is_sent_without_a_listener() -> None:
    events: list[Event] = []
    with progress.listen(events.append):
        wait_until(
            lambda: "off", lambda v: v == "off", expected="w1 off", deadline=Deadline(5), poll_s=1
        )
    assert [(e.kind, e.outcome) for e in events] == [("wait", ""), ("wait-end", "done")]
    wait_until(lambda: 1, bool, expected="x", deadline=Deadline(5), poll_s=1)
    assert len(events) == 2  # the listener is gone


def test_a_failing_listener_never_breaks_the_wait(caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("display gone")

    with progress.listen(broken):
        progress.step("When w1 is powered off")
    assert "progress listener" in caplog.text


def test_plain_lines_announce_a_long_wait_remind_and_say_how_it_ended() -> None:
    out = io.StringIO()
    plain = PlainRenderer(out)
    plain(Event("scenario", "Node loss: a worker is powered off"))
    plain(Event("step", "When w1 is powered off"))
    plain(Event("wait", "node w1 NotReady", at=100.0, budget_s=60, key=1))
    plain(Event("wait", "a quick one", at=100.0, key=2))
    plain(Event("wait-end", "a quick one", at=101.0, key=2, outcome="done"))
    plain.tick(now=100.0 + ANNOUNCE_AFTER_S - 0.1)
    assert "waiting for" not in out.getvalue()
    plain.tick(now=100.0 + ANNOUNCE_AFTER_S)
    plain.tick(now=100.0 + ANNOUNCE_AFTER_S + REMIND_EVERY_S)
    plain(Event("wait-end", "node w1 NotReady", at=145.0, key=1, outcome="done"))
    plain(Event("scenario-end", "Node loss: a worker is powered off", outcome="passed"))
    lines = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines == [
        "scenario: Node loss: a worker is powered off",
        "  step: When w1 is powered off",
        "    waiting for node w1 NotReady (budget 60s)",
        "    still waiting for node w1 NotReady: 33s (budget 60s)",
        "    done: node w1 NotReady after 45s",
        "scenario passed: Node loss: a worker is powered off",
    ]


def test_plain_lines_show_longevity_cycles_and_their_running_statistics() -> None:
    out = io.StringIO()
    plain = PlainRenderer(out)
    plain(Event("cycle", "cycle 3: group-1 (w1, w4)"))
    plain(Event("cycle", "cycle 3: passed", stats={"evacuation": "p50 41.2s  max 44.0s  (n=3)"}))
    text = out.getvalue()
    assert "cycle 3: group-1 (w1, w4)" in text
    assert "evacuation" in text and "p50 41.2s  max 44.0s  (n=3)" in text


def test_the_live_panel_shows_scenario_step_and_each_wait_against_its_budget() -> None:
    from rich.console import Console

    live = RichRenderer(io.StringIO())
    live(Event("scenario", "Rack outage"))
    live(Event("step", "When rack-a loses power"))
    live(Event("wait", "pods of web Ready elsewhere", budget_s=90, key=7, at=0.0))
    live(Event("cycle", "cycle 2: group-0 (w2)", stats={"recovery": "p50 12.0s"}))
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(live.render())
    text = out.getvalue()
    for needle in (
        "scenario Rack outage",
        "step When rack-a loses power",
        "waiting for pods of web Ready elsewhere",
        "/ 90s",
        "longevity cycle 2: group-0 (w2)",
        "recovery",
        "p50 12.0s",
    ):
        assert needle in text, text
    live(Event("wait-end", "pods of web Ready elsewhere", key=7))
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(live.render())
    assert "waiting for" not in out.getvalue()


@pytest.fixture
def restore_logging() -> object:
    root = logging.getLogger()
    handlers, level, show = list(root.handlers), root.level, warnings.showwarning
    yield None
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    warnings.showwarning = show
    logging.captureWarnings(False)


def test_quiet_by_default_libraries_go_to_the_log_ours_to_the_terminal(
    tmp_path: Path, restore_logging: object
) -> None:
    terminal = io.StringIO()
    log = tmp_path / "powercut.log"
    assert configure_logging(False, log_file=log, stream=terminal) == log
    logging.getLogger("sushy.connector").warning("Reusing existing session to BMC")
    logging.getLogger("harness.session").warning("w1: power-on owed")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("Unverified HTTPS request", ResourceWarning, stacklevel=1)
        warnings.warn(InlinePasswordWarning("w1"), stacklevel=1)
    shown = terminal.getvalue()
    assert "w1: power-on owed" in shown
    assert "power.password is written inline" in shown
    assert len(shown.strip().splitlines()) == 2  # one line each
    assert "Reusing existing session" not in shown
    assert "Unverified HTTPS request" not in shown
    logged = log.read_text()
    assert "sushy.connector: Reusing existing session to BMC" in logged
    assert "ResourceWarning: Unverified HTTPS request" in logged


def test_verbose_shows_the_libraries_on_the_terminal(
    tmp_path: Path, restore_logging: object
) -> None:
    terminal = io.StringIO()
    assert configure_logging(True, log_file=tmp_path / "x.log", stream=terminal) is None
    logging.getLogger("sushy.connector").warning("Reusing existing session to BMC")
    logging.getLogger("paramiko.transport").debug("kex algos")
    assert "Reusing existing session" in terminal.getvalue()
    assert "kex algos" in terminal.getvalue()
    assert not (tmp_path / "x.log").exists()


def test_the_live_panel_prints_a_verdict_while_it_refreshes_and_stops() -> None:
    """A verdict is printed above the running panel; printing takes the display's lock,
    whose refresh takes the renderer's: done in the wrong order this hung pytest."""
    import threading

    out = io.StringIO()
    live = RichRenderer(out)
    live.start()
    done = threading.Event()

    def emit() -> None:
        for i in range(50):
            live(Event("wait", f"wait {i}", budget_s=9, key=i, at=0.0))
            live(Event("scenario-end", f"scenario {i}", outcome="passed"))
        live.stop()
        done.set()

    threading.Thread(target=emit, daemon=True).start()
    assert done.wait(20), "the live display deadlocked"
    assert "scenario 49" in out.getvalue()
