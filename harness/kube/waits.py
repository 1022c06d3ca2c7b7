"""Waits on the observed cluster state, woken by the timeline (never a sleep loop).

Every wait has a description, a deadline on the timeline's monotonic clock (for the real
clock: ``time.monotonic() + seconds``) and a last observation. On timeout it raises
:class:`~harness.errors.WaitTimeout` (expected, last seen, waited); a terminal state ends
it at once with :class:`~harness.kube.timeline.WaitFailed` (a pod that went Failed, a PVC
that is Lost, an observer that died or was stopped).

Waits check the observer's *current* state and return as soon as it holds, including when
it already held. To wait for something to *happen* after a point in time, use
:func:`wait_transition` with ``after=``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TypeVar

from harness.kube.observer import (
    NODE,
    NodeState,
    Observer,
    PodState,
    PvcState,
    VolumeAttachmentState,
)
from harness.kube.timeline import Predicate, Timeline, Transition, WaitFailed, match

__all__ = [
    "WaitFailed",
    "wait_endpoints_ready",
    "wait_node_evacuated",
    "wait_node_gone",
    "wait_node_not_ready",
    "wait_node_ready",
    "wait_node_schedulable",
    "wait_node_taint",
    "wait_node_transition",
    "wait_pod_gone",
    "wait_pod_ready",
    "wait_pvc_bound",
    "wait_state",
    "wait_transition",
    "wait_volume_attached",
    "wait_volume_detached",
    "wait_workload_ready",
]

T = TypeVar("T")

TERMINAL_POD_PHASES = frozenset({"Failed", "Succeeded"})


def wait_state(
    observer: Observer,
    check: Callable[[], T | None],
    *,
    deadline: float,
    description: str,
    last_seen: Callable[[], str],
    terminal: Callable[[], str | None] | None = None,
) -> T:
    """Wait until ``check()`` returns something; the observer failing or stopping is terminal."""

    def end() -> str | None:
        failure = observer.failure()
        if failure is not None:
            return failure
        return terminal() if terminal is not None else None

    return observer.timeline.wait_until(
        check, deadline, description, last_seen=last_seen, terminal=end
    )


def wait_transition(
    timeline: Timeline,
    *,
    deadline: float,
    description: str,
    kind: str | None = None,
    name: str | None = None,
    transition: str | None = None,
    namespace: str | None = None,
    after: float | Transition | None = None,
    where: Predicate | None = None,
    terminal: Predicate | None = None,
) -> Transition:
    """Wait for a matching transition (recorded already, or still to come)."""
    pred = match(kind, name, transition, namespace=namespace, after=after, where=where)
    related = match(kind, name, namespace=namespace, after=after)

    def last_seen() -> str:
        found = [t for t in timeline.snapshot() if related(t)]
        return timeline.describe(found[-1]) if found else "no related transition"

    return timeline.wait_for(pred, deadline, description, terminal=terminal, last_seen=last_seen)


# -- nodes ---------------------------------------------------------------------------------


def node_seen(observer: Observer, node: str) -> Callable[[], str]:
    """What the observer last saw of the node, for a wait's error."""

    def seen() -> str:
        n = observer.node(node)
        if n is None:
            return f"node {node} absent"
        taints = ",".join(t.id for t in n.taints) or "none"
        return (
            f"node {node}: Ready={n.ready or '?'} ({n.reason or 'no reason'}), "
            f"unschedulable={n.unschedulable}, taints={taints}"
        )

    return seen


def _wait_node(
    observer: Observer,
    node: str,
    cond: Callable[[NodeState], bool],
    *,
    deadline: float,
    description: str,
) -> NodeState:
    """The node's state once ``cond`` holds for it (a deleted node never does)."""

    def check() -> NodeState | None:
        n = observer.node(node)
        return n if n is not None and cond(n) else None

    return wait_state(
        observer,
        check,
        deadline=deadline,
        description=description,
        last_seen=node_seen(observer, node),
    )


def wait_node_ready(observer: Observer, node: str, *, deadline: float) -> NodeState:
    """Node Ready=True."""
    return _wait_node(
        observer, node, lambda n: n.is_ready, deadline=deadline, description=f"node {node} Ready"
    )


def wait_node_not_ready(observer: Observer, node: str, *, deadline: float) -> NodeState:
    """Node Ready=False or Unknown (a node that was deleted does not count)."""
    return _wait_node(
        observer,
        node,
        lambda n: n.ready in ("False", "Unknown"),
        deadline=deadline,
        description=f"node {node} NotReady (Ready=False or Unknown)",
    )


def wait_node_taint(
    observer: Observer, node: str, taint: str, *, deadline: float, present: bool = True
) -> NodeState:
    """Taint ``key:effect`` (or any taint with that key) present on / absent from the node."""
    return _wait_node(
        observer,
        node,
        lambda n: n.has_taint(taint) == present,
        deadline=deadline,
        description=f"taint {taint} {'on' if present else 'off'} node {node}",
    )


def wait_node_schedulable(
    observer: Observer, node: str, *, deadline: float, schedulable: bool = True
) -> NodeState:
    """Node schedulable (or, with ``schedulable=False``, cordoned)."""
    return _wait_node(
        observer,
        node,
        lambda n: n.unschedulable != schedulable,
        deadline=deadline,
        description=f"node {node} {'schedulable' if schedulable else 'cordoned'}",
    )


def wait_node_gone(observer: Observer, node: str, *, deadline: float) -> None:
    wait_state(
        observer,
        lambda: True if observer.node(node) is None else None,
        deadline=deadline,
        description=f"Node object {node} deleted",
        last_seen=node_seen(observer, node),
    )


def wait_node_evacuated(
    observer: Observer,
    node: str,
    *,
    deadline: float,
    include_daemonsets: bool = False,
    namespaces: Collection[str] | None = None,
) -> list[PodState]:
    """Every pod of the node is Terminating or gone; returns those still Terminating.

    DaemonSet pods (they tolerate the node taints) and mirror pods are left out unless
    ``include_daemonsets``.
    """

    def remaining() -> list[PodState]:
        return [
            p
            for p in observer.pods(on_node=node)
            if not p.is_mirror
            and (include_daemonsets or not p.is_daemonset)
            and (namespaces is None or p.namespace in namespaces)
        ]

    def check() -> list[PodState] | None:
        pods = remaining()
        return pods if all(p.terminating for p in pods) else None

    def seen() -> str:
        left = [f"{p.namespace}/{p.name}" for p in remaining() if not p.terminating]
        more = f" (+{len(left) - 10} more)" if len(left) > 10 else ""
        return f"{len(left)} pod(s) still running on {node}: {', '.join(left[:10])}{more}"

    return wait_state(
        observer,
        check,
        deadline=deadline,
        description=f"every pod of node {node} evicted (Terminating or deleted)",
        last_seen=seen,
    )


# -- pods ----------------------------------------------------------------------------------


def _pod_summary(p: PodState | None, ref: str) -> str:
    if p is None:
        return f"pod {ref} absent"
    return (
        f"pod {ref}: phase={p.phase or '?'}, ready={p.ready}, node={p.node or '(unscheduled)'}, "
        f"terminating={p.terminating}"
    )


def wait_pod_ready(
    observer: Observer,
    namespace: str,
    name: str,
    *,
    deadline: float,
    not_on: str | None = None,
) -> PodState:
    """Pod Ready (on a node other than ``not_on`` if given); Failed/Succeeded is terminal."""
    ref = f"{namespace}/{name}"

    def check() -> PodState | None:
        p = observer.pod(namespace, name)
        if p is None or not p.ready or p.terminating:
            return None
        return p if not_on is None or p.node != not_on else None

    def terminal() -> str | None:
        p = observer.pod(namespace, name)
        if p is not None and p.phase in TERMINAL_POD_PHASES:
            return f"pod {ref} is {p.phase} (terminal) on {p.node or '(unscheduled)'}"
        return None

    where = f" on a node other than {not_on}" if not_on else ""
    return wait_state(
        observer,
        check,
        deadline=deadline,
        description=f"pod {ref} Ready{where}",
        last_seen=lambda: _pod_summary(observer.pod(namespace, name), ref),
        terminal=terminal,
    )


def wait_pod_gone(
    observer: Observer, namespace: str, name: str, *, deadline: float, uid: str | None = None
) -> None:
    """The pod (or, with ``uid``, that incarnation of it) no longer exists."""
    ref = f"{namespace}/{name}"

    def check() -> bool | None:
        p = observer.pod(namespace, name)
        return True if p is None or (uid is not None and p.uid != uid) else None

    wait_state(
        observer,
        check,
        deadline=deadline,
        description=f"pod {ref} deleted",
        last_seen=lambda: _pod_summary(observer.pod(namespace, name), ref),
    )


def wait_workload_ready(
    observer: Observer,
    namespace: str,
    workload: str,
    *,
    count: int,
    deadline: float,
    not_on: Collection[str] = (),
) -> list[PodState]:
    """At least ``count`` pods of ``workload`` (``Kind/name``) Ready and not Terminating."""

    def ready() -> list[PodState]:
        return [
            p
            for p in observer.pods(namespace=namespace, workload=workload)
            if p.ready and not p.terminating and p.node not in not_on
        ]

    def check() -> list[PodState] | None:
        pods = ready()
        return pods if len(pods) >= count else None

    def seen() -> str:
        pods = observer.pods(namespace=namespace, workload=workload)
        parts = [
            f"{p.name}@{p.node or '-'}:{'ready' if p.ready else p.phase or '?'}"
            + (":terminating" if p.terminating else "")
            for p in pods
        ]
        return f"{len(ready())} of {count} ready; pods: {', '.join(parts) or 'none'}"

    avoid = f" off {', '.join(sorted(not_on))}" if not_on else ""
    return wait_state(
        observer,
        check,
        deadline=deadline,
        description=f"{count} pod(s) of {namespace}/{workload} Ready{avoid}",
        last_seen=seen,
    )


# -- volumes and services ------------------------------------------------------------------


def va_seen(observer: Observer, pv: str) -> Callable[[], str]:
    """What the observer last saw of the volume's attachments, for a wait's error."""

    def seen() -> str:
        vas = observer.volume_attachments(pv=pv)
        if not vas:
            return f"no VolumeAttachment for {pv}"
        return "; ".join(
            f"{v.name} node={v.node} attached={v.attached}"
            + (f" error={v.attach_error!r}" if v.attach_error else "")
            + (" terminating" if v.terminating else "")
            for v in vas
        )

    return seen


def wait_volume_attached(
    observer: Observer,
    pv: str,
    *,
    deadline: float,
    node: str | None = None,
    not_on: str | None = None,
) -> VolumeAttachmentState:
    """A VolumeAttachment of ``pv`` attached (to ``node``, or to any node but ``not_on``)."""

    def check() -> VolumeAttachmentState | None:
        for v in observer.volume_attachments(pv=pv):
            if (
                v.attached
                and not v.terminating
                and (node is None or v.node == node)
                and (not_on is None or v.node != not_on)
            ):
                return v
        return None

    where = f" to {node}" if node else (f" to a node other than {not_on}" if not_on else "")
    return wait_state(
        observer,
        check,
        deadline=deadline,
        description=f"volume {pv} attached{where}",
        last_seen=va_seen(observer, pv),
    )


def wait_volume_detached(observer: Observer, pv: str, node: str, *, deadline: float) -> None:
    """No attached VolumeAttachment of ``pv`` on ``node`` remains."""

    def check() -> bool | None:
        still = [v for v in observer.volume_attachments(pv=pv, node=node) if v.attached]
        return None if still else True

    wait_state(
        observer,
        check,
        deadline=deadline,
        description=f"volume {pv} detached from {node}",
        last_seen=va_seen(observer, pv),
    )


def wait_pvc_bound(observer: Observer, namespace: str, name: str, *, deadline: float) -> PvcState:
    """PVC phase Bound; Lost is terminal."""
    ref = f"{namespace}/{name}"

    def check() -> PvcState | None:
        p = observer.pvc(namespace, name)
        return p if p is not None and p.phase == "Bound" else None

    def terminal() -> str | None:
        p = observer.pvc(namespace, name)
        return f"PVC {ref} is Lost" if p is not None and p.phase == "Lost" else None

    def seen() -> str:
        p = observer.pvc(namespace, name)
        return f"PVC {ref} absent" if p is None else f"PVC {ref} phase={p.phase or '?'}"

    return wait_state(
        observer,
        check,
        deadline=deadline,
        description=f"PVC {ref} Bound",
        last_seen=seen,
        terminal=terminal,
    )


def wait_endpoints_ready(
    observer: Observer, namespace: str, service: str, *, min_ready: int, deadline: float
) -> int:
    """At least ``min_ready`` ready endpoints behind the Service; returns the count."""

    def check() -> int | None:
        ready = observer.endpoints(namespace, service).ready
        return ready if ready >= min_ready else None

    def seen() -> str:
        e = observer.endpoints(namespace, service)
        return f"service {namespace}/{service}: {e.ready} ready of {e.total} endpoints"

    return wait_state(
        observer,
        check,
        deadline=deadline,
        description=f"service {namespace}/{service} with >= {min_ready} ready endpoint(s)",
        last_seen=seen,
    )


def wait_node_transition(
    timeline: Timeline,
    node: str,
    transition: str,
    *,
    after: float | Transition,
    deadline: float,
) -> Transition:
    """Wait for a Node transition (``not-ready``, ``ready``, ``taint-added``, ...) after a time."""
    return wait_transition(
        timeline,
        deadline=deadline,
        description=f"node {node} {transition}",
        kind=NODE,
        name=node,
        transition=transition,
        after=after,
    )
