"""The service prober (real HTTP and TCP on 127.0.0.1) and the check over its samples."""

from __future__ import annotations

import functools
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from harness.checks import CheckFailed, Prober, probe_health
from harness.checks.service import PROBE, outages
from harness.errors import ConfigError
from harness.kube.timeline import Timeline, Transition
from tests.fakes.clock import FakeClock


class Backend:
    """An HTTP server on loopback whose answer can be switched between 200 and 503."""

    def __init__(self) -> None:
        self.status = 200
        self.during: list[Callable[[], object]] = []  # run once each, while a request waits
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                while backend.during:
                    backend.during.pop(0)()
                body = b"ok" if backend.status == 200 else b"no endpoints"
                self.send_response(backend.status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/healthz"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def backend() -> Iterator[Backend]:
    b = Backend()
    yield b
    b.stop()


def _samples(tl: Timeline, clock: FakeClock, pattern: str, step: float = 1.0) -> None:
    for ch in pattern:
        tl.record(PROBE, "web", "ok" if ch == "+" else "fail", detail={"latency_ms": 1.0})
        clock.advance(step)


def test_outages_are_runs_of_failures_until_the_next_success() -> None:
    clock = FakeClock(start=0.0)
    tl = Timeline(clock)
    _samples(tl, clock, "++--+-++---")
    runs = outages(tl.all(PROBE, "web"))
    assert runs == [(2.0, 4.0, False), (5.0, 6.0, False), (8.0, 10.0, True)]


def test_probe_health_ratio_and_longest_outage() -> None:
    clock = FakeClock(start=0.0)
    tl = Timeline(clock)
    _samples(tl, clock, "+++---++++")  # samples at 0..9, outage 3 -> 6
    m = probe_health(tl, "web", start=0.0, end=9.0, min_success_ratio=0.6, max_outage_s=5)
    assert m.duration_s == pytest.approx(3.0) and m.budget_s == 5
    assert m.detail["success_ratio"] == pytest.approx(0.7)
    assert m.detail["longest_outage_at_s"] == pytest.approx(3.0)
    assert m.detail["ongoing"] is False
    with pytest.raises(CheckFailed) as err:
        probe_health(tl, "web", start=0.0, end=9.0, max_outage_s=2)
    assert "outage of 3.0s from 3.0s into the window" in err.value.seen
    assert "success ratio 0.700 (7/10)" in err.value.seen


def test_an_outage_still_going_lasts_until_the_end_of_the_window() -> None:
    clock = FakeClock(start=0.0)
    tl = Timeline(clock)
    _samples(tl, clock, "++---")  # fails from 2, last sample at 4, now 5
    with pytest.raises(CheckFailed) as err:
        probe_health(tl, "web", start=0.0, end=5.0, min_success_ratio=0.0, max_outage_s=2.5)
    assert err.value.detail["longest_outage_s"] == pytest.approx(3.0)
    assert err.value.detail["ongoing"] is True


def test_probe_health_waits_for_the_window_and_fails_early_on_a_long_outage() -> None:
    clock = FakeClock(start=0.0)
    tl = Timeline(clock)
    for i in range(20):
        clock.call_at(
            float(i),
            functools.partial(
                lambda i: tl.record(PROBE, "web", "fail" if 5 <= i < 12 else "ok"), i
            ),
        )
    m = probe_health(tl, "web", start=0.0, end=19.0, min_success_ratio=0.5)
    assert clock.monotonic() == pytest.approx(19.0)
    assert m.detail["samples"] == 20 and m.duration_s == pytest.approx(7.0)

    clock2 = FakeClock(start=0.0)
    tl2 = Timeline(clock2)
    for i in range(100):
        clock2.call_at(
            float(i),
            functools.partial(lambda i: tl2.record(PROBE, "web", "ok" if i < 5 else "fail"), i),
        )
    with pytest.raises(CheckFailed):
        probe_health(tl2, "web", start=0.0, end=99.0, min_success_ratio=0.0, max_outage_s=10)
    assert clock2.monotonic() == pytest.approx(16.0)  # not 99: gave up once 10 s was exceeded


def test_no_samples_is_a_failure() -> None:
    tl = Timeline(FakeClock(start=0.0))
    with pytest.raises(CheckFailed, match="no probe samples"):
        probe_health(tl, "web", start=-10.0, end=0.0)


def test_http_prober_sees_an_outage(backend: Backend) -> None:
    # The prober's thread is paced by a manual fake clock: one sample per second of fake
    # time, each taken before the test moves the clock on, so the samples and the outage
    # are exact whatever the machine's load (real HTTP all the same).
    clock = FakeClock(start=0.0, manual=True)
    tl = Timeline(clock)
    statuses = [200, 200, 200, 503, 503, 200, 200, 200]  # the backend at each second
    with Prober(tl, backend.url, name="web", interval_s=1.0, timeout_s=5) as prober:
        assert prober.scheme == "http"
        for status in statuses[1:]:
            clock.block_until_waiting(1)  # the last sample is in, the next one is due
            backend.status = status
            clock.advance(1.0)
        clock.block_until_waiting(1)
    samples = tl.all(PROBE, "web")
    assert [t.mono for t in samples] == [float(i) for i in range(len(statuses))]
    assert [t.detail.get("status") for t in samples] == statuses
    assert [t.transition for t in samples] == ["ok" if s == 200 else "fail" for s in statuses]
    assert all("latency_ms" in t.detail for t in samples)
    m = probe_health(tl, "web", start=0.0, end=7.0, min_success_ratio=0.75)
    assert m.duration_s == 2.0  # failing from the sample at 3 s to the next success at 5 s
    assert m.detail["outages"] == 1 and m.detail["success_ratio"] == 0.75
    assert m.detail["longest_outage_at_s"] == 3.0
    with pytest.raises(CheckFailed):
        probe_health(tl, "web", start=0.0, end=7.0, max_outage_s=1.5)
    with pytest.raises(CheckFailed):
        probe_health(tl, "web", start=0.0, end=7.0, min_success_ratio=0.76)


def test_a_slow_probe_skips_the_slots_it_missed_rather_than_burst(backend: Backend) -> None:
    clock = FakeClock(start=0.0, manual=True)
    tl = Timeline(clock)
    backend.during.append(lambda: clock.advance(3.5))  # the first answer takes 3.5 s
    with Prober(tl, backend.url, name="web", interval_s=1.0, timeout_s=5):
        clock.block_until_waiting(1)  # slots 1, 2 and 3 missed: one sample at once, at 3.5
        clock.advance(1.0)  # then an interval after it, not at 4 s
        clock.block_until_waiting(1)
    samples = tl.all(PROBE, "web")
    assert [t.mono for t in samples] == [0.0, 3.5, 4.5]  # stamped when sent


def test_tcp_prober_ok_and_refused() -> None:
    tl = Timeline()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        up = Prober(tl, f"127.0.0.1:{port}", name="tcp", timeout_s=0.5)
        assert up.probe_once().transition == "ok"
    down = Prober(tl, f"tcp://127.0.0.1:{port}", name="tcp", timeout_s=0.5)
    t: Transition = down.probe_once()
    assert t.transition == "fail" and "ConnectionRefused" in t.detail["error"]


def test_bad_targets_are_refused() -> None:
    tl = Timeline()
    with pytest.raises(ConfigError, match="cannot probe"):
        Prober(tl, "ftp://x/")
    with pytest.raises(ConfigError, match="cannot probe"):
        Prober(tl, "no-port")
    with pytest.raises(ConfigError, match="positive"):
        Prober(tl, "127.0.0.1:80", interval_s=0)


def test_an_api_outage_judged_right_after_the_failure_waits_for_a_sample_past_its_end() -> None:
    """ "the API answered ..." placed right after the power-off: the window (failure to now)
    is a fraction of a second and holds no sample yet. The judgement waits for the probe's
    next sample (bounded) and ends the window there, instead of failing the product with
    "no probe samples" (seen in the held-out features, issue 24)."""
    from harness.scenario.expectations.apiprobe import API_PROBE, SAMPLE_AFTER_S, longest_outage
    from harness.scenario.report import Measurements

    clock = FakeClock(start=10.0)
    tl = Timeline(clock)
    clock.call_at(10.4, lambda: tl.record(PROBE, API_PROBE, "ok"))  # the next sample
    longest_outage(API_PROBE, "API", 40.0, 9.9, tl, Measurements(timeline=tl))
    assert clock.monotonic() == pytest.approx(10.4)  # waited for it, no longer

    quiet = FakeClock(start=10.0)
    tl2 = Timeline(quiet)  # a probe that never answers: the wait is bounded, then it fails
    with pytest.raises(CheckFailed, match="no probe samples"):
        longest_outage(API_PROBE, "API", 40.0, 9.9, tl2, Measurements(timeline=tl2))
    assert quiet.monotonic() == pytest.approx(10.0 + SAMPLE_AFTER_S)
