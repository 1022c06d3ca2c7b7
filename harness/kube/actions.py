"""What an operator does to a cluster around a node failure, through the API.

Taints (the out-of-service taint only with a fence: a BMC that confirmed power OFF),
delete a Node (optionally clearing stuck finalizers), force-delete a node's pods,
restarting pods, and re-running a Job; cordon, uncordon and drain through the Eviction API
are :mod:`harness.kube.drain`'s, re-exported here. Every action takes the client
explicitly, and, when given a timeline, records ``<verb> sent`` and then ``<verb> done``
(or ``<verb> failed``) as ``Action`` transitions so the report shows what the harness did
and when.

Deadlines are absolute, on ``clock.monotonic()`` (by default ``time.monotonic``).
Waiting for objects to go away uses list+watch, never a sleep loop
(:func:`harness.kube.acting.wait_gone`); sleeping only happens between retries of an
eviction refused by a PodDisruptionBudget (429).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass

from harness.errors import PermanentError, WaitTimeout
from harness.kube import names
from harness.kube.acting import (
    is_mirror,
    metadata,
    owner_kind,
    pod_ref,
    pods_on,
    recorded,
    wait_gone,
)
from harness.kube.client import JSON, Conflict, KubeClient, NotFound

# the drain's, re-exported: every action is taken from here
from harness.kube.drain import DrainProgress as DrainProgress
from harness.kube.drain import DrainResult as DrainResult
from harness.kube.drain import cordon as cordon
from harness.kube.drain import drain as drain
from harness.kube.drain import evict_pod as evict_pod
from harness.kube.drain import uncordon as uncordon
from harness.kube.names import Act, Event
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


# -- taints --------------------------------------------------------------------------------


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
            "metadata": {"resourceVersion": metadata(obj).get("resourceVersion")},
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

    with recorded(timeline, Act.TAINT, node, taint=f"{key}={value}:{effect}") as result:
        result["changed"] = _update_taints(client, node, change)
    return bool(result["changed"])


def remove_taint(
    client: KubeClient, node: str, key: str, effect: str, *, timeline: Timeline | None = None
) -> bool:
    """Remove the ``key:effect`` taint; False if it was not there."""

    def change(taints: list[JSON]) -> list[JSON] | None:
        kept = [t for t in taints if not (t.get("key") == key and t.get("effect") == effect)]
        return kept if len(kept) != len(taints) else None

    with recorded(timeline, Act.UNTAINT, node, taint=f"{key}:{effect}") as result:
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
    with recorded(timeline, Act.DELETE_NODE, node) as summary:
        current = client.get_or_none(path)
        if current is None:
            summary["already_absent"] = True
            return DeleteNodeResult(node, True, already_absent=True)
        uid = str(metadata(current).get("uid"))
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
                wait_gone(
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
            wait_gone(
                client,
                "/api/v1/nodes",
                target,
                deadline=deadline,
                clock=clock,
                expected=f"node {node} deleted",
                field_selector=selector,
            )
        now = client.get_or_none(path)
        gone = now is None or str(metadata(now).get("uid")) != uid
        summary["gone"] = gone
    return DeleteNodeResult(node, gone, cleared)


def _clear_finalizers(client: KubeClient, path: str, uid: str) -> tuple[str, ...]:
    for attempt in range(_CONFLICT_RETRIES):
        obj = client.get_or_none(path)
        if obj is None or str(metadata(obj).get("uid")) != uid:
            return ()
        finalizers = tuple(str(f) for f in metadata(obj).get("finalizers") or ())
        if not finalizers:
            return ()
        body = {
            "metadata": {"finalizers": None, "resourceVersion": metadata(obj)["resourceVersion"]}
        }
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
    with recorded(timeline, Act.FORCE_DELETE_PODS, node) as summary:
        for pod in pods_on(client, node, namespace):
            m = metadata(pod)
            if is_mirror(pod) or (not include_daemonsets and owner_kind(pod) == "DaemonSet"):
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
            deleted.append(pod_ref(pod))
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
    with recorded(timeline, Act.RESTART_PODS, selector, namespace=namespace) as summary:
        items, _ = client.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)
        for pod in items:
            m = metadata(pod)
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
    with recorded(timeline, Act.RERUN_JOB, name, namespace=namespace) as summary:
        job = client.get(path)
        uid = str(metadata(job).get("uid"))
        manifest = job_for_rerun(job)
        try:
            client.delete(
                path, body={"propagationPolicy": "Background", "preconditions": {"uid": uid}}
            )
        except NotFound:
            pass
        else:
            wait_gone(
                client,
                collection,
                {(namespace, name): uid},
                deadline=deadline,
                clock=clock,
                expected=f"job {namespace}/{name} deleted",
                field_selector=f"metadata.name={name}",
            )
        created = client.create(collection, manifest)
        summary["uid"] = str(metadata(created).get("uid"))
    return created
