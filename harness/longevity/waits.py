"""What a longevity cycle waits for, on the observer and the timeline (never a sleep loop):
the outage's phases after the failure, and the steady state before the failure and after
the nodes are back.

The steady state: every inventory node Ready without the
``node.kubernetes.io/{unreachable,not-ready,out-of-service}`` taints, the group's nodes
schedulable (:mod:`harness.scenario.expectations.steady_state`, the scenarios' definition), every
inventory workload at its baseline Ready count with no pod Terminating and its Ready pods over as
many racks as at the start of the cycle, no volume released from a failed node left
unattached, and the last sample of every critical service probe successful. Half-way
through the cleanup budget, a cluster that has not settled by itself gets an operator's
help (:class:`~harness.longevity.remedy.Remedy`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from harness.checks import phase as P
from harness.errors import WaitTimeout
from harness.inventory import Inventory, WorkloadSpec
from harness.kube.names import Change
from harness.kube.observer import NODE, POD, Observer
from harness.kube.timeline import Timeline
from harness.kube.waits import wait_state
from harness.longevity.engine import StopControl
from harness.longevity.groups import Group
from harness.longevity.measure import CyclePlan, ProbeTarget, WorkloadTarget
from harness.longevity.observe import Tracker, rack_of
from harness.longevity.records import PhaseBudgets
from harness.longevity.remedy import Remedy
from harness.scenario.expectations.steady_state import node_problems, workload_problems

__all__ = ["SteadyState", "wait_outage"]


def wait_outage(observer: Observer, plan: CyclePlan, t0: float) -> None:
    """Wait for the outage phases, each until its budget at most (timeouts are fine:
    the measurement says what happened). NotReady and the evacuation are the phases
    :func:`~harness.longevity.measure.measure_cycle` measures (:mod:`harness.checks.phase`),
    waited for on the timeline: the wait and the figure are one definition."""
    b = plan.budgets
    tl = observer.timeline
    nodes = set(plan.group.nodes)
    for node in plan.group.nodes:
        _phase(tl, P.node_not_ready(node, since=t0), NODE, node, t0 + b.not_ready)
    protected = {w.workload for w in plan.workloads if w.protected}
    victims = [
        p
        for n in plan.group.nodes
        for p in observer.pods(on_node=n)
        if p.workload in protected and not p.terminating and not p.is_mirror
    ]
    for v in victims:
        evicted = P.pod_evicted(v, since=t0, after=t0)
        _phase(tl, evicted, POD, v.name, t0 + b.evacuation, namespace=v.namespace)
    deployments = [
        w
        for w in plan.workloads
        if w.kind == "Deployment"
        and w.critical
        and any(p.node in nodes for p in observer.pods(namespace=w.namespace, workload=w.workload))
    ]

    def replaced() -> bool | None:
        for w in deployments:
            ready = [
                p
                for p in observer.pods(namespace=w.namespace, workload=w.workload)
                if p.ready and not p.terminating and p.node not in nodes
            ]
            if len(ready) < w.baseline:
                return None
        return True

    with contextlib.suppress(WaitTimeout):
        wait_state(
            observer,
            replaced,
            deadline=t0 + b.recovery,
            description="critical Deployments back at their baseline off the failed nodes",
            last_seen=lambda: "not all replaced",
        )


def _phase(
    tl: Timeline, phase: P.Phase, kind: str, name: str, deadline: float, namespace: str = ""
) -> None:
    """Until ``phase`` ends on the timeline (already, or waited for) or ``deadline``."""
    if P.end_event(phase, tl.all(kind, name, namespace=namespace or None)) is not None:
        return
    with contextlib.suppress(WaitTimeout):
        tl.wait_for(phase.accepts, deadline, f"{phase.name} {name}")


class SteadyState:
    """The steady state of a run's cluster (see the module docstring): what keeps the
    cluster from it, the wait for it, and the baselines found there."""

    def __init__(
        self,
        inventory: Inventory,
        probes: Sequence[ProbeTarget],
        racks: Mapping[str, str],
        budgets: PhaseBudgets,
        stop: StopControl,
        remedy: Remedy,
        *,
        settle_s: float,
    ) -> None:
        self.inventory = inventory
        self.probes = probes
        self.racks = racks
        self.budgets = budgets
        self.stop = stop
        self.remedy = remedy
        self.settle_s = settle_s

    def problems(
        self,
        observer: Observer,
        probes: Tracker,
        workloads: list[WorkloadTarget],
        group: Group,
    ) -> list[tuple[str, str]]:
        """What keeps the cluster from its steady state: (category, text), empty if none."""
        # The nodes and the workloads: the scenarios' definition
        # (harness.scenario.expectations.steady_state).
        out = node_problems(observer, self.inventory.node_names(), schedulable=group.nodes)
        for w in workloads:
            out.extend(
                workload_problems(
                    observer, w.namespace, w.workload, w.baseline, ref=w.key, exact=False
                )
            )
            avail = [
                p
                for p in observer.pods(namespace=w.namespace, workload=w.workload)
                if p.ready and not p.terminating
            ]
            if w.racks and len(avail) >= w.baseline:
                racks = {rack_of(self.racks, observer, p.node) for p in avail}
                if len(racks) < w.racks:
                    out.append(
                        ("spread", f"{w.key}: Ready pods in {len(racks)} of {w.racks} racks")
                    )
        probes.update()
        for pv in sorted(probes.detached):
            out.append(("volume", f"volume {pv} detached from a failed node, not attached again"))
        for probe in self.probes:
            if not probe.critical:
                continue
            last = probes.last.get(probe.name)
            if last != Change.OK:
                out.append(("probe", f"service {probe.name}: last probe {last or 'none yet'}"))
        return out

    def wait(
        self,
        observer: Observer,
        probes: Tracker,
        workloads: list[WorkloadTarget],
        group: Group,
        *,
        deadline: float,
        stoppable: bool,
    ) -> None:
        """Until the steady state or ``deadline`` (``WaitTimeout``); ``stoppable``: a stop
        request ends the wait at once."""

        def check() -> bool | None:
            return None if self.problems(observer, probes, workloads, group) else True

        def seen() -> str:
            found = self.problems(observer, probes, workloads, group)
            return "; ".join(text for _, text in found) or "steady"

        wait_state(
            observer,
            check,
            deadline=deadline,
            description="the steady state (nodes Ready and untainted, workloads at baseline)",
            last_seen=seen,
            terminal=(lambda: "stop requested" if self.stop.requested else None)
            if stoppable
            else None,
        )

    def settle(
        self,
        tl: Timeline,
        observer: Observer,
        tracker: Tracker,
        workloads: list[WorkloadTarget],
        group: Group,
        *,
        since: float,
        nodes: Sequence[str],
        remediation: dict[str, list[str]],
        stoppable: bool,
        prefix: str = "",
    ) -> None:
        """Wait for the steady state until ``since + settle_s``; half-way through the cleanup
        budget, help it along (:meth:`Remedy.remediate`). Raises ``WaitTimeout``."""
        deadline = since + self.settle_s
        nudge_at = min(deadline, since + min(self.budgets.cleanup / 2, self.settle_s / 3))
        try:
            self.wait(observer, tracker, workloads, group, deadline=nudge_at, stoppable=stoppable)
            return
        except WaitTimeout:
            pass
        self.remedy.remediate(
            tl,
            observer,
            workloads,
            nodes,
            remediation,
            lambda: self.problems(observer, tracker, workloads, group),
            prefix,
        )
        self.wait(observer, tracker, workloads, group, deadline=deadline, stoppable=stoppable)

    def targets(
        self, observer: Observer, resolved: list[tuple[WorkloadSpec, str, int]]
    ) -> list[WorkloadTarget]:
        """The inventory's workloads as found at steady state: each baseline, and the racks
        its Ready pods span (a DaemonSet's: none counted)."""
        out = []
        for spec, workload, desired in resolved:
            racks = 0
            if spec.kind != "DaemonSet":
                avail = [
                    p
                    for p in observer.pods(namespace=spec.namespace, workload=workload)
                    if p.ready and not p.terminating
                ]
                racks = len({rack_of(self.racks, observer, p.node) for p in avail})
            out.append(
                WorkloadTarget(
                    spec.namespace, workload, desired, spec.critical, spec.min_available, racks
                )
            )
        return out
