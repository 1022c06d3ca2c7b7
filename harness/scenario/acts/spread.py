"""The critical workloads spread over racks again, before a scenario, as a descheduler's
``RemovePodsViolatingTopologySpreadConstraint`` would: one pod at a time of the rack that
holds most of a workload is evicted through the Eviction API (its PodDisruptionBudget
respected), the scheduler places the replacement, and the next eviction waits until the
workload has all its replicas Ready again.

Why it is needed: topology spread constraints act at scheduling only, so after earlier
failovers a Deployment can stay on fewer racks (the lab's ``web`` on 2 of 3) until
something evicts its pods. ``Given every critical workload has Ready replicas in at least 3
racks`` only checks it (the scenario is not judged when it does not hold); ``Given the
critical workloads are spread across racks again`` restores it first (docs/writing-features.md
says when to use which).

Each eviction is kept in the journal as a note (:meth:`harness.session.Session.evict`): it
owes nothing, the workload's controller replaces the pod. A spread that cannot be restored
(a PodDisruptionBudget that keeps refusing, a replacement that is not Ready in time or lands
on the same rack again, too few Ready racks) is a :class:`PreconditionNotMet`: the scenario
is not judged, saying why, never failed as the product.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import allure

from harness.budgets import Budgets
from harness.checks.replay import pods_at
from harness.errors import WaitTimeout
from harness.inventory import Inventory
from harness.kube.observer import Observer
from harness.kube.timeline import Timeline
from harness.scenario.errors import PreconditionNotMet
from harness.scenario.targets.workloads import Workload
from harness.session import Session

__all__ = ["Respread", "respread", "usable_racks"]

_WHY = (
    "topology spread acts at scheduling only; a spread that cannot be restored leaves the "
    "scenario not judged (docs/writing-features.md)"
)


@dataclass(frozen=True)
class Respread:
    """What :func:`respread` did: the pods evicted (``ns/name: from rack``) and each critical
    workload's Ready pods by rack afterwards."""

    evicted: tuple[str, ...] = ()
    racks: Mapping[str, Mapping[str, list[str]]] = field(default_factory=dict)


def usable_racks(inventory: Inventory, observer: Observer) -> set[str]:
    """The racks with a node a pod can be scheduled on now: Ready, not cordoned, without a
    NoSchedule or NoExecute taint (a control-plane node's usual taint included)."""
    out = set()
    for n in inventory.nodes:
        state = observer.node(n.name)
        if state is None or not state.is_ready or state.unschedulable:
            continue
        if any(t.effect in ("NoSchedule", "NoExecute") for t in state.taints):
            continue
        out.add(n.rack or "(no rack)")
    return out


def _by_rack(tl: Timeline, w: Workload, racks: Mapping[str, str]) -> dict[str, list[str]]:
    """The workload's Ready pods (not Terminating) now, by rack."""
    now = tl.clock.monotonic()
    out: dict[str, list[str]] = {}
    for p in pods_at(tl, now, namespace=w.namespace, workload=w.key).values():
        if p.available:
            out.setdefault(racks.get(p.node, "(no rack)"), []).append(p.name)
    return {r: sorted(names) for r, names in sorted(out.items())}


def _shown(by_rack: Mapping[str, Sequence[str]]) -> str:
    return "; ".join(f"{r}: {', '.join(names)}" for r, names in by_rack.items()) or "none"


def _whole_again(tl: Timeline, w: Workload, gone_uid: str, budgets: Budgets) -> None:
    """Wait (within the pod-rescheduled budget) until the evicted pod ``gone_uid`` is no
    longer available and the workload has its replicas Ready again."""

    def whole() -> bool | None:
        pods = pods_at(tl, tl.clock.monotonic(), namespace=w.namespace, workload=w.key)
        ready = [p for p in pods.values() if p.available]
        return True if len(ready) >= w.desired and gone_uid not in {p.uid for p in ready} else None

    def seen() -> str:
        pods = pods_at(tl, tl.clock.monotonic(), namespace=w.namespace, workload=w.key)
        return f"{sum(p.available for p in pods.values())} of {w.desired} Ready"

    tl.wait_until(
        whole,
        tl.clock.monotonic() + budgets.pod_rescheduled,
        f"{w.ref} with its {w.desired} replicas Ready again after an eviction",
        last_seen=seen,
    )


def _victim(tl: Timeline, w: Workload, by_rack: Mapping[str, Sequence[str]]) -> tuple[str, str]:
    """The pod to evict (name, uid): of the rack holding most of the workload's Ready pods,
    the first by name."""
    rack = max(by_rack, key=lambda r: (len(by_rack[r]), r))
    name = by_rack[rack][0]
    now = tl.clock.monotonic()
    uid = next(
        p.uid
        for p in pods_at(tl, now, namespace=w.namespace, workload=w.key).values()
        if p.name == name and p.available
    )
    return name, uid


def _respread_one(
    session: Session,
    tl: Timeline,
    w: Workload,
    racks: Mapping[str, str],
    usable: set[str],
    budgets: Budgets,
) -> list[str]:
    """Evict ``w``'s pods one at a time until its Ready pods cover as many racks as it can
    (its replicas, at most the usable racks); the pods evicted."""
    want = min(w.desired, len(usable))
    evicted: list[str] = []
    for _ in range(w.desired):  # each eviction must add a rack: at most one per replica
        before = _by_rack(tl, w, racks)
        if len(before) >= want:
            return evicted
        if max((len(p) for p in before.values()), default=0) < 2:
            raise PreconditionNotMet(
                f"not judged: {w.ref} cannot be spread over {want} racks again: only "
                f"{sum(len(p) for p in before.values())} of its {w.desired} pods are Ready "
                f"({_shown(before)}); {_WHY}"
            )
        name, uid = _victim(tl, w, before)
        from_rack = next(r for r, names in before.items() if name in names)
        why = f"{w.ref} on {len(before)} of {want} racks ({_shown(before)})"
        try:
            session.evict(w.namespace, name, timeout_s=budgets.drain, why=why)
            _whole_again(tl, w, uid, budgets)
        except WaitTimeout as exc:
            raise PreconditionNotMet(
                f"not judged: {w.ref} could not be spread over {want} racks again: {exc}; {_WHY}"
            ) from None
        evicted.append(f"{w.namespace}/{name}: from {from_rack}")
        after = _by_rack(tl, w, racks)
        if len(after) <= len(before):
            raise PreconditionNotMet(
                f"not judged: {w.ref} could not be spread over {want} racks again: the "
                f"replacement of {name} was placed on a rack it already ran in "
                f"({_shown(after)}): the scheduler spreads it only under a topology spread "
                f"constraint with whenUnsatisfiable: DoNotSchedule; {_WHY}"
            )
    return evicted


def respread(
    session: Session,
    inventory: Inventory,
    observer: Observer,
    tl: Timeline,
    workloads: Sequence[Workload],
    budgets: Budgets,
) -> Respread:
    """Spread every critical Deployment and StatefulSet over as many racks as it can again
    (its replicas, at most the racks with a schedulable Ready node), evicting as a
    descheduler does; each one's racks and the pods evicted shown in the report."""
    racks = {n.name: n.rack or "(no rack)" for n in inventory.nodes}
    usable = usable_racks(inventory, observer)
    evicted: list[str] = []
    after: dict[str, Mapping[str, list[str]]] = {}
    for w in workloads:
        if not w.critical or w.kind == "DaemonSet":
            continue
        evicted += _respread_one(session, tl, w, racks, usable, budgets)
        after[w.ref] = _by_rack(tl, w, racks)
        allure.dynamic.parameter(f"{w.ref} racks", _shown(after[w.ref]), excluded=True)
    allure.dynamic.parameter("evicted to spread", ", ".join(evicted) or "none", excluded=True)
    return Respread(tuple(evicted), after)
