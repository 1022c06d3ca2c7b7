"""SLO and alert steps judge a window only once Prometheus has scraped past its end (issue
24, item 5), against a real Prometheus scraping a real exporter: a window that ends right
after Prometheus started (as on a lab a minute old) is judged on a sample taken after it
ends, not refused as "no series"; and a window too short to hold a sample is judged on the
samples around it, saying so (on top of the real client, a fake that answers nothing for
the short window shows that path on its own)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from harness.inventory.slo import PrometheusSpec, SloSpec
from harness.lab.prometheus import LabExporter, PrometheusServer, ScrapeJob
from harness.slo.client import PrometheusClient, Series
from harness.slo.evaluate import AROUND_S, NoSeries, evaluate_slo, wait_caught_up
from tests.integration.test_prometheus import RULES, free_port

pytestmark = pytest.mark.slow

SLO = SloSpec.model_validate(
    {"name": "demo-up", "expr": 'min(test_gauge{app="demo"})', "comparison": ">=",
     "threshold": 1, "step": "1s"}
)  # fmt: skip


def _port(offset: int) -> int:
    base = os.environ.get("POWERCUT_TEST_PROM_PORT")
    return int(base) + offset if base else free_port()


def test_a_window_ending_as_prometheus_starts_waits_for_the_scrape_after_it(
    tmp_path: Path,
) -> None:
    def collect() -> dict[str, tuple[str, list[tuple[dict[str, str], float]]]]:
        return {"test_gauge": ("a gauge", [({"app": "demo"}, 1.0)])}

    exporter = LabExporter(_port(0), collect).start()
    job = ScrapeJob("demo", [f"127.0.0.1:{exporter.port}"])
    try:
        with (
            PrometheusServer(tmp_path / "prom", _port(1), [job], rules=RULES) as prom,
            PrometheusClient(PrometheusSpec(url=prom.url)) as client,
        ):
            end = time.time()
            start = end - 1.4  # the short scenario of the issue
            caught = wait_caught_up(client, end, rules=True)
            assert caught.complete, caught.message()
            scraped, evaluated = caught.scraped, caught.evaluated
            assert scraped is not None and scraped >= end
            assert evaluated is not None and evaluated >= end
            assert caught.waited_s < 30
            result = evaluate_slo(client, SLO, start, end)
            assert result.held and result.series, result.message()
            # and the bound holds: a window ending in the future is never caught up
            later = wait_caught_up(client, time.time() + 60, rules=False, bound_s=1.0)
            assert not later.complete and 1.0 <= later.waited_s < 5
            assert "had not caught up" in later.message()
    finally:
        exporter.stop()


class _Quiet:
    """A client whose Prometheus has samples only outside [quiet_from, quiet_to]."""

    def __init__(self, quiet_from: float, quiet_to: float) -> None:
        self.quiet = (quiet_from, quiet_to)
        self.asked: list[tuple[float, float]] = []

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        self.asked.append((start, end))
        points = tuple((t, 1.0) for t in (start, end) if not (self.quiet[0] <= t <= self.quiet[1]))
        return [Series({"app": "demo"}, points)]


def test_a_window_too_short_for_a_sample_is_judged_on_the_samples_around_it() -> None:
    end = time.time() - 60
    client: Any = _Quiet(end - 0.5, end)
    result = evaluate_slo(client, SLO, end - 0.5, end)
    assert result.held and "held no sample: judged on the samples from 1" in result.message()
    assert client.asked[1][0] <= end - 0.5 - AROUND_S
    long_window: Any = _Quiet(end - 100, end)
    with pytest.raises(NoSeries):  # a window long enough to hold samples is never widened
        evaluate_slo(long_window, SLO, end - 100, end)
