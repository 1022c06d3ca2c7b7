"""The expectations about volumes after a failure: each waits on the timeline (up to its
limit) and records what it measured in :class:`~harness.scenario.report.Measurements`.

The volumes judged are those the lost pods held: a ReadWriteOnce volume attached to a lost
node at the failure (:func:`harness.scenario.lost_pods.held_volumes`). A Multi-Attach error on
each replacement, the volume still held while its pod has not gone, its release once the
pod is deleted (or the out-of-service taint is set), and its attachment to the
replacement's node. None held is nothing to measure
(:class:`~harness.scenario.errors.NothingToMeasure`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import allure

from harness.checks import CheckFailed, volume_moved
from harness.checks import phase as P
from harness.checks.base import fail_if
from harness.checks.replay import RELEASED
from harness.errors import WaitTimeout
from harness.kube.observer import NODE, POD, VOLUME_ATTACHMENT
from harness.kube.timeline import Timeline, Transition, match
from harness.scenario import lost_pods as L
from harness.scenario.errors import NothingToMeasure
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage
from harness.scenario.targets.workloads import PodInfo

__all__ = ["multi_attach", "reattached", "released", "still_held"]


def _held(tl: Timeline, pods: Sequence[PodInfo], outage: Outage) -> list[tuple[PodInfo, str]]:
    held = L.held_volumes(tl, pods, outage.sent.mono)
    if not held:
        raise NothingToMeasure(
            "none of the lost pods had a ReadWriteOnce volume attached to a lost node"
        )
    return held


def multi_attach(
    tl: Timeline, pods: Sequence[PodInfo], outage: Outage, seconds: float, ms: Measurements
) -> None:
    """A Multi-Attach error event on each held volume's replacement pod (matched by its uid:
    the events and pods watches race, so the event may be read before the pod is), within
    ``seconds`` of the lost pod stopping to block it; the messages are attached to the
    report."""
    held = _held(tl, pods, outage)
    found = L.replacements(tl, [p for p, _ in held], outage.nodes, outage.sent.mono)
    messages, problems, missing = [], [], False
    for pod, pv in held:
        r = found.get(pod.uid)
        if r is None:
            raise CheckFailed(f"a replacement of {pod.ref} scheduled", "none", 0.0)

        def about(t: Transition, uid: str = r.uid, pv: str = pv) -> bool:
            return t.detail.get("uid") == uid and t.detail.get("volume") == pv

        event: Transition | None = None
        with contextlib.suppress(WaitTimeout):  # reported below
            event = tl.wait_for(
                match(POD, r.name, "multi-attach", namespace=pod.namespace, where=about),
                r.ref.mono + seconds,
                f"a Multi-Attach error for {pv} on {r.name}",
            )
        if event is None:
            problems.append(f"no Multi-Attach error for {pv} on {r.name}@{r.node}")
            missing = True
            continue
        took = max(0.0, event.mono - r.ref.mono)
        ms.record(
            f"{r.name} Multi-Attach error for {pv} reported",
            took,
            seconds,
            started_mono=r.ref.mono,
        )
        if took > seconds:
            problems.append(f"{r.name}: Multi-Attach error for {pv} after {took:.1f}s")
        messages.append(f"{pod.namespace}/{r.name} on {r.node}: {event.detail.get('message')}")
    if messages:
        allure.attach(
            "\n".join(messages),
            name="Multi-Attach errors",
            attachment_type=allure.attachment_type.TEXT,
        )
    fail_if(
        problems,
        f"a Multi-Attach error for every held volume within {seconds:g}s",
        seconds,
        "multi-attach-seen",
        late=not missing,
    )


def still_held(tl: Timeline, pods: Sequence[PodInfo], outage: Outage, ms: Measurements) -> None:
    """Each held volume is still attached to its lost node now: nothing has detached it
    since the failure (while its pod has not gone, the attach/detach controller keeps the
    volume where the node last reported it in use). How long it has been held since the
    failure is recorded."""
    now = tl.clock.monotonic()
    problems = []
    for pod, pv in _held(tl, pods, outage):
        release = L.attachment_event(
            tl, pv, on=pod.node, transitions=RELEASED, after=outage.sent.mono
        )
        if release is not None:
            problems.append(
                f"{pv} released by {pod.node} {release.mono - outage.sent.mono:.1f}s after "
                f"the failure ({release.transition}) while {pod.ref} had not gone"
            )
            continue
        ms.record(
            f"{pv} still attached to {pod.node}",
            now - outage.sent.mono,
            None,
            started_mono=outage.sent.mono,
        )
    fail_if(problems, "each held volume still attached to its lost node", 0.0, "volume-held")


def released(
    tl: Timeline, pods: Sequence[PodInfo], outage: Outage, seconds: float, ms: Measurements
) -> None:
    """The lost node's VolumeAttachment of each held volume detached or deleted within
    ``seconds`` of the deletion of the pod that held it (the attach/detach controller cannot
    let go of a volume before). With an out-of-service taint on the node, the time from the
    taint is recorded too (it includes PodGC's wait for its next 20-second pass)."""
    problems, missing = [], False
    for pod, pv in _held(tl, pods, outage):
        ref = L.pod_event(tl, pod, {"deleted"})
        if ref is None:
            raise CheckFailed(
                f"{pod.ref} deleted before {pv} can be released", "not deleted yet", 0.0
            )
        # Any release after the power cut: the VolumeAttachment and pod watches race, so the
        # detach may be read a few milliseconds before the pod's deletion.
        phase = P.volume_released(pv, pod.node, since=ref.mono, after=outage.sent.mono)
        release = P.end_event(phase, tl.all(VOLUME_ATTACHMENT))
        if release is None:
            with contextlib.suppress(WaitTimeout):  # reported below
                release = tl.wait_for(
                    phase.accepts, ref.mono + seconds, f"volume {pv} released by {pod.node}"
                )
        if release is None:
            problems.append(f"{pv} still attached to {pod.node} {seconds:g}s after {pod.ref} went")
            missing = True
            continue
        freed = phase.reached(release)
        took = freed.duration_s
        ms.record(f"{pv} released by {pod.node}", took, seconds, started_mono=freed.started_mono)
        taint = P.end_event(
            P.taint_added(pod.node, L.OUT_OF_SERVICE, since=outage.sent.mono),
            tl.all(NODE, pod.node),
        )
        if taint is not None and taint.mono < release.mono:
            ms.record(
                f"{pv} released after the out-of-service taint",
                release.mono - taint.mono,
                None,
                started_mono=taint.mono,
            )
        if took > seconds:
            problems.append(f"{pv} released by {pod.node} {took:.1f}s after {pod.ref} went")
    fail_if(
        problems,
        f"each held volume released within {seconds:g}s",
        seconds,
        "volume-released",
        late=not missing,
    )


def reattached(
    tl: Timeline, pods: Sequence[PodInfo], outage: Outage, seconds: float, ms: Measurements
) -> None:
    """Each held volume attached to its replacement's node within ``seconds`` of its
    release by the lost node."""
    for pod, pv in _held(tl, pods, outage):
        release = P.end_event(
            P.volume_released(pv, pod.node, since=outage.sent.mono), tl.all(VOLUME_ATTACHMENT)
        )
        if release is None:
            raise CheckFailed(
                f"volume {pv} released by {pod.node} before it can move",
                f"still attached to {pod.node}",
                0.0,
                check="volume-moved",
            )
        m = volume_moved(tl, pv, from_node=pod.node, since=release, budget_s=seconds)
        ms.check(f"{pv} re-attached", m)
        r = L.replacements(tl, [pod], outage.nodes, outage.sent.mono).get(pod.uid)
        if r is not None and m.detail.get("to_node") != r.node:
            raise CheckFailed(
                f"volume {pv} attached to {r.node}, where {r.name} runs",
                f"attached to {m.detail.get('to_node')}",
                m.duration_s,
                check="volume-moved",
            )
