"""The service-level expectations: the inventory's SLOs met their objectives, and none of
its alerts fired, over the scenario's window (from the baseline, the moment the cluster was
found healthy, to now), judged by Prometheus range queries once it has scraped past the
window's end. Each SLO and alert is its own Allure step; an SLO's series and the scenario's
actions are attached as JSON and drawn beside the threshold."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import allure
import orjson

from harness.errors import ConfigError, PowercutError
from harness.inventory import Inventory
from harness.inventory.slo import slo_by_name
from harness.kube.timeline import ACTION, Timeline
from harness.scenario.expectations.steady_state import Baseline
from harness.slo.client import PrometheusClient
from harness.slo.evaluate import (
    AlertResult,
    SloResult,
    evaluate_alert,
    evaluate_slo,
    wait_caught_up,
)

#: Draws an SLO result (with the scenario's actions) as SVG: the report's
#: :func:`harness.report.slo_chart.slo_chart_svg`, which the step hands in (the report is
#: no layer of the scenario engine's).
Chart = Callable[[Mapping[str, Any]], str]


class SloBreached(AssertionError):
    """An SLO missed its objective, or an alert fired, during the scenario."""


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


def _attach(result: SloResult, timeline: Timeline, chart: Chart) -> None:
    doc = {**result.to_json(), "actions": actions(timeline)}
    name = result.slo.name
    allure.attach(
        orjson.dumps(doc, option=orjson.OPT_INDENT_2),
        name=f"slo-{name}.json",
        attachment_type=allure.attachment_type.JSON,
    )
    allure.attach(chart(doc), name=f"slo-{name}.svg", attachment_type=allure.attachment_type.SVG)


def _caught_up(client: PrometheusClient, end: float, *, rules: bool) -> None:
    """Wait (within a bound) until Prometheus has scraped, and with ``rules`` evaluated its
    rules, past ``end``: the window is judged on everything Prometheus will know of it."""
    with allure.step("wait for Prometheus to scrape past the window's end"):
        caught = wait_caught_up(client, end, rules=rules)
        with allure.step(caught.message()):
            pass


def slos_held(
    client: PrometheusClient,
    names: list[str],
    inventory: Inventory,
    timeline: Timeline,
    baseline: Baseline,
    *,
    chart: Chart,
) -> None:
    """The SLOs ``names`` held over the scenario's window: each its own Allure step (failed
    when it breached, broken when it could not be evaluated), every one evaluated before
    this fails naming each that missed."""
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
                _attach(result, timeline, chart)
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


def every_slo_held(
    client: PrometheusClient,
    inventory: Inventory,
    timeline: Timeline,
    baseline: Baseline,
    *,
    chart: Chart,
) -> None:
    """Every SLO of the inventory held; a harness error when it has none."""
    if not inventory.slos:
        raise ConfigError(
            "the inventory has no slos to check", source=str(inventory.source or ""), field="slos"
        )
    slos_held(client, [s.name for s in inventory.slos], inventory, timeline, baseline, chart=chart)


def alerts_quiet(
    client: PrometheusClient, inventory: Inventory, timeline: Timeline, baseline: Baseline
) -> None:
    """None of the inventory's ``alerts`` fired; a harness error when it has none."""
    if not inventory.alerts:
        raise ConfigError(
            "the inventory has no alerts to check",
            source=str(inventory.source or ""),
            field="alerts",
        )
    start, end = scenario_window(timeline, baseline)
    _caught_up(client, end, rules=True)
    rules = client.alert_rules()
    fired: list[AlertResult] = []
    for alert in inventory.alerts:
        with contextlib.suppress(SloBreached), allure.step(f"alert {alert.label} must not fire"):
            result = evaluate_alert(client, alert, start, end, step=1.0, rules=rules)
            if not result.held:
                fired.append(result)
                raise SloBreached(result.message())
    if fired:
        raise SloBreached("\n".join(r.message() for r in fired))
