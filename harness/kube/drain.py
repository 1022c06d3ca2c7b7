"""Taking a node out of scheduling, as ``kubectl cordon``, ``uncordon`` and ``drain`` do.

A drain cordons the node, then evicts its pods through the Eviction API (policy/v1), so
PodDisruptionBudgets are respected: an eviction refused with a 429 is retried with backoff
until the deadline, each pod on its own, and the drain then waits until the evicted pods
are gone. :func:`evict_pod` evicts one pod the same way (a descheduler's eviction).
:mod:`harness.kube.actions` re-exports all of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from harness.errors import TemporaryError, WaitTimeout
from harness.kube.acting import (
    Key,
    is_mirror,
    metadata,
    owner_kind,
    pod_ref,
    pods_on,
    recorded,
    wait_gone,
)
from harness.kube.client import JSON, KubeClient, NotFound, TooManyRequests
from harness.kube.names import Act, Event
from harness.kube.timeline import SYSTEM_CLOCK, Clock, Timeline


def cordon(client: KubeClient, node: str, *, timeline: Timeline | None = None) -> None:
    """Mark the node unschedulable (idempotent)."""
    with recorded(timeline, Act.CORDON, node):
        client.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})


def uncordon(client: KubeClient, node: str, *, timeline: Timeline | None = None) -> None:
    """Mark the node schedulable again (idempotent)."""
    with recorded(timeline, Act.UNCORDON, node):
        client.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": None}})


@dataclass(frozen=True)
class DrainProgress:
    """One step for one pod. ``outcome`` is one of: ``evicted``, ``blocked`` (429 from a
    PodDisruptionBudget, will retry), ``retrying`` (server error or unreachable),
    ``already-gone``, ``already-terminating``, ``skipped-daemonset``, ``skipped-mirror``,
    ``deleted`` (gone after its eviction, only when waiting for deletion)."""

    namespace: str
    name: str
    outcome: str
    attempts: int = 0
    message: str = ""


@dataclass(frozen=True)
class DrainResult:
    node: str
    evicted: tuple[str, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)  # "ns/name" -> why
    attempts: int = 0  # eviction requests sent
    duration_s: float = 0.0


def _evict(client: KubeClient, pod: JSON, grace_period_s: int | None) -> None:
    m = metadata(pod)
    body: JSON = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": m["name"], "namespace": m["namespace"]},
    }
    if grace_period_s is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace_period_s}
    client.create(f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}/eviction", body)


def drain(
    client: KubeClient,
    node: str,
    *,
    deadline: float,
    grace_period_s: int | None = None,
    wait_for_deletion: bool = True,
    progress: Callable[[DrainProgress], None] | None = None,
    timeline: Timeline | None = None,
    retry_s: tuple[float, float] = (0.5, 5.0),
    clock: Clock = SYSTEM_CLOCK,
) -> DrainResult:
    """Cordon the node, then evict its pods through the Eviction API (policy/v1).

    DaemonSet and mirror pods are skipped. A 429 (the eviction would violate a
    PodDisruptionBudget) or a temporary error is retried with exponential backoff
    (``retry_s`` = first, max) until ``deadline``, pods being retried independently so one
    blocked pod does not hold up the others. Other API errors end the drain at once. With
    ``wait_for_deletion`` it then waits until every evicted pod is gone (on a dead node they
    stay Terminating: then the wait runs to the deadline, as ``kubectl drain`` would).
    Raises :class:`~harness.errors.WaitTimeout` naming the pods left and why.
    """
    started = clock.monotonic()

    def report(pod: JSON, outcome: str, attempts: int = 0, message: str = "") -> None:
        if progress is not None:
            m = metadata(pod)
            progress(
                DrainProgress(
                    str(m.get("namespace")), str(m.get("name")), outcome, attempts, message
                )
            )

    with recorded(timeline, Act.DRAIN, node) as summary:
        cordon(client, node, timeline=timeline)
        skipped: dict[str, str] = {}
        pending: dict[str, JSON] = {}
        waiting: dict[Key, str] = {}  # pods to see gone: (ns, name) -> uid
        for pod in pods_on(client, node):
            ref, m = pod_ref(pod), metadata(pod)
            if is_mirror(pod):
                skipped[ref] = "mirror pod"
                report(pod, "skipped-mirror")
            elif owner_kind(pod) == "DaemonSet":
                skipped[ref] = "DaemonSet pod"
                report(pod, "skipped-daemonset")
            elif m.get("deletionTimestamp"):
                waiting[(str(m["namespace"]), str(m["name"]))] = str(m.get("uid"))
                report(pod, "already-terminating")
            else:
                pending[ref] = pod
        evicted: list[str] = []
        attempts: dict[str, int] = dict.fromkeys(pending, 0)
        next_try: dict[str, float] = dict.fromkeys(pending, started)
        last_error: dict[str, str] = {}
        total = 0
        while pending:
            now = clock.monotonic()
            for ref in sorted(pending):
                if next_try[ref] > now:
                    continue
                pod = pending[ref]
                attempts[ref] += 1
                total += 1
                try:
                    _evict(client, pod, grace_period_s)
                except NotFound:
                    del pending[ref]
                    report(pod, "already-gone", attempts[ref])
                    continue
                except (TooManyRequests, TemporaryError) as exc:
                    delay = min(retry_s[1], retry_s[0] * 2 ** (attempts[ref] - 1))
                    next_try[ref] = clock.monotonic() + delay
                    last_error[ref] = str(exc)[:200]
                    outcome = "blocked" if isinstance(exc, TooManyRequests) else "retrying"
                    report(pod, outcome, attempts[ref], last_error[ref])
                    continue
                del pending[ref]
                evicted.append(ref)
                m = metadata(pod)
                waiting[(str(m["namespace"]), str(m["name"]))] = str(m.get("uid"))
                report(pod, "evicted", attempts[ref])
                if timeline is not None:
                    timeline.action(
                        str(m["name"]),
                        Event.EVICTED,
                        namespace=str(m["namespace"]),
                        node=node,
                        attempts=attempts[ref],
                    )
            if not pending:
                break
            now = clock.monotonic()
            if now >= deadline:
                left = "; ".join(
                    f"{r}: {last_error.get(r, 'not tried')} ({attempts[r]} attempts)"
                    for r in sorted(pending)
                )
                raise WaitTimeout(f"every pod of node {node} evicted", left, now - started)
            clock.sleep(min(min(next_try[r] for r in pending), deadline) - now)
        if wait_for_deletion and waiting:
            wait_gone(
                client,
                "/api/v1/pods",
                waiting,
                deadline=deadline,
                clock=clock,
                expected=f"evicted pods of node {node} deleted",
                field_selector=f"spec.nodeName={node}",
            )
            if progress is not None:
                for ns, name in sorted(waiting):
                    progress(DrainProgress(ns, name, "deleted"))
        summary.update(evicted=len(evicted), skipped=len(skipped), attempts=total)
    return DrainResult(node, tuple(evicted), skipped, total, clock.monotonic() - started)


def evict_pod(
    client: KubeClient,
    namespace: str,
    name: str,
    *,
    deadline: float,
    timeline: Timeline | None = None,
    retry_s: tuple[float, float] = (0.5, 5.0),
    clock: Clock = SYSTEM_CLOCK,
) -> int:
    """Evict one pod through the Eviction API (policy/v1), as a descheduler does: a 429 (its
    PodDisruptionBudget allows no disruption now) or a temporary error is retried with
    exponential backoff until ``deadline``; then :class:`~harness.errors.WaitTimeout` names
    the last answer. A pod already gone counts as evicted. Returns the requests sent; the
    eviction is recorded on the timeline (``evicted``, with its attempts)."""
    pod: JSON = {"metadata": {"name": name, "namespace": namespace}}
    started, attempts = clock.monotonic(), 0
    while True:
        attempts += 1
        try:
            _evict(client, pod, None)
            break
        except NotFound:
            break
        except (TooManyRequests, TemporaryError) as exc:
            now = clock.monotonic()
            if now >= deadline:
                raise WaitTimeout(
                    f"pod {namespace}/{name} evicted", str(exc)[:300], now - started
                ) from None
            delay = min(retry_s[1], retry_s[0] * 2 ** (attempts - 1))
            clock.sleep(min(delay, deadline - now))
    if timeline is not None:
        timeline.action(name, Event.EVICTED, namespace=namespace, attempts=attempts)
    return attempts
