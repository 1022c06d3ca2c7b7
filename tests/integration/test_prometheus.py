"""The Prometheus client and the SLO / alert evaluation against a real Prometheus.

The tests start Debian's ``prometheus`` on 127.0.0.1 (a free port, files under tmp_path)
scraping a tiny exporter of their own every second, with one alerting rule; a gauge the
tests set decides what Prometheus records. A second server behind TLS and basic auth
checks the credentials and the certificate checks. No Kubernetes, no lab.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from harness.errors import ConfigError, TemporaryError
from harness.inventory.slo import AlertSpec, PrometheusSpec, SloSpec
from harness.lab.bmc.creds import ensure_tls
from harness.lab.prometheus import LabExporter, PrometheusServer, ScrapeJob
from harness.slo.client import (
    PrometheusAuthError,
    PrometheusClient,
    PrometheusUnreachable,
    QueryRejected,
)
from harness.slo.evaluate import (
    NoSeries,
    SloQueryRejected,
    UnknownAlert,
    evaluate_alert,
    evaluate_slo,
    window_verdicts,
)
from harness.slo.watch import Condition, StopWatcher

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Gauge:
    """What the exporter serves: ``test_gauge{app="demo"}``, set by the tests."""

    def __init__(self) -> None:
        self.value = 1.0

    def collect(self) -> dict[str, tuple[str, list[tuple[dict[str, str], float]]]]:
        return {"test_gauge": ("a value the test sets", [({"app": "demo"}, self.value)])}


RULES: list[dict[str, Any]] = [
    {
        "alert": "TestGaugeZero",
        "expr": "test_gauge == 0",
        "for": "1s",
        "labels": {"severity": "critical"},
    }
]


@pytest.fixture(scope="module")
def gauge() -> Gauge:
    return Gauge()


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, gauge: Gauge
) -> Iterator[PrometheusServer]:
    exporter = LabExporter(free_port(), gauge.collect).start()
    root = tmp_path_factory.mktemp("prometheus")
    job = ScrapeJob("demo", [f"127.0.0.1:{exporter.port}"])
    server = PrometheusServer(root, free_port(), [job], rules=RULES)
    try:
        with server:
            yield server
    finally:
        exporter.stop()


@pytest.fixture
def client(prometheus: PrometheusServer) -> Iterator[PrometheusClient]:
    with PrometheusClient(PrometheusSpec(url=prometheus.url)) as c:
        yield c


def wait_until(what: str, fn: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not fn():
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {timeout_s:g} s: {what}")
        time.sleep(0.25)


def gauge_recorded(client: PrometheusClient, value: float) -> Callable[[], bool]:
    def check() -> bool:
        series = client.query("test_gauge")
        return bool(series) and series[0].points[-1][1] == value

    return check


def slo(**kw: Any) -> SloSpec:
    base: dict[str, Any] = {
        "name": "demo-up",
        "expr": 'min(test_gauge{app="demo"})',
        "comparison": ">=",
        "threshold": 1,
        "step": 1,
    }
    base.update(kw)
    return SloSpec.model_validate(base)


def test_instant_and_range_queries_return_the_scraped_series(client: PrometheusClient) -> None:
    wait_until("the first scrape", gauge_recorded(client, 1.0))
    [series] = client.query("test_gauge")
    assert series.labels["app"] == "demo" and series.labels["job"] == "demo"
    assert series.name.startswith('{__name__="test_gauge",app="demo"')
    time.sleep(2.5)
    end = time.time()
    [ranged] = client.query_range("test_gauge", end - 2, end, 0.5)
    assert len(ranged.points) >= 4
    assert all(v == 1.0 for _, v in ranged.points)
    times = [t for t, _ in ranged.points]
    assert times == sorted(times) and end - 2.001 <= times[0] <= times[-1] <= end + 0.001


def test_a_bad_expression_carries_prometheus_own_message(client: PrometheusClient) -> None:
    with pytest.raises(QueryRejected) as info:
        client.query_range("sum(test_gauge", time.time() - 10, time.time(), 1)
    assert info.value.error_type == "bad_data"
    assert "parse error" in info.value.server_message
    assert "sum(test_gauge" in str(info.value)
    with pytest.raises(SloQueryRejected, match=r"SLO broken: Prometheus rejected .*parse error"):
        evaluate_slo(
            client, slo(name="broken", expr="rate(test_gauge)"), time.time() - 10, time.time()
        )


def test_an_unreachable_server_is_named_and_temporary() -> None:
    port = free_port()  # nothing listens there
    spec = PrometheusSpec(url=f"http://127.0.0.1:{port}", timeout=2)
    with PrometheusClient(spec) as c, pytest.raises(PrometheusUnreachable) as info:
        c.query("up")
    assert isinstance(info.value, TemporaryError)
    assert f"127.0.0.1:{port}" in str(info.value)
    assert "refused" in str(info.value).lower()


def test_a_query_with_no_series_is_an_error_not_a_pass(client: PrometheusClient) -> None:
    wait_until("the first scrape", gauge_recorded(client, 1.0))
    end = time.time()
    with pytest.raises(NoSeries, match=r"SLO typo: .*returned no series"):
        evaluate_slo(client, slo(name="typo", expr='test_gauge{app="dmeo"}'), end - 5, end)


def test_a_dip_breaches_the_slo_and_fires_the_alert(client: PrometheusClient, gauge: Gauge) -> None:
    wait_until("the first scrape", gauge_recorded(client, 1.0))
    time.sleep(2)
    start = time.time()
    time.sleep(1)
    gauge.value = 0.0
    wait_until("the dip recorded", gauge_recorded(client, 0.0))
    wait_until(
        "the alert firing",
        lambda: bool(client.query('ALERTS{alertname="TestGaugeZero",alertstate="firing"}')),
    )
    time.sleep(2)
    gauge.value = 1.0
    wait_until("the recovery recorded", gauge_recorded(client, 1.0))
    time.sleep(1.5)
    end = time.time()

    result = evaluate_slo(client, slo(), start, end)
    assert not result.held
    [breach] = result.breaches
    assert breach.worst == 0.0
    assert start < breach.start <= breach.end < end
    assert 2.0 <= breach.duration_s <= 10.0
    assert result.worst == 0.0
    assert "SLO demo-up breached" in result.message() and "was 0" in result.message()

    # A "for" longer than the dip forgives it; one shorter does not.
    assert evaluate_slo(client, slo(**{"for": "30s"}), start, end).held
    assert not evaluate_slo(client, slo(**{"for": "1s"}), start, end).held
    # The same window before the dip held.
    assert evaluate_slo(client, slo(), start - 1.5, start).held

    fired = evaluate_alert(client, AlertSpec(name="TestGaugeZero"), start, end, step=1)
    assert not fired.held
    [(name, labels, first, last)] = fired.fired
    assert name == "TestGaugeZero" and labels["severity"] == "critical"
    assert start < first <= last < end
    by_matcher = evaluate_alert(client, AlertSpec(matcher='severity="critical"'), start, end)
    assert not by_matcher.held
    assert evaluate_alert(client, AlertSpec(matcher='severity="page"'), start, end).held


def test_an_alert_name_prometheus_does_not_know_is_an_error(client: PrometheusClient) -> None:
    end = time.time()
    with pytest.raises(
        UnknownAlert, match=r"no alerting rule 'TestGaugeZro'; it has: TestGaugeZero"
    ):
        evaluate_alert(client, AlertSpec(name="TestGaugeZro"), end - 5, end)


# -- TLS and basic auth ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, gauge: Gauge
) -> Iterator[tuple[PrometheusServer, Path]]:
    root = tmp_path_factory.mktemp("prometheus-tls")
    ca, cert, key = ensure_tls(root, prefix="prom")
    hashed = bcrypt.hashpw(b"s3cret-pw", bcrypt.gensalt(rounds=4)).decode()
    web = {
        "tls_server_config": {"cert_file": str(cert), "key_file": str(key)},
        "basic_auth_users": {"slo": hashed},
    }
    with PrometheusServer(root, free_port(), [], web_config=web) as server:
        yield server, ca


def test_basic_auth_and_a_ca_bundle(
    secured: tuple[PrometheusServer, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, ca = secured
    assert server.url.startswith("https://")
    monkeypatch.setenv("PROM_PW", "s3cret-pw")
    good = PrometheusSpec(url=server.url, username="slo", password_env="PROM_PW", verify_tls=ca)
    with PrometheusClient(good) as c:
        wait_until("the TLS server ready", lambda: c.query("vector(1)")[0].points[0][1] == 1.0)

    monkeypatch.setenv("PROM_PW", "wrong")
    with PrometheusClient(good) as c, pytest.raises(PrometheusAuthError) as info:
        c.query("vector(1)")
    assert "wrong" not in str(info.value) and "s3cret" not in str(info.value)

    # Verification is on by default: the lab's private CA is not in the system trust store.
    default = PrometheusSpec(url=server.url, username="slo", password_env="PROM_PW")
    with PrometheusClient(default) as c, pytest.raises(PrometheusUnreachable, match="TLS"):
        c.query("vector(1)")


def test_a_missing_credential_names_its_variable(secured: tuple[PrometheusServer, Path]) -> None:
    server, ca = secured
    spec = PrometheusSpec(url=server.url, bearer_token_env="NO_SUCH_PROM_TOKEN", verify_tls=ca)
    with pytest.raises(ConfigError, match="NO_SUCH_PROM_TOKEN is not set"):
        PrometheusClient(spec)


def test_nan_values_are_kept_as_nan(client: PrometheusClient) -> None:
    [series] = client.query("vector(0) / 0")
    assert math.isnan(series.points[0][1])


# -- the stop-condition watcher ---------------------------------------------------------------


def test_the_watcher_reports_a_breach_once_and_only_when_it_happens(
    client: PrometheusClient, gauge: Gauge
) -> None:
    wait_until("the first scrape", gauge_recorded(client, 1.0))
    breaches: list[tuple[str, str]] = []
    condition = Condition("SLO demo-up", slo=slo(**{"for": "1s"}))
    watcher = StopWatcher(client, [condition], lambda c, d: breaches.append((c, d)), interval_s=0.5)
    with watcher:
        time.sleep(3)
        assert breaches == [] and watcher.evaluations >= 3
        gauge.value = 0.0
        wait_until("the breach reported", lambda: bool(breaches), timeout_s=20)
        gauge.value = 1.0
    [(label, detail)] = breaches
    assert label == "SLO demo-up"
    assert 'min(test_gauge{app="demo"}) = 0' in detail and "objective value >= 1" in detail
    wait_until("the recovery recorded", gauge_recorded(client, 1.0))


def test_the_watcher_sees_an_alert_fire(client: PrometheusClient, gauge: Gauge) -> None:
    wait_until("the gauge back to 1", gauge_recorded(client, 1.0))
    wait_until(
        "the alert resolved",
        lambda: not client.query('ALERTS{alertname="TestGaugeZero",alertstate="firing"}'),
    )
    breaches: list[tuple[str, str]] = []
    cond = Condition("alert TestGaugeZero", alert=AlertSpec(name="TestGaugeZero"))
    with StopWatcher(client, [cond], lambda c, d: breaches.append((c, d)), interval_s=0.5):
        time.sleep(1.5)
        assert breaches == []
        gauge.value = 0.0
        wait_until("the alert reported", lambda: bool(breaches), timeout_s=20)
        gauge.value = 1.0
    assert breaches == [("alert TestGaugeZero", "alert firing: TestGaugeZero")]


def test_the_watcher_refuses_an_unknown_alert_and_survives_an_unreachable_server(
    client: PrometheusClient,
) -> None:
    cond = Condition("alert Nope", alert=AlertSpec(name="Nope"))
    with pytest.raises(UnknownAlert):
        StopWatcher(client, [cond], lambda c, d: None).start()
    said: list[str] = []
    spec = PrometheusSpec(url=f"http://127.0.0.1:{free_port()}", timeout=1)
    with PrometheusClient(spec) as down:
        watcher = StopWatcher(
            down,
            [Condition("SLO demo-up", slo=slo())],
            lambda c, d: pytest.fail("a server that does not answer is no breach"),
            interval_s=0.2,
            say=said.append,
        )
        with watcher:
            time.sleep(1.5)
    assert len(said) == 1  # said once, not every tick
    assert said[0].startswith("stop condition SLO demo-up not evaluated: Prometheus at")


def test_window_verdicts_record_each_slo_or_why_not(client: PrometheusClient) -> None:
    wait_until("the first scrape", gauge_recorded(client, 1.0))
    time.sleep(1.5)
    end = time.time()
    out = window_verdicts(client, [slo(), slo(name="typo", expr="no_such_metric")], end - 1, end)
    assert out["demo-up"]["held"] is True and out["demo-up"]["breaches"] == 0
    assert out["demo-up"]["worst"] == 1.0 and out["demo-up"]["comparison"] == ">="
    assert out["typo"]["held"] is None and "returned no series" in out["typo"]["error"]
