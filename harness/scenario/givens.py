"""The targets as the Givens name them, each choice shown in the report.

One function per target phrase of the grammar: the nodes "chosen for a reason" (the busiest
worker running a StatefulSet member with a ReadWriteOnce volume, the singleton's, the
PodDisruptionBudget's, a DaemonSet pod's; the rack running the most critical pods; a third
of the workers sparing the critical workloads), and the nodes drawn by count, fraction or
range from a filter (role, rack, names, a label selector). Each chooses through
:mod:`harness.scenario.targets.choice` and shows the nodes and why in the Allure result
(:func:`harness.scenario.report.shown`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.inventory import Inventory
from harness.kube.client import KubeClient
from harness.kube.observer import Observer
from harness.scenario.report import shown
from harness.scenario.targets import choice as choose
from harness.scenario.targets.choice import PodFilter, Targets
from harness.scenario.targets.select import Amount
from harness.scenario.targets.workloads import Workload, workload_pods


@dataclass(frozen=True)
class Reason:
    """Why a Given chooses its one worker: the pod it must run (``subject``, given the
    inventory's workloads), another it must run too (``also``), and whether the busiest or
    the quietest such worker is chosen."""

    why: str
    subject: Callable[[Sequence[Workload]], PodFilter]
    also: PodFilter | None = None
    prefer_busy: bool = True


def _singleton(workloads: Sequence[Workload]) -> PodFilter:
    single = {(w.namespace, w.key) for w in workloads if w.kind == "Deployment" and w.desired == 1}
    return lambda p: (p.namespace, p.workload) in single and bool(p.pvs)


def _protected(workloads: Sequence[Workload]) -> PodFilter:
    protected = {(w.namespace, w.key) for w in workloads if w.pdb is not None}
    return lambda p: (p.namespace, p.workload) in protected


#: The busiest worker running a pod of an inventory StatefulSet that mounts a ReadWriteOnce
#: volume ("the member").
MEMBER = Reason(
    "a StatefulSet member with a ReadWriteOnce volume",
    lambda _: lambda p: p.kind == "StatefulSet" and bool(p.pvs),
)
#: The busiest worker running the pod of a one-replica Deployment with a ReadWriteOnce
#: volume ("the singleton").
SINGLETON = Reason("a singleton Deployment pod with a ReadWriteOnce volume", _singleton)
#: The busiest worker running a pod of a workload with a PodDisruptionBudget and a pod of an
#: inventory DaemonSet.
PDB_PODS = Reason(
    "pods protected by a PodDisruptionBudget and a DaemonSet pod",
    _protected,
    also=lambda p: p.kind == "DaemonSet",
)
#: The quietest worker (fewest other pods) running a pod of an inventory DaemonSet.
DAEMONSET_POD = Reason(
    "a DaemonSet pod", lambda _: lambda p: p.kind == "DaemonSet", prefer_busy=False
)


def worker_for(
    reason: Reason,
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
) -> Targets:
    """The worker :func:`~harness.scenario.targets.choice.worker_running` picks for ``reason``."""
    return shown(
        choose.worker_running(
            inventory,
            observer,
            kube,
            workloads,
            subject=reason.subject(workloads),
            why=reason.why,
            also=reason.also,
            prefer_busy=reason.prefer_busy,
        )
    )


def control_plane_node(inventory: Inventory, observer: Observer) -> Targets:
    """The first (by name) of at least three Ready control-plane nodes."""
    return shown(choose.control_plane_node(inventory, observer))


def busiest_rack(
    inventory: Inventory, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """Every node of the rack running the most pods of critical workloads."""
    return shown(choose.busiest_rack(inventory, workload_pods(kube, workloads), workloads))


def third_of_workers(
    inventory: Inventory, observer: Observer, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """A third of the workers, one per rack, sparing the critical workloads."""
    pods = workload_pods(kube, workloads)
    return shown(choose.third_of_workers(inventory, observer, pods, workloads))


def some(
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
    rng: random.Random,
    seed: int,
    amount: Amount,
    **filters: Any,
) -> Targets:
    """``amount`` of the usable nodes that match ``filters`` (role, rack, names,
    label_selector: :func:`~harness.scenario.targets.choice.select_targets`), drawn from
    ``seed``."""
    return shown(
        choose.select_targets(
            inventory, observer, kube, workloads, rng=rng, seed=seed, amount=amount, **filters
        )
    )
