"""The start events of the expectations that measure from something the cluster does (not
from the harness's own action): each waits for its start, up to a horizon, before the phase
in :mod:`harness.scenario.expectations.phases` or :mod:`harness.scenario.expectations.volumes`
measures from it. So an expectation placed right after the failure (with no step between that
already waited) waits rather than failing, and one whose start never comes fails naming the start it
waited for.

- a replacement of every lost pod scheduled on another node (where "Ready", "Multi-Attach
  error" start);
- its ReadWriteOnce volumes attached to its node (where "Ready once it could start" starts);
- every pod that held a volume deleted (where the volume's release starts);
- every held volume released by the lost node (where its re-attachment starts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.checks import CheckFailed
from harness.checks.replay import RELEASED
from harness.errors import WaitTimeout
from harness.kube.timeline import Timeline
from harness.scenario import lost_pods as L
from harness.scenario.targets.choice import Outage
from harness.scenario.targets.workloads import PodInfo


def _wait(
    tl: Timeline,
    missing: Callable[[], list[str]],
    deadline: float,
    what: str,
    within_s: float,
    check: str,
) -> None:
    """Until ``missing()`` is empty (re-evaluated on every transition), else CheckFailed
    naming the start that did not come and what was still missing. ``within_s`` counts from
    when the expectation starts waiting (the step), not from the failure: a scenario may
    hold the nodes off for a while before it."""
    try:
        tl.wait_until(
            lambda: True if not missing() else None,
            deadline,
            what,
            last_seen=lambda: "missing: " + ", ".join(missing()),
        )
    except WaitTimeout as exc:
        raise CheckFailed(
            f"{what} within {within_s:g}s", exc.last_seen, within_s, check=check
        ) from None


def replacements_scheduled(
    tl: Timeline, pods: Sequence[PodInfo], outage: Outage, within_s: float
) -> None:
    """A replacement of each of ``pods`` scheduled off the lost nodes."""

    def missing() -> list[str]:
        found = L.replacements(tl, pods, outage.nodes, outage.sent.mono)
        return [p.ref for p in pods if p.uid not in found]

    _wait(
        tl,
        missing,
        tl.clock.monotonic() + within_s,
        "a replacement of every lost pod scheduled on another node (where its phase starts)",
        within_s,
        "rescheduled",
    )


def replacement_volumes_attached(
    tl: Timeline, pods: Sequence[PodInfo], outage: Outage, within_s: float
) -> None:
    """Each replacement scheduled, and its ReadWriteOnce volumes attached to its node."""
    replacements_scheduled(tl, pods, outage, within_s)

    def missing() -> list[str]:
        found = L.replacements(tl, pods, outage.nodes, outage.sent.mono)
        return [
            f"{pv} on {r.node}"
            for r in found.values()
            for pv in r.lost.pvs
            if L.attachment_event(
                tl, pv, on=r.node, transitions={"attached"}, after=outage.sent.mono
            )
            is None
        ]

    _wait(
        tl,
        missing,
        tl.clock.monotonic() + within_s,
        "the volumes of every replacement attached to its node (where it can start)",
        within_s,
        "volume-moved",
    )


def held_pods_deleted(
    tl: Timeline, pods: Sequence[PodInfo], outage: Outage, within_s: float
) -> None:
    """Every lost pod that held a ReadWriteOnce volume on its node deleted (the attach/detach
    controller cannot release the volume before)."""
    held = {p.uid: p for p, _ in L.held_volumes(tl, pods, outage.sent.mono)}

    def missing() -> list[str]:
        return [p.ref for p in held.values() if L.pod_event(tl, p, {"deleted"}) is None]

    _wait(
        tl,
        missing,
        tl.clock.monotonic() + within_s,
        "every lost pod holding a volume deleted (where the volume's release starts)",
        within_s,
        "volume-released",
    )


def held_volumes_released(
    tl: Timeline, pods: Sequence[PodInfo], outage: Outage, within_s: float
) -> None:
    """Every held volume released (detached or its VolumeAttachment deleted) by the lost
    node it was attached to."""
    held = L.held_volumes(tl, pods, outage.sent.mono)

    def missing() -> list[str]:
        return [
            f"{pv} on {p.node}"
            for p, pv in held
            if L.attachment_event(tl, pv, on=p.node, transitions=RELEASED, after=outage.sent.mono)
            is None
        ]

    _wait(
        tl,
        missing,
        tl.clock.monotonic() + within_s,
        "every held volume released by the lost node (where its re-attachment starts)",
        within_s,
        "volume-moved",
    )


def lost_pods_stopped_blocking(tl: Timeline, pods: Sequence[PodInfo], within_s: float) -> None:
    """Every lost pod stopped blocking its replacement: Terminating (a Deployment's pod) or
    deleted (a StatefulSet member), where rescheduling starts."""

    def missing() -> list[str]:
        return [p.ref for p in pods if L.stopped_blocking(tl, p) is None]

    _wait(
        tl,
        missing,
        tl.clock.monotonic() + within_s,
        "every lost pod Terminating (Deployment) or deleted (StatefulSet), where its "
        "rescheduling starts",
        within_s,
        "rescheduled",
    )
