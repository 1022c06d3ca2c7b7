"""The lost pods' replacements and the volumes they need, each judged from its own start.

Every expectation here first waits, within the recovery budget, for the event it measures
from (the lost pod no longer blocking its replacement, the replacement scheduled with its
volume attached, the pod holding a volume deleted, the volume released by the lost node),
then measures its phase within the step's limit (:mod:`harness.scenario.phases`). So an
expectation placed right after the failure waits for the eviction and does not rely on an
earlier step having waited. Both waits show in the report as Allure steps.

Also the lost node's DaemonSet pods turning NotReady, measured from the failure's
acknowledgement on their node.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.kube.names import Change
from harness.kube.timeline import Timeline
from harness.scenario import lost as L
from harness.scenario import phases, starts
from harness.scenario.report import Measurements, waiting
from harness.scenario.targets import Outage
from harness.scenario.workloads import PodInfo


def _stopped_blocking(tl: Timeline, pods: Sequence[PodInfo], recovery_s: float) -> None:
    """The start of rescheduling: every lost pod Terminating or gone."""
    with waiting("the lost pods Terminating or gone", recovery_s):
        starts.lost_pods_stopped_blocking(tl, pods, recovery_s)


def rescheduled(
    tl: Timeline,
    pods: Sequence[PodInfo],
    outage: Outage,
    seconds: float,
    ms: Measurements,
    recovery_s: float,
) -> None:
    """A replacement of each pod scheduled on a node that is not lost, within ``seconds`` of
    when the lost pod stopped blocking it (Deployment: Terminating; StatefulSet: gone)."""
    _stopped_blocking(tl, pods, recovery_s)
    with waiting("replacements scheduled", seconds):
        phases.rescheduled(tl, pods, outage, seconds, ms)


def replaced_by_ready(
    tl: Timeline,
    pods: Sequence[PodInfo],
    outage: Outage,
    seconds: float,
    ms: Measurements,
    recovery_s: float,
    *,
    what: str = "replacements Ready",
) -> None:
    """Each pod's replacement Ready on a node that is not lost, within ``seconds`` of when
    the lost pod stopped blocking it."""
    _stopped_blocking(tl, pods, recovery_s)
    with waiting(what, seconds):
        phases.replaced_by_ready(tl, pods, outage, seconds, ms)


def replacement_ready(
    tl: Timeline,
    pods: Sequence[PodInfo],
    outage: Outage,
    seconds: float,
    ms: Measurements,
    recovery_s: float,
) -> None:
    """Each replacement Ready within ``seconds`` of when it could start: scheduled and, if it
    mounts a ReadWriteOnce volume, that volume attached to its node."""
    with waiting("replacements scheduled, their volumes attached", recovery_s):
        starts.replacement_volumes_attached(tl, pods, outage, recovery_s)
    with waiting("replacements Ready", seconds):
        phases.replacement_ready(tl, pods, outage, seconds, ms)


def multi_attach(
    tl: Timeline,
    pods: Sequence[PodInfo],
    outage: Outage,
    seconds: float,
    ms: Measurements,
    recovery_s: float,
) -> None:
    """A Multi-Attach error on the replacement of each pod holding a volume on the lost
    node, within ``seconds`` of when the lost pod stopped blocking it."""
    held = [p for p, _ in L.held_volumes(tl, pods, outage.sent.mono)]
    with waiting("replacements of the pods holding a volume scheduled", recovery_s):
        starts.replacements_scheduled(tl, held, outage, recovery_s)
    with waiting("Multi-Attach errors", seconds):
        phases.multi_attach(tl, pods, outage, seconds, ms)


def released(
    tl: Timeline,
    pods: Sequence[PodInfo],
    outage: Outage,
    seconds: float,
    ms: Measurements,
    recovery_s: float,
) -> None:
    """Each volume the lost node held detached from it within ``seconds`` of the deletion
    of the pod that held it."""
    with waiting("the pods holding a volume deleted", recovery_s):
        starts.held_pods_deleted(tl, pods, outage, recovery_s)
    with waiting("volumes released by " + ", ".join(outage.nodes), seconds):
        phases.released(tl, pods, outage, seconds, ms)


def reattached(
    tl: Timeline,
    pods: Sequence[PodInfo],
    outage: Outage,
    seconds: float,
    ms: Measurements,
    recovery_s: float,
) -> None:
    """Each volume the lost node held attached to its replacement's node within ``seconds``
    of its release by the lost node."""
    with waiting("the held volumes released by the lost nodes", recovery_s):
        starts.held_volumes_released(tl, pods, outage, recovery_s)
    with waiting("volumes re-attached", seconds):
        phases.reattached(tl, pods, outage, seconds, ms)


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
