"""What an operator does to a cluster around a node failure, through the API.

Cordon, uncordon, drain through the Eviction API, delete a Node (optionally clearing stuck
finalizers), force-delete a node's pods, the out-of-service taint, restarting pods, and
re-running a Job. Every action takes the client explicitly, and, when given a timeline,
records ``<verb> sent`` and then ``<verb> done`` (or ``<verb> failed``) as ``Action``
transitions so the report shows what the harness did and when.

Deadlines are absolute, on ``clock.monotonic()`` (by default ``time.monotonic``).
Waiting for objects to go away uses list+watch, never a sleep loop; sleeping only happens
between retries of an eviction refused by a PodDisruptionBudget (429).
"""

from __future__ import annotations

import copy
import logging
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from harness.errors import PermanentError, TemporaryError, WaitTimeout
from harness.kube import names
from harness.kube.client import JSON, Conflict, Gone, KubeClient, NotFound, TooManyRequests
from harness.kube.names import Act, Event, Stage
from harness.kube.timeline import SYSTEM_CLOCK, Clock, Timeline

log = logging.getLogger(__name__)

OUT_OF_SERVICE_KEY = names.TAINT_OUT_OF_SERVICE
OUT_OF_SERVICE_VALUE = names.OUT_OF_SERVICE_VALUE
OUT_OF_SERVICE_EFFECT = names.NO_EXECUTE
MIRROR_ANNOTATION = names.ANNOTATION_MIRROR
#: Labels the Job controller adds to a Job and its pod template (removed on re-run).
JOB_GENERATED_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)
_GENERATED_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)
_CONFLICT_RETRIES = 5

Key = tuple[str, str]


# -- fencing -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fence:
    """Why it is safe to treat ``node`` as shut down: its BMC confirmed power OFF
    (``off_by``: which BMC read it, e.g. ``"ipmi 10.0.0.11"``), or an operator's explicit
    ``override`` (the reason given; the session records it in the journal and the timeline,
    so the report shows it). Exactly one of the two. Built by ``Session.fence``."""

    node: str
    off_by: str | None = None
    override: str | None = None

    def __post_init__(self) -> None:
        if (self.off_by is None) == (self.override is None):
            raise PermanentError(
                f"a fence of {self.node} needs exactly one of: off_by (the BMC that read "
                "power OFF) or override (the operator's reason)"
            )
        if self.override is not None and not self.override.strip():
            raise PermanentError(f"a fencing override for {self.node} needs a reason")

    def __str__(self) -> str:
        if self.off_by is not None:
            return f"{self.node} fenced: power OFF confirmed by {self.off_by}"
        return f"{self.node} NOT fenced, overridden: {self.override}"


class FencingRequired(PermanentError):
    """An action that is safe only on a node that is really off was asked without a fence."""

    def __init__(self, node: str, what: str, reason: str) -> None:
        self.node = node
        self.what = what
        super().__init__(
            f"refused to {what} {node}: {reason}. Kubernetes allows it only on a node that "
            "is shut down: on a node that still runs its pods (a partition, a hung kubelet) "
            "volumes would be detached, and pods started elsewhere, under a running writer. "
            "Power the node off through its BMC first, or give an explicit override (it is "
            "journaled and shown in the report)"
        )


def _require_fence(node: str, fence: Fence | None, what: str) -> None:
    if fence is None:
        raise FencingRequired(node, what, "no fence: no BMC confirmed the node's power OFF")
    if fence.node != node:
        raise FencingRequired(node, what, f"the fence given is for {fence.node}")


def node_ready(client: KubeClient, node: str) -> bool | None:
    """The node's Ready condition (None: no such Node)."""
    obj = client.get_or_none(f"/api/v1/nodes/{node}")
    if obj is None:
        return None
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


# -- recording -----------------------------------------------------------------------------


@contextmanager
def _recorded(
    timeline: Timeline | None, verb: Act, name: str, namespace: str = "", **detail: Any
) -> Iterator[dict[str, Any]]:
    """Record ``<verb> sent`` now and ``<verb> done`` (with the yielded dict) or ``failed``."""
    result: dict[str, Any] = {}
    if timeline is None:
        yield result
        return
    timeline.action(name, verb.at(Stage.SENT), namespace=namespace, **detail)
    try:
        yield result
    except BaseException as exc:
        timeline.action(
            name,
            verb.at(Stage.FAILED),
            namespace=namespace,
            error=f"{type(exc).__name__}: {exc}"[:300],
        )
        raise
    timeline.action(name, verb.at(Stage.DONE), namespace=namespace, **result)


def _meta(obj: JSON) -> JSON:
    return obj.get("metadata") or {}


def _pod_ref(obj: JSON) -> str:
    m = _meta(obj)
    return f"{m.get('namespace', '')}/{m.get('name', '')}"


def _owner_kind(obj: JSON) -> str:
    refs = _meta(obj).get("ownerReferences") or []
    owner = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return str(owner.get("kind", "")) if owner else ""


def _is_mirror(obj: JSON) -> bool:
    return MIRROR_ANNOTATION in (_meta(obj).get("annotations") or {})


def _pods_on(client: KubeClient, node: str, namespace: str | None = None) -> list[JSON]:
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    items, _ = client.list(path, fieldSelector=f"spec.nodeName={node}")
    return items


# -- waiting for objects to go -------------------------------------------------------------


def _wait_gone(
    client: KubeClient,
    collection: str,
    targets: Mapping[Key, str],
    *,
    deadline: float,
    clock: Clock,
    expected: str,
    field_selector: str | None = None,
) -> None:
    """Block until none of ``targets`` ((namespace, name) -> uid) exists any more.

    An object with the same name but another uid counts as gone (it was re-created).
    """
    remaining = dict(targets)
    started = clock.monotonic()
    timers: list[threading.Timer] = []
    while remaining:
        try:
            items, rv = client.list(collection, fieldSelector=field_selector)
        except TemporaryError:
            items, rv = None, ""
        if items is not None:
            present = {
                (str(_meta(o).get("namespace") or ""), str(_meta(o).get("name"))): str(
                    _meta(o).get("uid")
                )
                for o in items
            }
            remaining = {k: u for k, u in remaining.items() if present.get(k) == u}
            if not remaining:
                return
        now = clock.monotonic()
        if now >= deadline:
            left = ", ".join(f"{ns}/{n}" if ns else n for ns, n in sorted(remaining))
            raise WaitTimeout(expected, f"still present: {left}", now - started)
        if items is None:
            clock.sleep(min(1.0, deadline - now))
            continue

        # The server-side timeout is in whole seconds: end the stream at the deadline itself.
        def cancel_at_deadline(cancel: Callable[[], None], left: float = deadline - now) -> None:
            timer = threading.Timer(left, cancel)
            timer.daemon = True
            timers.append(timer)
            timer.start()

        try:
            for ev in client.watch(
                collection,
                resource_version=rv,
                timeout_s=max(1, math.ceil(deadline - now)),
                on_open=cancel_at_deadline,
                fieldSelector=field_selector,
            ):
                m = _meta(ev.object)
                key = (str(m.get("namespace") or ""), str(m.get("name")))
                if key in remaining and (
                    ev.type == "DELETED"
                    or (ev.type in ("ADDED", "MODIFIED") and m.get("uid") != remaining[key])
                ):
                    del remaining[key]
                if not remaining or clock.monotonic() >= deadline:
                    break
        except (Gone, TemporaryError):
            continue  # re-list (a stream cancelled at the deadline ends up here too)
        finally:
            for timer in timers:
                timer.cancel()
            timers.clear()


# -- cordon, taints ------------------------------------------------------------------------


def cordon(client: KubeClient, node: str, *, timeline: Timeline | None = None) -> None:
    """Mark the node unschedulable (idempotent)."""
    with _recorded(timeline, Act.CORDON, node):
        client.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})


def uncordon(client: KubeClient, node: str, *, timeline: Timeline | None = None) -> None:
    """Mark the node schedulable again (idempotent)."""
    with _recorded(timeline, Act.UNCORDON, node):
        client.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": None}})


def _update_taints(
    client: KubeClient, node: str, change: Callable[[list[JSON]], list[JSON] | None]
) -> bool:
    """Read-modify-write the node's taints with the resourceVersion as precondition."""
    path = f"/api/v1/nodes/{node}"
    for attempt in range(_CONFLICT_RETRIES):
        obj = client.get(path)
        taints = list((obj.get("spec") or {}).get("taints") or [])
        new = change(taints)
        if new is None:
            return False
        body = {
            "metadata": {"resourceVersion": _meta(obj).get("resourceVersion")},
            "spec": {"taints": new},
        }
        try:
            client.patch(path, body)
        except Conflict:
            if attempt == _CONFLICT_RETRIES - 1:
                raise
            continue
        return True
    return False  # unreachable: the last Conflict is re-raised


def add_taint(
    client: KubeClient,
    node: str,
    key: str,
    value: str,
    effect: str,
    *,
    timeline: Timeline | None = None,
) -> bool:
    """Add ``key=value:effect``; False if a taint with that key and effect was already there."""

    def change(taints: list[JSON]) -> list[JSON] | None:
        if any(t.get("key") == key and t.get("effect") == effect for t in taints):
            return None
        return [*taints, {"key": key, "value": value, "effect": effect}]

    with _recorded(timeline, Act.TAINT, node, taint=f"{key}={value}:{effect}") as result:
        result["changed"] = _update_taints(client, node, change)
    return bool(result["changed"])


def remove_taint(
    client: KubeClient, node: str, key: str, effect: str, *, timeline: Timeline | None = None
) -> bool:
    """Remove the ``key:effect`` taint; False if it was not there."""

    def change(taints: list[JSON]) -> list[JSON] | None:
        kept = [t for t in taints if not (t.get("key") == key and t.get("effect") == effect)]
        return kept if len(kept) != len(taints) else None

    with _recorded(timeline, Act.UNTAINT, node, taint=f"{key}:{effect}") as result:
        result["changed"] = _update_taints(client, node, change)
    return bool(result["changed"])


def add_out_of_service_taint(
    client: KubeClient, node: str, *, fence: Fence | None, timeline: Timeline | None = None
) -> bool:
    """``node.kubernetes.io/out-of-service=nodeshutdown:NoExecute``: on a NotReady node,
    Terminating pods are force-deleted and their volumes force-detached at once.

    Refused (:class:`FencingRequired`) without a ``fence`` for this node: a BMC that
    confirmed power OFF, or an explicit override."""
    _require_fence(node, fence, "set the out-of-service taint on")
    return add_taint(
        client,
        node,
        OUT_OF_SERVICE_KEY,
        OUT_OF_SERVICE_VALUE,
        OUT_OF_SERVICE_EFFECT,
        timeline=timeline,
    )


def remove_out_of_service_taint(
    client: KubeClient, node: str, *, timeline: Timeline | None = None
) -> bool:
    return remove_taint(client, node, OUT_OF_SERVICE_KEY, OUT_OF_SERVICE_EFFECT, timeline=timeline)


# -- drain ---------------------------------------------------------------------------------


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
    m = _meta(pod)
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
            m = _meta(pod)
            progress(
                DrainProgress(
                    str(m.get("namespace")), str(m.get("name")), outcome, attempts, message
                )
            )

    with _recorded(timeline, Act.DRAIN, node) as summary:
        cordon(client, node, timeline=timeline)
        skipped: dict[str, str] = {}
        pending: dict[str, JSON] = {}
        waiting: dict[Key, str] = {}  # pods to see gone: (ns, name) -> uid
        for pod in _pods_on(client, node):
            ref, m = _pod_ref(pod), _meta(pod)
            if _is_mirror(pod):
                skipped[ref] = "mirror pod"
                report(pod, "skipped-mirror")
            elif _owner_kind(pod) == "DaemonSet":
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
                m = _meta(pod)
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
            _wait_gone(
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


# -- deleting ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeleteNodeResult:
    node: str
    gone: bool  # the Node object no longer exists (or was re-created with a new uid)
    finalizers_cleared: tuple[str, ...] = ()  # stuck finalizers the harness removed
    already_absent: bool = False


def delete_node(
    client: KubeClient,
    node: str,
    *,
    clear_finalizers: bool = False,
    finalizer_grace_s: float = 10.0,
    deadline: float | None = None,
    timeline: Timeline | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> DeleteNodeResult:
    """Delete the Node object (PodGC then force-deletes the pods bound to it).

    With ``clear_finalizers``, finalizers still holding the node ``finalizer_grace_s`` after
    the delete are removed; the result, the log and the timeline say which. With a
    ``deadline`` it waits until the node is gone (``WaitTimeout`` otherwise).
    """
    path = f"/api/v1/nodes/{node}"
    with _recorded(timeline, Act.DELETE_NODE, node) as summary:
        current = client.get_or_none(path)
        if current is None:
            summary["already_absent"] = True
            return DeleteNodeResult(node, True, already_absent=True)
        uid = str(_meta(current).get("uid"))
        try:
            client.delete(path, body={"preconditions": {"uid": uid}})
        except NotFound:
            summary["already_absent"] = True
            return DeleteNodeResult(node, True, already_absent=True)
        target = {("", node): uid}
        selector = f"metadata.name={node}"
        cleared: tuple[str, ...] = ()
        if clear_finalizers:
            grace_end = clock.monotonic() + finalizer_grace_s
            if deadline is not None:
                grace_end = min(grace_end, deadline)
            try:
                _wait_gone(
                    client,
                    "/api/v1/nodes",
                    target,
                    deadline=grace_end,
                    clock=clock,
                    expected=f"node {node} deleted",
                    field_selector=selector,
                )
            except WaitTimeout:
                cleared = _clear_finalizers(client, path, uid)
                if cleared:
                    log.warning("node %s: cleared stuck finalizers %s", node, ", ".join(cleared))
                    summary["finalizers_cleared"] = list(cleared)
                    if timeline is not None:
                        timeline.action(node, Event.FINALIZERS_CLEARED, finalizers=list(cleared))
        if deadline is not None:
            _wait_gone(
                client,
                "/api/v1/nodes",
                target,
                deadline=deadline,
                clock=clock,
                expected=f"node {node} deleted",
                field_selector=selector,
            )
        now = client.get_or_none(path)
        gone = now is None or str(_meta(now).get("uid")) != uid
        summary["gone"] = gone
    return DeleteNodeResult(node, gone, cleared)


def _clear_finalizers(client: KubeClient, path: str, uid: str) -> tuple[str, ...]:
    for attempt in range(_CONFLICT_RETRIES):
        obj = client.get_or_none(path)
        if obj is None or str(_meta(obj).get("uid")) != uid:
            return ()
        finalizers = tuple(str(f) for f in _meta(obj).get("finalizers") or ())
        if not finalizers:
            return ()
        body = {"metadata": {"finalizers": None, "resourceVersion": _meta(obj)["resourceVersion"]}}
        try:
            client.patch(path, body)
        except NotFound:
            return ()
        except Conflict:
            if attempt == _CONFLICT_RETRIES - 1:
                raise
            continue
        return finalizers
    return ()


def force_delete_pods(
    client: KubeClient,
    node: str,
    *,
    namespace: str | None = None,
    only_terminating: bool = False,
    include_daemonsets: bool = False,
    fence: Fence | None = None,
    timeline: Timeline | None = None,
) -> list[str]:
    """Delete the node's pods with grace period 0 (what ``kubectl delete --force`` does).

    Mirror pods are skipped (deleting them does nothing), DaemonSet pods unless
    ``include_daemonsets`` (the controller would put them back on the same node). Returns
    ``namespace/name`` of the pods deleted.

    On a node that is not Ready (lost, or partitioned: its pods may still run and write),
    refused (:class:`FencingRequired`) without a ``fence`` for it. A Ready node's kubelet
    stops the containers of the pods deleted; a deleted Node's pods are PodGC's anyway.
    """
    if fence is None and node_ready(client, node) is False:
        _require_fence(node, fence, "force-delete the pods of (NotReady)")
    elif fence is not None:
        _require_fence(node, fence, "force-delete the pods of")
    deleted: list[str] = []
    with _recorded(timeline, Act.FORCE_DELETE_PODS, node) as summary:
        for pod in _pods_on(client, node, namespace):
            m = _meta(pod)
            if _is_mirror(pod) or (not include_daemonsets and _owner_kind(pod) == "DaemonSet"):
                continue
            if only_terminating and not m.get("deletionTimestamp"):
                continue
            try:
                client.delete(
                    f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}",
                    grace_period_s=0,
                    body={"preconditions": {"uid": m.get("uid")}},
                )
            except NotFound:
                continue
            deleted.append(_pod_ref(pod))
        summary["pods"] = len(deleted)
    return deleted


def restart_pods(
    client: KubeClient,
    namespace: str,
    selector: str,
    *,
    grace_period_s: int | None = None,
    timeline: Timeline | None = None,
) -> list[str]:
    """Delete the pods matching the label selector so their controllers re-create them.

    Returns the names of the pods deleted. Use the waits to see the new ones Ready.
    """
    names: list[str] = []
    with _recorded(timeline, Act.RESTART_PODS, selector, namespace=namespace) as summary:
        items, _ = client.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)
        for pod in items:
            m = _meta(pod)
            try:
                client.delete(
                    f"/api/v1/namespaces/{namespace}/pods/{m['name']}",
                    grace_period_s=grace_period_s,
                    body={"preconditions": {"uid": m.get("uid")}},
                )
            except NotFound:
                continue
            names.append(str(m["name"]))
        summary["pods"] = len(names)
    return names


def job_for_rerun(job: JSON) -> JSON:
    """A Job's manifest without the fields the API server and the Job controller generated
    (uid, resourceVersion, status, the generated selector and its labels, ...)."""
    out = copy.deepcopy(job)
    out.pop("status", None)
    out.setdefault("apiVersion", "batch/v1")
    out.setdefault("kind", "Job")
    meta = out.setdefault("metadata", {})
    for k in _GENERATED_METADATA:
        meta.pop(k, None)
    annotations = meta.get("annotations") or {}
    annotations.pop("batch.kubernetes.io/job-tracking", None)
    if not annotations:
        meta.pop("annotations", None)
    spec = out.setdefault("spec", {})
    if not spec.get("manualSelector"):
        spec.pop("selector", None)
        tmeta = (spec.get("template") or {}).get("metadata") or {}
        for labels in (meta.get("labels"), tmeta.get("labels")):
            if isinstance(labels, dict):
                for k in JOB_GENERATED_LABELS:
                    labels.pop(k, None)
    return out


def rerun_job(
    client: KubeClient,
    namespace: str,
    name: str,
    *,
    deadline: float,
    timeline: Timeline | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> JSON:
    """Delete the Job (and its pods, in the background), wait until it is gone, and create
    it again from its spec minus generated fields. Returns the new Job."""
    collection = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    path = f"{collection}/{name}"
    with _recorded(timeline, Act.RERUN_JOB, name, namespace=namespace) as summary:
        job = client.get(path)
        uid = str(_meta(job).get("uid"))
        manifest = job_for_rerun(job)
        try:
            client.delete(
                path, body={"propagationPolicy": "Background", "preconditions": {"uid": uid}}
            )
        except NotFound:
            pass
        else:
            _wait_gone(
                client,
                collection,
                {(namespace, name): uid},
                deadline=deadline,
                clock=clock,
                expected=f"job {namespace}/{name} deleted",
                field_selector=f"metadata.name={name}",
            )
        created = client.create(collection, manifest)
        summary["uid"] = str(_meta(created).get("uid"))
    return created
