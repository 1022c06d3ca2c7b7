"""The report's categories applied to what the real checks raise (harness.checks).

A phase that happened, only later than its budget, is a *budget overrun*; one that did not
happen at all within its budget is a *product failure*, whatever the expectation's text
says. The messages are made the way allure-pytest-bdd makes a scenario's status message
(``ExceptionInfo.exconly()``), from :class:`~harness.checks.CheckFailed` raised by the
check functions on a fake-clock timeline.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from harness.checks import (
    CheckFailed,
    node_not_ready,
    pods_evicted,
    probe_health,
    replacement_ready,
    volume_moved,
)
from harness.checks.base import OVER_BUDGET
from harness.checks.service import PROBE
from harness.kube.timeline import FakeClock, Timeline, Transition
from harness.report.allure_env import (
    BUDGET_OVERRUNS,
    CATEGORIES,
    PRODUCT_FAILURES,
    classify,
)

T0 = 1000.0


class Sim:
    def __init__(self) -> None:
        self.clock = FakeClock(start=T0 - 100)
        self.tl = Timeline(self.clock)

    def now(self, t: float) -> None:
        self.clock.advance(T0 + t - self.clock.monotonic())

    def rec(self, kind: str, name: str, what: str, ns: str = "", **detail: Any) -> Transition:
        return self.tl.record(kind, name, what, namespace=ns, detail=detail)

    def power_off(self) -> Transition:
        self.now(0.0)
        return self.tl.action("w1", "power-off acknowledged")

    def pod(self, name: str, node: str, what: str = "observed", ready: bool = True) -> None:
        self.rec(
            "Pod",
            name,
            what,
            "ns",
            uid=name,
            node=node,
            phase="Running",
            ready=ready,
            terminating=False,
            workload="Deployment/web",
        )

    def pod_event(self, name: str, what: str, node: str) -> None:
        self.rec("Pod", name, what, "ns", uid=name, node=node, workload="Deployment/web")

    def va(self, name: str, what: str, node: str, **extra: Any) -> None:
        self.rec("VolumeAttachment", name, what, pv="pv-1", node=node, **extra)


def allure_message(check: Callable[[], object]) -> str:
    """Run the check, which must fail; its status message as allure-pytest-bdd records it."""
    with pytest.raises(CheckFailed) as err:
        check()
    return err.exconly()


# -- each check: late (it happened after its budget) vs never (within the budget) -----------


def node_not_ready_late() -> str:
    sim = Sim()
    off = sim.power_off()
    sim.now(75.0)
    sim.rec("Node", "w1", "not-ready", status="Unknown")
    return allure_message(lambda: node_not_ready(sim.tl, "w1", since=off, budget_s=60))


def node_not_ready_never() -> str:
    sim = Sim()
    off = sim.power_off()
    return allure_message(lambda: node_not_ready(sim.tl, "w1", since=off, budget_s=60))


def pods_evicted_late() -> str:
    sim = Sim()
    sim.pod("web-a", "w1")
    off = sim.power_off()
    sim.now(400.0)
    sim.pod_event("web-a", "terminating", "w1")
    return allure_message(lambda: pods_evicted(sim.tl, "w1", since=off, budget_s=360))


def pods_evicted_never() -> str:
    sim = Sim()
    sim.pod("web-a", "w1")
    off = sim.power_off()
    return allure_message(lambda: pods_evicted(sim.tl, "w1", since=off, budget_s=360))


def replacement_late() -> str:
    sim = Sim()
    sim.pod("web-a", "w1")
    off = sim.power_off()
    sim.now(320.0)
    sim.pod("web-c", "w3", what="created", ready=False)
    sim.now(330.0)
    sim.pod_event("web-c", "ready", "w3")
    return allure_message(
        lambda: replacement_ready(
            sim.tl, "ns", "Deployment/web", not_on="w1", since=off, budget_s=300
        )
    )


def replacement_never() -> str:
    sim = Sim()
    sim.pod("web-a", "w1")
    off = sim.power_off()
    return allure_message(
        lambda: replacement_ready(
            sim.tl, "ns", "Deployment/web", not_on="w1", since=off, budget_s=300
        )
    )


def volume_late() -> str:
    sim = Sim()
    sim.va("va-1", "observed", "w1", attached=True)
    off = sim.power_off()
    sim.now(450.0)
    sim.va("va-2", "attached", "w2")
    return allure_message(
        lambda: volume_moved(sim.tl, "pv-1", from_node="w1", since=off, budget_s=420)
    )


def volume_never() -> str:
    sim = Sim()
    sim.va("va-1", "observed", "w1", attached=True)
    off = sim.power_off()
    return allure_message(
        lambda: volume_moved(sim.tl, "pv-1", from_node="w1", since=off, budget_s=420)
    )


def _probe(pattern: str) -> str:
    clock = FakeClock(start=0.0)
    tl = Timeline(clock)
    for ch in pattern:
        tl.record(PROBE, "web", "ok" if ch == "+" else "fail")
        clock.advance(1.0)
    end = float(len(pattern))
    return allure_message(
        lambda: probe_health(tl, "web", start=0.0, end=end, min_success_ratio=0.0, max_outage_s=2)
    )


def outage_too_long_then_back() -> str:
    return _probe("++----++")  # a 4 s outage, then the service answers again


def outage_still_going() -> str:
    return _probe("++------")  # still down at the end of the window


LATE = [node_not_ready_late, pods_evicted_late, replacement_late, volume_late]
LATE += [outage_too_long_then_back]
NEVER = [node_not_ready_never, pods_evicted_never, replacement_never, volume_never]
NEVER += [outage_still_going]


@pytest.mark.parametrize("make", LATE, ids=lambda f: f.__name__)
def test_a_phase_that_happened_late_is_a_budget_overrun(make: Callable[[], str]) -> None:
    message = make()
    assert message.startswith("harness.checks.base.CheckFailed: ")
    assert f": {OVER_BUDGET}: expected " in message
    assert classify("failed", message) == BUDGET_OVERRUNS, message


@pytest.mark.parametrize("make", NEVER, ids=lambda f: f.__name__)
def test_a_phase_that_never_happened_is_a_product_failure(make: Callable[[], str]) -> None:
    message = make()
    assert OVER_BUDGET not in message
    assert classify("failed", message) == PRODUCT_FAILURES, message


@pytest.mark.parametrize("make", LATE + NEVER, ids=lambda f: f.__name__)
def test_allure2_and_allure3_agree_on_real_messages(make: Callable[[], str]) -> None:
    message = make()
    for rule in CATEGORIES:
        if rule.message_regex is not None:
            search = re.search(rule.message_regex, message) is not None
            assert search == (re.fullmatch(rule.message_regex, message) is not None)


def test_the_message_still_says_expected_seen_and_waited() -> None:
    message = node_not_ready_late()
    assert message == (
        "harness.checks.base.CheckFailed: node-not-ready: over budget: expected node w1 "
        "NotReady within 60s of power-off acknowledged of w1; seen Node w1 not-ready at "
        "+175.000s (status=Unknown), 75.0s after power-off acknowledged of w1 "
        "(observed for 75.0s)"
    )


def test_mentioning_a_budget_does_not_make_an_overrun() -> None:
    """Only the marker counts: an expectation that names a budget but was never met is a
    product failure."""

    def never() -> None:
        raise CheckFailed("evacuation within its budget of 90s", "never", 90.0, check="evacuation")

    msg = allure_message(never)
    assert classify("failed", msg) == PRODUCT_FAILURES
    late = CheckFailed("evacuation within 90s", "95.2s", 95.2, check="evacuation", late=True)
    assert late.late and late.expected == "evacuation within 90s" and late.waited_s == 95.2
    assert classify("failed", f"harness.checks.base.CheckFailed: {late}") == BUDGET_OVERRUNS
