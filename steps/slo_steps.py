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

from collections.abc import Iterator
from typing import Any

import pytest
from pytest_bdd import parsers, then

from harness.errors import ConfigError
from harness.inventory import Inventory
from harness.inventory.slo import slo_by_name
from harness.kube.timeline import Timeline
from harness.report.slo_chart import slo_chart_svg
from harness.scenario.expectations import slos
from harness.scenario.expectations.steady_state import Baseline
from harness.session import StoppedByCondition
from harness.slo.client import PrometheusClient
from harness.steps.fixtures import inventory_names


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
    slos.slos_held(prometheus_client, [name], inventory, timeline, baseline, chart=slo_chart_svg)


@then("every SLO held throughout")
def every_slo_held(
    prometheus_client: PrometheusClient,
    inventory: Inventory,
    timeline: Timeline,
    baseline: Baseline,
) -> None:
    """Every SLO of the inventory met its objective at every step of the scenario's window."""
    slos.every_slo_held(prometheus_client, inventory, timeline, baseline, chart=slo_chart_svg)


@then("no alert fired")
def alerts_quiet(
    prometheus_client: PrometheusClient,
    inventory: Inventory,
    timeline: Timeline,
    baseline: Baseline,
) -> None:
    """None of the inventory's ``alerts`` fired during the scenario's window."""
    slos.alerts_quiet(prometheus_client, inventory, timeline, baseline)
