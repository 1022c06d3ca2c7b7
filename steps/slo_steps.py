"""Gherkin steps for service-level objectives read from Prometheus.

``Then the web-available SLO held throughout``, ``Then every SLO held throughout`` and
``Then no alert fired`` evaluate the inventory's ``slos`` and ``alerts`` with range queries
over the scenario's window: from the moment the cluster was found healthy (the baseline) to
the step. Each first waits (up to 30 s) until Prometheus has scraped every target, and for
alerts evaluated every rule group, past the window's end; a window too short to hold a
sample is judged on the samples around it, and the result says so. A breach fails the
scenario and says which series, how far and when; an SLO whose
expression Prometheus rejects or that returns no series, an alert name Prometheus does not
know, or an unreachable Prometheus break it (a harness error, not a product failure).

Each SLO is its own Allure step, with its series and the scenario's actions attached as
JSON and drawn as a chart beside the threshold.

The inventory's ``stop_conditions`` need no step: the session watches them during every
scenario (see ``harness.slo.watch``). A breach raises ``StoppedByCondition`` in the step
that is running; the session undoes the disruptions and the run stops after that scenario
(Allure category "Stopped by a stop condition", ``powercut run`` exit code 5).

:mod:`harness.steps.plugin` loads this module as a pytest plugin (its steps, its
``prometheus_client`` fixture and the hook that ends the run), so every feature can use the
steps.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import allure
import orjson
import pytest
from pytest_bdd import parsers, then

from harness.errors import ConfigError, PowercutError
from harness.inventory import Inventory
from harness.inventory.slo import slo_by_name
from harness.kube.timeline import ACTION, Timeline
from harness.report.slo_chart import slo_chart_svg
from harness.scenario.expectations.steady_state import Baseline
from harness.session import StoppedByCondition
from harness.slo.client import PrometheusClient
from harness.slo.evaluate import (
    AlertResult,
    SloResult,
    evaluate_alert,
    evaluate_slo,
    wait_caught_up,
)
from harness.steps.fixtures import inventory_names


class SloBreached(AssertionError):
    """An SLO missed its objective, or an alert fired, during the scenario."""


def pytest_exception_interact(
    node: pytest.Item | pytest.Collector, call: pytest.CallInfo[Any], report: pytest.TestReport
) -> None:
    """A scenario stopped by a stop condition ends the run: the next scenario would hurt
    what the condition protects again (``powercut run`` then exits 5)."""
    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, StoppedByCondition):
        node.session.shouldstop = str(exc)


@pytest.fixture(scope="session")
def prometheus_client(inventory: Inventory) -> Iterator[PrometheusClient]:
    """The inventory's Prometheus; a harness error when it has none."""
    if inventory.prometheus is None:
        raise ConfigError(
            "this step needs the inventory's prometheus section (url and credentials), "
            "and slos or alerts to check",
            source=str(inventory.source or ""),
            field="prometheus",
        )
    with PrometheusClient(inventory.prometheus) as client:
        yield client


def scenario_window(timeline: Timeline, baseline: Baseline) -> tuple[float, float]:
    """Unix times from the moment the cluster was found healthy to now."""
    start = timeline.start_wall + (baseline.at_mono - timeline.start_mono)
    return start, time.time()


def actions(timeline: Timeline) -> list[dict[str, Any]]:
    """The harness's own actions (power-off sent, ...), for the chart's phase markers."""
    return [
        {"wall": t.wall, "name": t.name, "transition": t.transition}
        for t in timeline.all(ACTION)
        if t.transition
    ]


def _attach(result: SloResult, timeline: Timeline) -> None:
    doc = {**result.to_json(), "actions": actions(timeline)}
    name = result.slo.name
    allure.attach(
        orjson.dumps(doc, option=orjson.OPT_INDENT_2),
        name=f"slo-{name}.json",
        attachment_type=allure.attachment_type.JSON,
    )
    allure.attach(
        slo_chart_svg(doc), name=f"slo-{name}.svg", attachment_type=allure.attachment_type.SVG
    )


def _caught_up(client: PrometheusClient, end: float, *, rules: bool) -> None:
    """Wait (within a bound) until Prometheus has scraped, and with ``rules`` evaluated its
    rules, past ``end``: the window is judged on everything Prometheus will know of it."""
    with allure.step("wait for Prometheus to scrape past the window's end"):
        caught = wait_caught_up(client, end, rules=rules)
        with allure.step(caught.message()):
            pass


def _check(
    client: PrometheusClient,
    names: list[str],
    inventory: Inventory,
    timeline: Timeline,
    baseline: Baseline,
) -> None:
    start, end = scenario_window(timeline, baseline)
    _caught_up(client, end, rules=False)
    missed: list[SloResult] = []
    errors: list[PowercutError] = []
    for name in names:
        slo = slo_by_name(inventory.slos, name)
        # One Allure step per SLO (failed when it breached, broken when it could not be
        # evaluated); every SLO is evaluated before the step fails.
        try:
            with allure.step(f"SLO {name}: {slo.objective_text}"):
                result = evaluate_slo(client, slo, start, end)
                _attach(result, timeline)
                if not result.held:
                    missed.append(result)
                    raise SloBreached(result.message())
                with allure.step(result.message()):
                    pass
        except SloBreached:
            continue
        except PowercutError as exc:
            errors.append(exc)
    if missed:
        lines = [r.message() for r in missed]
        lines.extend(f"also not evaluated: {e}" for e in errors)
        raise SloBreached("\n".join(lines))
    if errors:
        raise errors[0]


@then(parsers.parse("the {name} SLO held throughout"))
@inventory_names(name="slo")
def slo_held(
    name: str,
    prometheus_client: PrometheusClient,
    inventory: Inventory,
    timeline: Timeline,
    baseline: Baseline,
) -> None:
    """The SLO ``name`` met its objective at every step of the scenario's window."""
    slo_by_name(inventory.slos, name)  # an unknown name: a harness error naming the valid
    _check(prometheus_client, [name], inventory, timeline, baseline)


@then("every SLO held throughout")
def every_slo_held(
    prometheus_client: PrometheusClient,
    inventory: Inventory,
    timeline: Timeline,
    baseline: Baseline,
) -> None:
    """Every SLO of the inventory met its objective at every step of the scenario's window."""
    if not inventory.slos:
        raise ConfigError(
            "the inventory has no slos to check", source=str(inventory.source or ""), field="slos"
        )
    _check(prometheus_client, [s.name for s in inventory.slos], inventory, timeline, baseline)


@then("no alert fired")
def alerts_quiet(
    prometheus_client: PrometheusClient,
    inventory: Inventory,
    timeline: Timeline,
    baseline: Baseline,
) -> None:
    """None of the inventory's ``alerts`` fired during the scenario's window."""
    if not inventory.alerts:
        raise ConfigError(
            "the inventory has no alerts to check",
            source=str(inventory.source or ""),
            field="alerts",
        )
    start, end = scenario_window(timeline, baseline)
    _caught_up(prometheus_client, end, rules=True)
    rules = prometheus_client.alert_rules()
    fired: list[AlertResult] = []
    for alert in inventory.alerts:
        with contextlib.suppress(SloBreached), allure.step(f"alert {alert.label} must not fire"):
            result = evaluate_alert(prometheus_client, alert, start, end, step=1.0, rules=rules)
            if not result.held:
                fired.append(result)
                raise SloBreached(result.message())
    if fired:
        raise SloBreached("\n".join(r.message() for r in fired))
