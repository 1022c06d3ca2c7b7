"""What the cluster's users must have kept through a scenario, and the cluster as it was
found afterwards: the critical workloads spread over racks before the failure, their
services answering and their replicas Ready throughout, and the return to steady state.

The API's own availability (the probes through the cluster endpoint, a control-plane
node's API server) is :mod:`harness.scenario.expectations.apiprobe`.
"""

from __future__ import annotations

import time

import allure

from harness.checks import available_throughout, probe_health, spread_over_racks
from harness.inventory import Inventory
from harness.kube.observer import Observer
from harness.kube.timeline import ACTION, Timeline, Transition
from harness.scenario.errors import NothingToMeasure
from harness.scenario.expectations import steady_state
from harness.scenario.expectations.steady_state import Baseline
from harness.scenario.report import Measurements, waiting


def spread(inventory: Inventory, tl: Timeline, baseline: Baseline, min_racks: int) -> None:
    """The Ready pods of every critical Deployment and StatefulSet run in at least
    ``min_racks`` racks (each one's racks shown in the report)."""
    racks = {n.name: n.rack or "(no rack)" for n in inventory.nodes}
    for w in baseline.workloads:
        if w.critical and w.kind != "DaemonSet":
            m = spread_over_racks(tl, w.namespace, w.key, racks=racks, min_racks=min_racks)
            allure.dynamic.parameter(f"{w.ref} racks", m.detail.get("racks"), excluded=True)


def services_available(tl: Timeline, baseline: Baseline, seconds: float, ms: Measurements) -> None:
    """Each critical workload's health probe had no run of failures longer than
    ``seconds`` since the scenario started; the others are measured, not judged. No
    critical workload with a health endpoint is nothing to judge."""
    probed = [w for w in baseline.workloads if w.health is not None]
    if not any(w.critical for w in probed):
        raise NothingToMeasure(
            "no critical inventory workload has a health endpoint (workloads[].health)"
        )
    now = tl.clock.monotonic()
    for w in probed:
        budget = seconds if w.critical else None
        m = probe_health(
            tl,
            w.probe,
            start=baseline.at_mono,
            end=now,
            min_success_ratio=0.0,
            max_outage_s=budget,
        )
        ms.record(
            f"{w.ref} longest outage", m.duration_s, budget, m.detail, started_mono=m.started_mono
        )


def replicas_kept(
    tl: Timeline, baseline: Baseline, since: Transition, count: int, ms: Measurements
) -> None:
    """From ``since`` (the failure's request) until now, each critical Deployment and
    StatefulSet had at least ``count`` pods Ready and not Terminating."""
    now = tl.clock.monotonic()
    for w in baseline.workloads:
        if w.critical and w.kind != "DaemonSet":
            m = available_throughout(tl, w.namespace, w.key, min_ready=count, start=since, end=now)
            ms.note(f"{w.ref} fewest Ready", m.detail.get("lowest"))


def back_to_steady(
    inventory: Inventory,
    observer: Observer,
    tl: Timeline,
    baseline: Baseline,
    seconds: float,
    ms: Measurements,
) -> None:
    """The cluster as the scenario found it
    (:func:`~harness.scenario.expectations.steady_state.wait_steady` against the nodes found)
    within ``seconds`` of the harness's last recorded action, or of the steady state found at the
    start when there was none; recorded as "recovery"."""
    last = tl.last(ACTION)
    start = last.mono if last is not None else baseline.at_mono
    with waiting("the cluster as the scenario found it", seconds):
        steady_state.wait_steady(
            inventory,
            observer,
            baseline.workloads,
            timeout_s=max(0.0, start + seconds - time.monotonic()),
            found=baseline.nodes,
            description="the cluster as the scenario found it",
        )
    ms.record("recovery", time.monotonic() - start, seconds, started_mono=start)
