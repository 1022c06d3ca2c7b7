"""Steady state: what a scenario finds before it disrupts anything, and must leave behind.

Before: every inventory node exists and is Ready without a failure taint
(``node.kubernetes.io/unreachable``, ``not-ready``, ``out-of-service``), every inventory
workload has all its replicas Ready and none Terminating, every volume attachment is
settled, every probed service answers. The :class:`Baseline` also records each node's
cordon flag and taints as found, so "back to steady state" means *as it was found*, not
merely healthy: a node the operator had cordoned must stay cordoned, a taint the harness
added must be gone.

All checks read the observer's watch-fed state; waiting is on the timeline (no polling).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.inventory import Inventory
from harness.kube.names import NODE_DOWN_TAINTS, Change, Kind
from harness.kube.observer import Observer
from harness.kube.waits import wait_state
from harness.scenario.targets.workloads import Workload

FAILURE_TAINT_KEYS = frozenset(NODE_DOWN_TAINTS)


@dataclass(frozen=True)
class NodeFound:
    unschedulable: bool
    taints: frozenset[str]  # key:effect


@dataclass(frozen=True)
class Baseline:
    """The cluster as the scenario found it (once it was healthy)."""

    nodes: Mapping[str, NodeFound]
    workloads: tuple[Workload, ...]
    settled_s: float  # how long the scenario waited for the cluster to be healthy
    snapshot: Mapping[str, Any] = field(default_factory=dict)  # "before" state, for reports
    at_mono: float = 0.0  # when it was recorded (monotonic)


def node_problems(
    observer: Observer,
    names: Sequence[str],
    found: Mapping[str, NodeFound] | None = None,
    *,
    schedulable: Collection[str] = (),
) -> list[tuple[str, str]]:
    """Why the nodes are not steady, as (category, text): absent, not Ready, a failure taint
    (without ``found``) or cordon and taints other than found, cordoned though in
    ``schedulable``. The one definition the scenarios and longevity share."""
    out: list[tuple[str, str]] = []
    for name in names:
        n = observer.node(name)
        if n is None:
            out.append(("node", f"node {name} does not exist"))
            continue
        if not n.is_ready:
            out.append(("node", f"node {name} is not Ready ({n.ready or 'no condition'})"))
        taints = frozenset(t.id for t in n.taints)
        if found is not None and name in found:
            was = found[name]
            if n.unschedulable != was.unschedulable:
                out.append(
                    (
                        "cordon",
                        f"node {name} is {'cordoned' if n.unschedulable else 'schedulable'}, "
                        f"was {'cordoned' if was.unschedulable else 'schedulable'}",
                    )
                )
            if taints != was.taints:
                extra, missing = sorted(taints - was.taints), sorted(was.taints - taints)
                out.append(
                    (
                        "taint",
                        f"node {name} taints differ: added {extra or 'none'}, "
                        f"missing {missing or 'none'}",
                    )
                )
        else:
            bad = sorted(t for t in taints if t.partition(":")[0] in FAILURE_TAINT_KEYS)
            if bad:
                out.append(("taint", f"node {name} has failure taints {', '.join(bad)}"))
            if name in schedulable and n.unschedulable:
                out.append(("cordon", f"node {name} is cordoned"))
    return out


def workload_problems(
    observer: Observer,
    namespace: str,
    workload: str,
    desired: int,
    *,
    ref: str = "",
    exact: bool = True,
) -> list[tuple[str, str]]:
    """Why a workload (``Kind/name``) is not steady: fewer than ``desired`` pods Ready, or
    a pod Terminating, or (``exact``: a scenario's "as found") any surplus pod; longevity
    asks for at least ``desired`` (``exact=False``), its controller removes a surplus.
    Pods that ended (Failed, Succeeded) do not count: their controller replaced them, and a
    graceful node shutdown leaves them as objects until the pod garbage collector's
    threshold (12,500 by default)."""
    pods = [
        p
        for p in observer.pods(namespace=namespace, workload=workload)
        if p.phase not in ("Failed", "Succeeded")
    ]
    ready = [p for p in pods if p.ready and not p.terminating]
    terminating = [p.name for p in pods if p.terminating]
    if len(ready) >= desired and not terminating and (not exact or len(pods) == desired):
        return []
    what = ref or f"{workload} in {namespace}"
    return [
        (
            "terminating" if terminating and len(ready) >= desired else "pods",
            f"{what}: {len(ready)} Ready of {desired} wanted, {len(pods)} pod(s) in all"
            + (f", Terminating: {', '.join(terminating)}" if terminating else ""),
        )
    ]


def _probe_ok(observer: Observer, probe: str) -> bool | None:
    last = observer.timeline.last(Kind.PROBE, probe)
    return None if last is None else last.transition == Change.OK


def problems(
    inventory: Inventory,
    observer: Observer,
    workloads: Sequence[Workload],
    found: Mapping[str, NodeFound] | None = None,
) -> list[str]:
    """Why the cluster is not in steady state now (empty: it is)."""
    names = [spec.name for spec in inventory.nodes]
    out = [text for _, text in node_problems(observer, names, found)]
    for w in workloads:
        out.extend(
            text
            for _, text in workload_problems(
                observer, w.namespace, w.key, w.desired, ref=f"{w.kind} {w.ref}"
            )
        )
        if w.health is not None and _probe_ok(observer, w.probe) is False:
            out.append(f"service of {w.ref} fails its health probe ({w.health})")
    by_pv: dict[str, list[str]] = {}
    for va in observer.volume_attachments():
        by_pv.setdefault(va.pv, []).append(va.node)
        if not va.attached or va.terminating or va.attach_error or va.detach_error:
            state = "terminating" if va.terminating else "not attached"
            err = va.attach_error or va.detach_error
            out.append(f"volume {va.pv} on {va.node}: {state}" + (f" ({err})" if err else ""))
    out.extend(
        f"volume {pv} is attached to {len(nodes)} nodes: {', '.join(sorted(nodes))}"
        for pv, nodes in sorted(by_pv.items())
        if len(nodes) > 1
    )
    return out


def wait_steady(
    inventory: Inventory,
    observer: Observer,
    workloads: Sequence[Workload],
    *,
    timeout_s: float,
    found: Mapping[str, NodeFound] | None = None,
    description: str = "the cluster in steady state",
) -> float:
    """Wait until :func:`problems` is empty; returns how long it took."""
    started = time.monotonic()
    wait_state(
        observer,
        lambda: True if not problems(inventory, observer, workloads, found) else None,
        deadline=started + timeout_s,
        description=description,
        last_seen=lambda: "; ".join(problems(inventory, observer, workloads, found)),
    )
    return time.monotonic() - started


def nodes_found(inventory: Inventory, observer: Observer) -> dict[str, NodeFound]:
    out = {}
    for spec in inventory.nodes:
        n = observer.node(spec.name)
        if n is not None:
            out[spec.name] = NodeFound(n.unschedulable, frozenset(t.id for t in n.taints))
    return out


def snapshot(observer: Observer) -> dict[str, Any]:
    """The observer's current view as plain JSON (nodes, pods, volumes, services)."""
    return {
        "nodes": [n._asdict() | {"taints": [t.id for t in n.taints]} for n in observer.nodes()],
        "pods": [p._asdict() for p in observer.pods()],
        "volumeattachments": [v._asdict() for v in observer.volume_attachments()],
        "persistentvolumeclaims": [p._asdict() for p in observer.pvcs()],
    }
