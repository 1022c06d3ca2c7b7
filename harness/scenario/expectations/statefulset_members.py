"""What a lost StatefulSet member must go through: it stays Terminating while its node is
away (nothing may give up on it), no second copy of it starts, its StatefulSet keeps a
majority Ready, and once its node is back it is re-created and Ready.

Each function takes the members a step is about (the one "the member" stands for, or every
lost one: :func:`harness.scenario.targets.subjects.member_or_members`) and judges each in turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.checks import CheckFailed, quorum_kept, still_terminating
from harness.kube.names import Change
from harness.kube.timeline import Timeline
from harness.scenario import lost_pods as L
from harness.scenario.expectations import phases
from harness.scenario.expectations.steady_state import Baseline
from harness.scenario.report import Measurements, waiting
from harness.scenario.targets import subjects
from harness.scenario.targets.choice import Outage, PoweredOn
from harness.scenario.targets.workloads import PodInfo, Workload


def workload_of(baseline: Baseline, pod: PodInfo) -> Workload:
    """The inventory workload ``pod`` belongs to, as the scenario found it."""
    return next(
        w for w in baseline.workloads if w.namespace == pod.namespace and w.key == pod.workload
    )


def stay_terminating(
    tl: Timeline, pods: Sequence[PodInfo], seconds: float, ms: Measurements
) -> None:
    """Each member stays Terminating (never deleted) for ``seconds`` from when it became
    Terminating; one that never did fails at once."""
    for pod in pods:
        since = L.pod_event(tl, pod, {Change.TERMINATING})
        if since is None:
            raise CheckFailed(f"{pod.ref} Terminating first", "not Terminating", 0.0)
        with waiting(f"{pod.ref} still Terminating", seconds):
            m = still_terminating(tl, pod.namespace, pod.name, since=since, hold_s=seconds)
        ms.record(f"{pod.ref} held Terminating", m.duration_s, None, started_mono=m.started_mono)


def no_second_copy(
    tl: Timeline, outage: Outage, pods: Sequence[PodInfo], baseline: Baseline
) -> None:
    """While each member existed no other pod had its name, and its StatefulSet never had
    more pods than replicas."""
    for pod in pods:
        phases.no_second_member(tl, outage, pod, workload_of(baseline, pod))


def majority_kept(tl: Timeline, outage: Outage, baseline: Baseline, ms: Measurements) -> None:
    """A majority (replicas // 2 + 1) of each StatefulSet that lost a member was Ready from
    the failure until now; the fewest Ready of each is noted."""
    lost = subjects.members(outage, baseline.workloads)
    now = tl.clock.monotonic()
    for ref in dict.fromkeys((p.namespace, p.workload) for p in lost):
        w = workload_of(baseline, next(p for p in lost if (p.namespace, p.workload) == ref))
        m = quorum_kept(tl, w.namespace, w.name, replicas=w.desired, start=outage.sent, end=now)
        ms.note(f"{w.ref} fewest Ready", m.detail.get("lowest"))


def recreated(
    tl: Timeline,
    outage: Outage,
    pods: Sequence[PodInfo],
    powered_on: PoweredOn,
    seconds: float,
    ms: Measurements,
) -> None:
    """Each member is deleted only once its node is back, and a new pod with its name is
    Ready within ``seconds`` of that deletion."""
    label = ", ".join(p.ref for p in pods)
    with waiting(f"{label} re-created and Ready", seconds):
        for pod in pods:
            phases.member_recreated(tl, outage, pod, powered_on, seconds, ms)
