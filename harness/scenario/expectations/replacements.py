"""The lost pods' replacements and the volumes they need, each judged from its own start.

Every expectation here first waits, within the recovery budget, for the event it measures
from (the lost pod no longer blocking its replacement, the replacement scheduled with its
volume attached, the pod holding a volume deleted, the volume released by the lost node),
then measures its phase within the step's limit (:mod:`harness.scenario.expectations.phases`). So an
expectation placed right after the failure waits for the eviction and does not rely on an
earlier step having waited. Both waits show in the report as Allure steps. Each
expectation is data (:class:`AfterStart`: its start and its phase), judged by
:func:`judge`.

Also the lost node's DaemonSet pods turning NotReady, measured from the failure's
acknowledgement on their node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.kube.names import Change
from harness.kube.timeline import Timeline
from harness.scenario import lost_pods as L
from harness.scenario.expectations import phases, start_events, volumes
from harness.scenario.report import Measurements, waiting
from harness.scenario.targets.choice import Outage
from harness.scenario.targets.workloads import PodInfo

Start = Callable[[Timeline, Sequence[PodInfo], Outage, float], None]
Phase = Callable[[Timeline, Sequence[PodInfo], Outage, float, Measurements], object]


@dataclass(frozen=True)
class AfterStart:
    """An expectation measured from its own start event: ``start`` waits (within the
    recovery budget) for that event, ``phase`` measures from it (within the step's limit);
    ``starting`` and ``what`` name the two waits in the report (``{nodes}``: the lost
    nodes)."""

    starting: str
    start: Start
    what: str
    phase: Phase


def _stopped_blocking(tl: Timeline, pods: Sequence[PodInfo], outage: Outage, s: float) -> None:
    """Where rescheduling starts: every lost pod Terminating or gone."""
    start_events.lost_pods_stopped_blocking(tl, pods, s)


def _holders_rescheduled(tl: Timeline, pods: Sequence[PodInfo], outage: Outage, s: float) -> None:
    """The replacements of the pods that held a volume on the lost node scheduled."""
    held = [p for p, _ in L.held_volumes(tl, pods, outage.sent.mono)]
    start_events.replacements_scheduled(tl, held, outage, s)


#: A replacement of each pod scheduled on a node that is not lost, from when the lost pod
#: stopped blocking it (Deployment: Terminating; StatefulSet: gone).
RESCHEDULED = AfterStart(
    starting="the lost pods Terminating or gone",
    start=_stopped_blocking,
    what="replacements scheduled",
    phase=phases.rescheduled,
)
#: Each pod's replacement Ready on a node that is not lost, from the same start.
REPLACED_BY_READY = AfterStart(
    starting="the lost pods Terminating or gone",
    start=_stopped_blocking,
    what="replacements Ready",
    phase=phases.replaced_by_ready,
)
#: Each replacement Ready from when it could start: scheduled and, if it mounts a
#: ReadWriteOnce volume, that volume attached to its node.
REPLACEMENT_READY = AfterStart(
    starting="replacements scheduled, their volumes attached",
    start=start_events.replacement_volumes_attached,
    what="replacements Ready",
    phase=phases.replacement_ready,
)
#: A Multi-Attach error on the replacement of each pod holding a volume on the lost node,
#: from when that replacement was scheduled.
MULTI_ATTACH = AfterStart(
    starting="replacements of the pods holding a volume scheduled",
    start=_holders_rescheduled,
    what="Multi-Attach errors",
    phase=volumes.multi_attach,
)
#: Each volume the lost node held detached from it, from the deletion of the pod that held
#: it (the attach/detach controller cannot let go before).
RELEASED = AfterStart(
    starting="the pods holding a volume deleted",
    start=start_events.held_pods_deleted,
    what="volumes released by {nodes}",
    phase=volumes.released,
)
#: Each held volume attached to its replacement's node, from its release by the lost node.
REATTACHED = AfterStart(
    starting="the held volumes released by the lost nodes",
    start=start_events.held_volumes_released,
    what="volumes re-attached",
    phase=volumes.reattached,
)


def judge(
    expectation: AfterStart,
    tl: Timeline,
    pods: Sequence[PodInfo],
    outage: Outage,
    seconds: float,
    ms: Measurements,
    recovery_s: float,
    *,
    what: str | None = None,
) -> None:
    """Wait up to ``recovery_s`` for ``expectation``'s start, then measure its phase within
    ``seconds`` (``what``: another name for that wait in the report)."""
    with waiting(expectation.starting, recovery_s):
        expectation.start(tl, pods, outage, recovery_s)
    label = what or expectation.what.format(nodes=", ".join(outage.nodes))
    with waiting(label, seconds):
        expectation.phase(tl, pods, outage, seconds, ms)


def daemon_pods_not_ready(tl: Timeline, outage: Outage, seconds: float, ms: Measurements) -> None:
    """Each DaemonSet pod of the lost nodes NotReady within ``seconds`` of the failure's
    acknowledgement on its node."""
    pods = list(outage.targets.daemon_pods)
    with waiting("DaemonSet pods NotReady", seconds):
        timed = L.wait_pod_transitions(
            tl,
            pods,
            {Change.NOT_READY},
            refs={p.uid: outage.acks[p.node] for p in pods},
            limit_s=seconds,
            what="every DaemonSet pod of the node NotReady",
            check="daemonset-not-ready",
        )
    for t in timed:
        ms.record(f"{t.detail['pod']} NotReady", t.duration_s, seconds, started_mono=t.started_mono)
