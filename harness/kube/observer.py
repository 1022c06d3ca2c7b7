"""List+watch the cluster into the timeline.

One thread per watched resource type (per namespace when namespaces are given), each with its
own :class:`~harness.kube.client.KubeClient` built from the caller's credentials, so no watch
stream is ever shared between threads. Each thread lists (paginated), then watches from the
list's resourceVersion and resumes from the last resourceVersion it saw (BOOKMARK events are
not transitions, but their resourceVersion is kept). A broken stream is resumed from that
resourceVersion. A 410 Gone (HTTP status or in-stream ERROR) is first retried: the same
watch, from the same resourceVersion, on a new connection, up to ``gone_retries`` times
(note ``watch-gone`` each time); behind a balancer each try reaches the next API server, and
one that did not restart still holds the history, so the watch resumes with nothing missed.
When every try is refused, the watcher re-lists and diffs the new list against the cache,
emitting every transition the watch missed, marked ``relist=True`` with ``uncertain_s`` (how
long before the re-list it may really have happened). Such a re-list is also an announced
*gap* (:func:`gaps`): between the last event the watch delivered and the re-list, the watch
saw nothing, and changes that undid each other there (a node cordoned then uncordoned) left
no trace in the list. A measurement whose events fall in a gap carries that uncertainty
(see ``harness.scenario.report``); nothing is lost silently.

Where the 410 comes from: each API server answers watches from its own watch cache, which
holds a window of recent changes starting when the cache initialised from etcd (KEP-1904:
"The kube-apiserver watch cache is initialized from etcd at the moment when it starts with
empty change history"). After an API server restarted, a watch resumed through it from a
resourceVersion older than its cache's start gets 410 "too old resource version: <asked>
(<start>)" (k8s.io/apiserver, pkg/storage/cacher, ``getAllEventsSinceLocked``); another API
server may still serve it, hence the retries. After every API server restarted, none can:
the changes between the watch's last resourceVersion and the caches' start are in etcd's
history only, and no watch, ours or any client's, sees them one by one. The re-list then
reads the state at the newest cache start the 410s named (``resourceVersion=<start>&
resourceVersionMatch=Exact``, which etcd serves until it compacts that revision) and the
watch resumes from there, so only the changes made before the caches started fall in the
gap; the changes made after are delivered one by one, however late the watch came back.
Without a start in the message (another server), or when etcd no longer has that revision,
it lists the state now. The ``relisted`` note carries ``since_resource_version`` and
``resource_version`` (the gap in resourceVersions) and ``exact``.

The retries go through the kubeconfig's server only: the API servers' own addresses (the
``default/kubernetes`` EndpointSlice) are often not reachable from where the harness runs,
and the lab publishes none (its API servers advertise a loopback address).

Only slim projected state is kept per object (the NamedTuples below), not whole objects.
Objects are not even decoded whole: list pages and watch lines are decoded through schemas
of the fields the projections read (:mod:`harness.kube.fields`), and list pages are asked
for in a pipeline (:meth:`~harness.kube.client.KubeClient.pages`), so a large initial list
costs the API server's encoding time and little more.
Watch transitions are stamped when their line was read (``time.monotonic``/``time.time``).

Transitions emitted (``kind``, ``transition``: ``detail`` keys)::

    Node     observed|created: uid ready unschedulable taints zone
             ready|not-ready: status previous reason   (status True / False / Unknown)
             taint-added|taint-removed: taint(key:effect) key value effect
             cordoned|uncordoned, deleted: uid
    Pod      observed|created: uid node phase ready terminating workload
             scheduled, ready, not-ready, terminating (grace_s), phase (phase previous),
             deleted -- all with uid node workload
             multi-attach: uid volume count message  (FailedAttachVolume "Multi-Attach error")
             event: uid reason count message          (other reasons in ``event_reasons``)
    VolumeAttachment observed|created: uid node pv attached attacher
             attached, detached, attach-error|detach-error (message), terminating, deleted
             -- all with uid node pv
    PersistentVolumeClaim observed|created: uid phase volume; phase: phase previous volume;
             deleted
    Service  observed|endpoints: ready total (+ previous_ready previous_total), from the
             EndpointSlices labelled kubernetes.io/service-name
    Observer synced (objects resource_version), relisted (reason changes uncertain_s
             resource since_mono since_resource_version resource_version exact: the gap),
             watch-gone (resource_version attempt cache_start error),
             watch-broken|watch-error (error), failed (error) -- ``name`` is the watcher

``observed`` records the state found by the initial list (nothing else is emitted for it);
``created`` is followed by the transitions from an empty object to the new state, so a pod
first seen already Ready (for example after a re-list) also gets a ``ready`` transition.
``workload`` is ``Kind/name`` of the controlling owner, with ReplicaSets of Deployments
folded into ``Deployment/name`` and mirror pods as ``Node/node``; bare pods have ``""``.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import orjson

from harness.errors import PermanentError, TemporaryError, WaitTimeout
from harness.kube import fields
from harness.kube.client import JSON, ApiError, Gone, KubeClient, WatchEvent
from harness.kube.timeline import Timeline, Transition

log = logging.getLogger(__name__)

NODE = "Node"
POD = "Pod"
VOLUME_ATTACHMENT = "VolumeAttachment"
PVC = "PersistentVolumeClaim"
SERVICE = "Service"
OBSERVER = "Observer"

RESOURCES: tuple[str, ...] = (
    "nodes",
    "pods",
    "events",
    "volumeattachments",
    "persistentvolumeclaims",
    "endpointslices",
)
#: Event reasons recorded as ``event`` transitions on the involved object.
EVENT_REASONS: frozenset[str] = frozenset(
    {
        "FailedAttachVolume",
        "FailedMount",
        "FailedScheduling",
        "TaintManagerEviction",
        "NodeNotReady",
        "Evicted",
        # the Job controller's verdicts on a Job (what a wait for a Job's end wakes up on)
        "Completed",
        "BackoffLimitExceeded",
        "DeadlineExceeded",
    }
)
MULTI_ATTACH_RE = re.compile(r'Multi-Attach error for volume "([^"]+)"')
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
ZONE_LABEL = "topology.kubernetes.io/zone"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

#: Between retries of a watch refused for good (403, ...) once synced; a broken watch
#: reconnects sooner (``Observer.backoff_s``).
PERMANENT_RETRY_S = 5.0

#: Watches retried from the same resourceVersion, each on a new connection, after a 410
#: Gone and before re-listing: behind a balancer each goes to the next API server, and one
#: that did not restart still holds the history (a fresh connection is all that changes;
#: the API servers' own addresses, in the cluster's ``default/kubernetes`` EndpointSlice,
#: are often not reachable from outside the cluster, so they are not tried).
GONE_RETRIES = 5

#: How long before a live watch stream broke a change may still have been on its way: a
#: gap announced after that stream starts this much before it broke.
LIVE_MARGIN_S = 1.0

Emit = tuple[str, str, str, str, dict[str, Any]]  # kind, namespace, name, transition, detail
Key = tuple[str, str]  # namespace, name


# -- slim state ----------------------------------------------------------------------------


class Taint(NamedTuple):
    key: str
    value: str
    effect: str

    @property
    def id(self) -> str:
        """``key:effect``, the identity ``kubectl taint`` uses."""
        return f"{self.key}:{self.effect}"


class NodeState(NamedTuple):
    name: str
    uid: str
    ready: str  # "True", "False", "Unknown", or "" when there is no Ready condition yet
    reason: str
    unschedulable: bool
    taints: tuple[Taint, ...]
    zone: str

    @property
    def is_ready(self) -> bool:
        return self.ready == "True"

    def has_taint(self, taint: str) -> bool:
        """``taint`` is ``key:effect`` or just ``key``."""
        return any(t.id == taint or t.key == taint for t in self.taints)


class PodState(NamedTuple):
    namespace: str
    name: str
    uid: str
    node: str
    phase: str
    ready: bool
    terminating: bool
    workload: str
    grace_s: int | None

    @property
    def is_mirror(self) -> bool:
        return self.workload.startswith("Node/")

    @property
    def is_daemonset(self) -> bool:
        return self.workload.startswith("DaemonSet/")


class VolumeAttachmentState(NamedTuple):
    name: str
    uid: str
    node: str
    pv: str
    attacher: str
    attached: bool
    attach_error: str
    detach_error: str
    terminating: bool


class PvcState(NamedTuple):
    namespace: str
    name: str
    uid: str
    phase: str
    volume: str


class EndpointSliceState(NamedTuple):
    namespace: str
    name: str
    uid: str
    service: str
    ready: int
    total: int


class EndpointsState(NamedTuple):
    """Ready/total endpoints of one Service, summed over its EndpointSlices."""

    namespace: str
    service: str
    ready: int
    total: int


class EventState(NamedTuple):
    namespace: str
    name: str
    uid: str
    kind: str
    obj_namespace: str
    obj_name: str
    obj_uid: str
    reason: str
    message: str
    times: int  # the Event's count (or series.count): how often it happened


# -- projections and diffs -----------------------------------------------------------------


def _meta(obj: JSON) -> JSON:
    return obj.get("metadata") or {}


def _key(obj: JSON) -> Key:
    m = _meta(obj)
    return str(m.get("namespace") or ""), str(m.get("name") or "")


def _ready_condition(status: JSON) -> tuple[str, str]:
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status") or ""), str(c.get("reason") or "")
    return "", ""


def workload_of(meta: JSON, node: str = "") -> str:
    """``Kind/name`` of a pod's controlling owner (see the module docstring)."""
    refs = meta.get("ownerReferences") or []
    owner = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if owner is None:
        return f"Node/{node}" if MIRROR_ANNOTATION in (meta.get("annotations") or {}) else ""
    kind, name = str(owner.get("kind", "")), str(owner.get("name", ""))
    if kind == "ReplicaSet":
        pth = (meta.get("labels") or {}).get("pod-template-hash")
        if pth and name.endswith(f"-{pth}"):
            return f"Deployment/{name[: -len(pth) - 1]}"
    return f"{kind}/{name}"


class _HasUid(Protocol):
    @property
    def uid(self) -> str: ...


S = TypeVar("S", bound=_HasUid)
Pair = tuple[S | None, S | None]


class _Handler(Protocol[S]):
    resource: str
    schema: type[Any]  # the fields `project` reads (harness.kube.fields)
    api: str
    namespaced: bool

    def project(self, obj: JSON) -> S | None: ...

    def observed(self, states: list[S]) -> list[Emit]: ...

    def changes(self, pairs: list[Pair[S]]) -> list[Emit]: ...


class _NodeHandler:
    resource = "nodes"
    schema: type[Any] = fields.Node
    api = "/api/v1"
    namespaced = False

    def project(self, obj: JSON) -> NodeState | None:
        m, spec = _meta(obj), obj.get("spec") or {}
        ready, reason = _ready_condition(obj.get("status") or {})
        taints = tuple(
            sorted(
                Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
                for t in spec.get("taints") or []
            )
        )
        return NodeState(
            name=str(m.get("name", "")),
            uid=str(m.get("uid", "")),
            ready=ready,
            reason=reason,
            unschedulable=bool(spec.get("unschedulable")),
            taints=taints,
            zone=str((m.get("labels") or {}).get(ZONE_LABEL, "")),
        )

    @staticmethod
    def _state(s: NodeState) -> dict[str, Any]:
        return {
            "uid": s.uid,
            "ready": s.ready,
            "unschedulable": s.unschedulable,
            "taints": [t.id for t in s.taints],
            "zone": s.zone,
        }

    def observed(self, states: list[NodeState]) -> list[Emit]:
        return [(NODE, "", s.name, "observed", self._state(s)) for s in states]

    def changes(self, pairs: list[Pair[NodeState]]) -> list[Emit]:
        out: list[Emit] = []
        for old, new in pairs:
            if new is None:
                if old is not None:
                    out.append((NODE, "", old.name, "deleted", {"uid": old.uid}))
                continue
            if old is None:
                out.append((NODE, "", new.name, "created", self._state(new)))
                old = NodeState(new.name, new.uid, "", "", False, (), new.zone)
            out.extend(self._diff(old, new))
        return out

    @staticmethod
    def _diff(old: NodeState, new: NodeState) -> list[Emit]:
        out: list[Emit] = []
        if new.ready != old.ready and new.ready:
            out.append(
                (
                    NODE,
                    "",
                    new.name,
                    "ready" if new.ready == "True" else "not-ready",
                    {"status": new.ready, "previous": old.ready, "reason": new.reason},
                )
            )
        before = {t.id: t for t in old.taints}
        after = {t.id: t for t in new.taints}
        for tid, t in after.items():
            if tid not in before:
                detail = {"taint": tid, "key": t.key, "value": t.value, "effect": t.effect}
                out.append((NODE, "", new.name, "taint-added", detail))
        for tid, t in before.items():
            if tid not in after:
                detail = {"taint": tid, "key": t.key, "value": t.value, "effect": t.effect}
                out.append((NODE, "", new.name, "taint-removed", detail))
        if new.unschedulable != old.unschedulable:
            out.append((NODE, "", new.name, "cordoned" if new.unschedulable else "uncordoned", {}))
        return out


class _PodHandler:
    resource = "pods"
    schema: type[Any] = fields.Pod
    api = "/api/v1"
    namespaced = True

    def project(self, obj: JSON) -> PodState | None:
        m, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        node = str(spec.get("nodeName") or "")
        grace = m.get("deletionGracePeriodSeconds")
        return PodState(
            namespace=str(m.get("namespace", "")),
            name=str(m.get("name", "")),
            uid=str(m.get("uid", "")),
            node=node,
            phase=str(status.get("phase") or ""),
            ready=_ready_condition(status)[0] == "True",
            terminating=bool(m.get("deletionTimestamp")),
            workload=workload_of(m, node),
            grace_s=int(grace) if grace is not None else None,
        )

    @staticmethod
    def _base(s: PodState) -> dict[str, Any]:
        return {"uid": s.uid, "node": s.node, "workload": s.workload}

    @staticmethod
    def _state(s: PodState) -> dict[str, Any]:
        return {
            "uid": s.uid,
            "node": s.node,
            "phase": s.phase,
            "ready": s.ready,
            "terminating": s.terminating,
            "workload": s.workload,
        }

    def observed(self, states: list[PodState]) -> list[Emit]:
        return [(POD, s.namespace, s.name, "observed", self._state(s)) for s in states]

    def changes(self, pairs: list[Pair[PodState]]) -> list[Emit]:
        out: list[Emit] = []
        for old, new in pairs:
            if new is None:
                if old is not None:
                    out.append((POD, old.namespace, old.name, "deleted", self._base(old)))
                continue
            if old is None:
                out.append((POD, new.namespace, new.name, "created", self._state(new)))
                old = new._replace(node="", phase="Pending", ready=False, terminating=False)
            out.extend(self._diff(old, new))
        return out

    def _diff(self, old: PodState, new: PodState) -> list[Emit]:
        out: list[Emit] = []
        ns, name = new.namespace, new.name
        if new.node != old.node and new.node:
            out.append((POD, ns, name, "scheduled", self._base(new)))
        if new.phase != old.phase and new.phase:
            out.append(
                (
                    POD,
                    ns,
                    name,
                    "phase",
                    {**self._base(new), "phase": new.phase, "previous": old.phase},
                )
            )
        if new.ready != old.ready:
            out.append((POD, ns, name, "ready" if new.ready else "not-ready", self._base(new)))
        if new.terminating and not old.terminating:
            out.append((POD, ns, name, "terminating", {**self._base(new), "grace_s": new.grace_s}))
        return out


class _VolumeAttachmentHandler:
    resource = "volumeattachments"
    schema: type[Any] = fields.VolumeAttachment
    api = "/apis/storage.k8s.io/v1"
    namespaced = False

    def project(self, obj: JSON) -> VolumeAttachmentState | None:
        m, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        return VolumeAttachmentState(
            name=str(m.get("name", "")),
            uid=str(m.get("uid", "")),
            node=str(spec.get("nodeName") or ""),
            pv=str((spec.get("source") or {}).get("persistentVolumeName") or ""),
            attacher=str(spec.get("attacher") or ""),
            attached=bool(status.get("attached")),
            attach_error=str((status.get("attachError") or {}).get("message") or "")[:300],
            detach_error=str((status.get("detachError") or {}).get("message") or "")[:300],
            terminating=bool(m.get("deletionTimestamp")),
        )

    @staticmethod
    def _base(s: VolumeAttachmentState) -> dict[str, Any]:
        return {"uid": s.uid, "node": s.node, "pv": s.pv}

    def observed(self, states: list[VolumeAttachmentState]) -> list[Emit]:
        return [
            (
                VOLUME_ATTACHMENT,
                "",
                s.name,
                "observed",
                {**self._base(s), "attached": s.attached, "attacher": s.attacher},
            )
            for s in states
        ]

    def changes(self, pairs: list[Pair[VolumeAttachmentState]]) -> list[Emit]:
        out: list[Emit] = []
        for old, new in pairs:
            if new is None:
                if old is not None:
                    out.append((VOLUME_ATTACHMENT, "", old.name, "deleted", self._base(old)))
                continue
            if old is None:
                detail = {**self._base(new), "attached": new.attached, "attacher": new.attacher}
                out.append((VOLUME_ATTACHMENT, "", new.name, "created", detail))
                old = new._replace(
                    attached=False, attach_error="", detach_error="", terminating=False
                )
            base = self._base(new)
            if new.attached != old.attached:
                what = "attached" if new.attached else "detached"
                out.append((VOLUME_ATTACHMENT, "", new.name, what, base))
            if new.attach_error != old.attach_error and new.attach_error:
                detail = {**base, "message": new.attach_error}
                out.append((VOLUME_ATTACHMENT, "", new.name, "attach-error", detail))
            if new.detach_error != old.detach_error and new.detach_error:
                detail = {**base, "message": new.detach_error}
                out.append((VOLUME_ATTACHMENT, "", new.name, "detach-error", detail))
            if new.terminating and not old.terminating:
                out.append((VOLUME_ATTACHMENT, "", new.name, "terminating", base))
        return out


class _PvcHandler:
    resource = "persistentvolumeclaims"
    schema: type[Any] = fields.PersistentVolumeClaim
    api = "/api/v1"
    namespaced = True

    def project(self, obj: JSON) -> PvcState | None:
        m = _meta(obj)
        return PvcState(
            namespace=str(m.get("namespace", "")),
            name=str(m.get("name", "")),
            uid=str(m.get("uid", "")),
            phase=str((obj.get("status") or {}).get("phase") or ""),
            volume=str((obj.get("spec") or {}).get("volumeName") or ""),
        )

    def observed(self, states: list[PvcState]) -> list[Emit]:
        return [
            (
                PVC,
                s.namespace,
                s.name,
                "observed",
                {"uid": s.uid, "phase": s.phase, "volume": s.volume},
            )
            for s in states
        ]

    def changes(self, pairs: list[Pair[PvcState]]) -> list[Emit]:
        out: list[Emit] = []
        for old, new in pairs:
            if new is None:
                if old is not None:
                    out.append((PVC, old.namespace, old.name, "deleted", {"uid": old.uid}))
                continue
            if old is None:
                detail = {"uid": new.uid, "phase": new.phase, "volume": new.volume}
                out.append((PVC, new.namespace, new.name, "created", detail))
                old = new._replace(phase="Pending")
            if new.phase != old.phase and new.phase:
                detail = {
                    "uid": new.uid,
                    "phase": new.phase,
                    "previous": old.phase,
                    "volume": new.volume,
                }
                out.append((PVC, new.namespace, new.name, "phase", detail))
        return out


class _EndpointSliceHandler:
    """Keeps ready/total endpoint counts per Service and emits when they change."""

    resource = "endpointslices"
    schema: type[Any] = fields.EndpointSlice
    api = "/apis/discovery.k8s.io/v1"
    namespaced = True

    def __init__(self) -> None:
        self.services: dict[Key, tuple[int, int]] = {}

    def project(self, obj: JSON) -> EndpointSliceState | None:
        m = _meta(obj)
        service = (m.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if not service:
            return None
        endpoints = obj.get("endpoints") or []
        # A missing `ready` condition means "unknown", which consumers treat as ready.
        ready = sum(1 for e in endpoints if (e.get("conditions") or {}).get("ready") is not False)
        return EndpointSliceState(
            namespace=str(m.get("namespace", "")),
            name=str(m.get("name", "")),
            uid=str(m.get("uid", "")),
            service=str(service),
            ready=ready,
            total=len(endpoints),
        )

    def observed(self, states: list[EndpointSliceState]) -> list[Emit]:
        self.services = {}
        for s in states:
            r, t = self.services.get((s.namespace, s.service), (0, 0))
            self.services[(s.namespace, s.service)] = (r + s.ready, t + s.total)
        return [
            (SERVICE, ns, svc, "observed", {"ready": r, "total": t})
            for (ns, svc), (r, t) in self.services.items()
        ]

    def changes(self, pairs: list[Pair[EndpointSliceState]]) -> list[Emit]:
        before: dict[Key, tuple[int, int]] = {}
        for old, new in pairs:
            for s, sign in ((old, -1), (new, 1)):
                if s is None:
                    continue
                key = (s.namespace, s.service)
                cur = self.services.get(key, (0, 0))
                before.setdefault(key, cur)
                self.services[key] = (cur[0] + sign * s.ready, cur[1] + sign * s.total)
        out: list[Emit] = []
        for key, (r0, t0) in before.items():
            r1, t1 = self.services[key]
            if (r1, t1) == (0, 0):
                del self.services[key]
            if (r1, t1) != (r0, t0):
                detail = {"ready": r1, "total": t1, "previous_ready": r0, "previous_total": t0}
                out.append((SERVICE, key[0], key[1], "endpoints", detail))
        return out


class _EventHandler:
    """Turns interesting Events into transitions of the object they are about."""

    resource = "events"
    schema: type[Any] = fields.Event
    api = "/api/v1"
    namespaced = True

    def __init__(self, reasons: frozenset[str]) -> None:
        self.reasons = reasons

    def project(self, obj: JSON) -> EventState | None:
        reason = str(obj.get("reason") or "")
        message = str(obj.get("message") or "")
        if reason not in self.reasons and "Multi-Attach error" not in message:
            return None
        m, inv = _meta(obj), obj.get("involvedObject") or {}
        count = obj.get("count") or (obj.get("series") or {}).get("count") or 1
        return EventState(
            namespace=str(m.get("namespace", "")),
            name=str(m.get("name", "")),
            uid=str(m.get("uid", "")),
            kind=str(inv.get("kind", "")),
            obj_namespace=str(inv.get("namespace") or ""),
            obj_name=str(inv.get("name", "")),
            obj_uid=str(inv.get("uid") or ""),
            reason=reason,
            message=message[:300],
            times=int(count),
        )

    def observed(self, states: list[EventState]) -> list[Emit]:
        return []  # history from before the scenario started is not a transition

    def changes(self, pairs: list[Pair[EventState]]) -> list[Emit]:
        out: list[Emit] = []
        for old, new in pairs:
            if new is None or (old is not None and new.times <= old.times):
                continue
            detail: dict[str, Any] = {
                "uid": new.obj_uid,
                "count": new.times,
                "message": new.message,
            }
            hit = MULTI_ATTACH_RE.search(new.message)
            if "Multi-Attach error" in new.message:
                detail["volume"] = hit.group(1) if hit else ""
                what = "multi-attach"
            else:
                detail["reason"] = new.reason
                what = "event"
            out.append((new.kind, new.obj_namespace, new.obj_name, what, detail))
        return out


# -- watchers ------------------------------------------------------------------------------


def _pairs(old: S | None, new: S | None) -> list[Pair[S]]:
    """One (old, new) pair, split in two when the name now belongs to a new object."""
    if old is not None and new is not None and old.uid != new.uid:
        return [(old, None), (None, new)]
    return [(old, new)]


class _Watcher(Generic[S]):
    def __init__(self, obs: Observer, handler: _Handler[S], namespace: str | None) -> None:
        self.obs = obs
        self.handler = handler
        self.namespace = namespace
        ns = f"/namespaces/{namespace}" if namespace else ""
        self.path = f"{handler.api}{ns}/{handler.resource}"
        self.label = handler.resource + (f"@{namespace}" if namespace else "")
        # Decode only the fields the projection reads (harness.kube.fields), or everything.
        self._decode_page: fields.Decode = orjson.loads
        self._decode_line: fields.Decode = orjson.loads
        if obs.slim_decode:
            self._decode_page = fields.list_decoder(handler.schema, self.label)
            self._decode_line = fields.watch_decoder(handler.schema, self.label)
        self.cache: dict[Key, S] = {}
        self.rv = ""
        self.synced = threading.Event()
        self.error: BaseException | None = None
        self.last_problem = ""
        self._last_ok = time.monotonic()
        # Until when the watch is known to have seen everything: the last event it
        # delivered, or the end of the last stream the API server had accepted less
        # LIVE_MARGIN_S (a live stream delivers within milliseconds, but a change committed
        # through another API server just before this one's stream broke may not have come
        # yet), whichever is later. A re-list's gap starts here.
        self._live_until = self._last_ok
        self._accepted = False
        self._cancel: Callable[[], None] | None = None
        self._cancel_lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._run, name=f"powercut-observer-{self.label}", daemon=True
        )

    # -- thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        client = self.obs._client.clone(maxsize=2)
        try:
            self._loop(client)
        except Exception as exc:  # noqa: BLE001 -- a dead watcher must be reported, not silent
            if self.obs._stop.is_set():
                return  # stopping: a stream cut under our feet is expected, not a failure
            self.error = exc
            self.last_problem = f"{type(exc).__name__}: {exc}"
            log.error("observer %s failed: %s", self.label, self.last_problem)
            self.obs._note(self.label, "failed", error=self.last_problem[:300])
        finally:
            self.synced.set()
            client.close()

    def _set_cancel(self, cancel: Callable[[], None]) -> None:
        self._accepted = True  # the API server accepted this watch: it is live
        with self._cancel_lock:
            self._cancel = cancel
        if self.obs._stop.is_set():
            cancel()

    def cancel(self) -> None:
        with self._cancel_lock:
            cancel = self._cancel
        if cancel is not None:
            cancel()

    def _loop(self, client: KubeClient) -> None:
        stop = self.obs._stop
        low, high = self.obs.backoff_s
        delay = low
        rv: str | None = None
        reason = "initial list"
        refused = _Refusals()  # the 410s since the watch last delivered anything
        since_rv = ""  # what the watch resumed from when the history ran out (a gap's start)
        while not stop.is_set():
            if rv is None:
                exact = refused.list_at()
                try:
                    fresh, list_rv = self._list_after_gone(client, exact)
                except TemporaryError as exc:
                    self._problem("watch-broken", exc)
                    stop.wait(delay)
                    delay = min(delay * 2, high)
                    continue
                except PermanentError as exc:
                    if not self.synced.is_set():
                        self.error = exc
                        self.last_problem = f"{type(exc).__name__}: {exc}"
                        return
                    self._problem("watch-error", exc)
                    stop.wait(max(high, PERMANENT_RETRY_S))
                    continue
                self._resync(
                    fresh,
                    list_rv,
                    reason,
                    time.monotonic(),
                    time.time(),
                    since_rv=since_rv,
                    exact=exact is not None and list_rv == exact,
                )
                del fresh
                rv = list_rv
                delay = low
                refused.relisted()
                self.synced.set()
            self._accepted = False  # set once the API server accepts the watch
            try:
                for ev in client.watch(
                    self.path,
                    resource_version=rv,
                    decode=self._decode_line,
                    timeout_s=self.obs.watch_timeout_s,
                    on_open=self._set_cancel,
                ):
                    if stop.is_set():
                        return
                    self._last_ok = ev.mono
                    delay = low
                    refused.clear()  # this API server had the history: a new round later
                    new_rv = str(_meta(ev.object).get("resourceVersion") or "")
                    if ev.type != "BOOKMARK":
                        self._on_event(ev)
                    if new_rv:
                        rv = self.rv = new_rv
                refused.clear()  # the stream ran to its end: the history was there
            except Gone as exc:
                self._accepted = False  # what it missed is exactly the question
                if stop.is_set():
                    return
                start = refused.add(exc.api_message)
                self.obs._note(
                    self.label,
                    "watch-gone",
                    resource_version=rv,
                    attempt=refused.count,
                    cache_start=start,
                    error=exc.api_message[:200],
                )
                if refused.count <= self.obs.gone_retries:
                    # Another API server may still hold the history (only the one that
                    # answered restarted): the same watch on a new connection, which a
                    # balancer hands to the next API server.
                    client.close()
                    continue
                since_rv = rv or ""
                rv, reason = None, f"410 Gone: {exc.api_message}"[:200]
                client.close()
            except TemporaryError as exc:
                if stop.is_set():
                    return
                self._problem("watch-broken", exc)
                stop.wait(delay)
                delay = min(delay * 2, high)
            except PermanentError as exc:
                if stop.is_set():
                    return
                self._problem("watch-error", exc)
                stop.wait(max(high, PERMANENT_RETRY_S))
            finally:
                if self._accepted:  # live until now, so nothing missed until shortly before
                    self._live_until = time.monotonic() - LIVE_MARGIN_S
                with self._cancel_lock:
                    self._cancel = None

    def _problem(self, what: str, exc: BaseException) -> None:
        self.last_problem = f"{type(exc).__name__}: {exc}"
        log.warning("observer %s: %s: %s", self.label, what, self.last_problem)
        self.obs._note(self.label, what, error=self.last_problem[:300])

    # -- state -----------------------------------------------------------------------------

    def _on_event(self, ev: WatchEvent) -> None:
        h = self.handler
        key = _key(ev.object)
        pairs: list[Pair[S]]
        with self.obs._lock:
            old = self.cache.get(key)
            new = h.project(ev.object)
            if ev.type == "DELETED":
                self.cache.pop(key, None)
                pairs = _pairs(old, new) if old is not None and new is not None else []
                last = new if new is not None else old
                if last is not None:
                    pairs.append((last, None))
            elif new is None:
                self.cache.pop(key, None)
                pairs = [(old, None)] if old is not None else []
            else:
                self.cache[key] = new
                pairs = _pairs(old, new) if new != old else []
            emits = h.changes(pairs) if pairs else []
        if emits:
            self._publish(emits, ev.mono, ev.wall, None)
        elif pairs:
            self.obs.timeline.touch()  # state changed without a transition: wake state waits

    def _list_after_gone(self, client: KubeClient, exact: str | None) -> tuple[dict[Key, S], str]:
        """The list a re-list starts from: the state at ``exact`` (read from etcd) when the
        410s said where the API servers' watch caches start, else the state now."""
        if exact is not None:
            try:
                return self._list(client, exact)
            except ApiError as exc:  # compacted, or not served there: list now
                if isinstance(exc, TemporaryError):
                    raise  # retried with backoff, still at the same resourceVersion
                log.info("observer %s: no list at %s (%s); listing now", self.label, exact, exc)
        return self._list(client)

    def _list(self, client: KubeClient, exact: str | None = None) -> tuple[dict[Key, S], str]:
        """List page by page, keeping only the projection of each object: the raw pages are
        dropped as soon as they are projected, and the collector is paused meanwhile (it is
        most of the cost of building many small objects, and it would find nothing). With
        ``prefetch`` the API server encodes the next page while this one is projected."""
        h = self.handler
        fresh: dict[Key, S] = {}
        rv = ""
        at: dict[str, str] = {}
        if exact is not None:
            at = {"resourceVersion": exact, "resourceVersionMatch": "Exact"}
        with _gc_paused():
            for page, page_rv in client.pages(
                self.path,
                page_size=self.obs.page_size,
                prefetch=self.obs.prefetch,
                decode=self._decode_page,
                **at,
            ):
                rv = page_rv
                for obj in page:
                    s = h.project(obj)
                    if s is not None:
                        fresh[_key(obj)] = s
                del page
        return fresh, rv

    def _resync(
        self,
        fresh: dict[Key, S],
        rv: str,
        reason: str,
        mono: float,
        wall: float,
        *,
        since_rv: str = "",
        exact: bool = False,
    ) -> None:
        h = self.handler
        initial = not self.synced.is_set()
        with self.obs._lock:
            old_cache, self.cache, self.rv = self.cache, fresh, rv
            if initial:
                emits = h.observed(list(fresh.values()))
            else:
                pairs: list[Pair[S]] = []
                for k, o in old_cache.items():
                    n = fresh.get(k)
                    if n is None:
                        pairs.append((o, None))
                    elif n != o:
                        pairs.extend(_pairs(o, n))
                pairs.extend((None, n) for k, n in fresh.items() if k not in old_cache)
                emits = h.changes(pairs) if pairs else []
        if initial:
            self._publish(emits, mono, wall, None)
            self.obs._note(self.label, "synced", mono=mono, objects=len(fresh), resource_version=rv)
        else:
            uncertain = round(max(0.0, mono - self._last_ok), 3)
            self._publish(emits, mono, wall, {"relist": True, "uncertain_s": uncertain})
            self.obs._note(
                self.label,
                "relisted",
                mono=mono,
                reason=reason,
                changes=len(emits),
                uncertain_s=uncertain,
                resource=self.handler.resource,
                since_mono=round(max(self._last_ok, self._live_until), 6),
                since_resource_version=since_rv,
                resource_version=rv,
                exact=exact,
            )
        self._last_ok = self._live_until = mono

    def _publish(
        self, emits: list[Emit], mono: float, wall: float, extra: dict[str, Any] | None
    ) -> None:
        if not emits:
            return
        self.obs.timeline.extend(
            [
                Transition(
                    mono, wall, kind, ns, name, what, {**detail, **extra} if extra else detail
                )
                for kind, ns, name, what, detail in emits
            ]
        )


#: kube-apiserver's answer to a watch from before its watch cache's window: "too old
#: resource version: <asked> (<the oldest it can serve from>)" (k8s.io/apiserver
#: pkg/storage/cacher watch_cache.go, getAllEventsSinceLocked). Right after the cache
#: initialised, the second number is the resourceVersion it listed etcd at.
TOO_OLD_RE = re.compile(r"too old resource version: (\d+) \((\d+)\)")


class _Refusals:
    """The 410 Gone answers of one round of watch retries, and where to re-list from.

    Each answer from a kube-apiserver's watch cache names the oldest resourceVersion that
    cache can replay from. When every try was refused, the re-list reads the state at the
    newest of them (an exact list, which etcd serves while it keeps that revision): every
    cache that answered can replay what came after it, so the watch resumes there and the
    changes made since the caches started are delivered one by one, not folded into a
    list taken later. Without numbers (another server, or another message) it lists now.
    """

    def __init__(self) -> None:
        self.count = 0
        self.starts: list[int] = []

    def add(self, message: str) -> int | None:
        self.count += 1
        hit = TOO_OLD_RE.search(message)
        if hit is None:
            return None
        start = int(hit.group(2))
        self.starts.append(start)
        return start

    def list_at(self) -> str | None:
        """The resourceVersion the re-list should read at, or None for the state now."""
        return str(max(self.starts)) if self.count and self.starts else None

    def clear(self) -> None:
        self.count = 0
        self.starts = []

    def relisted(self) -> None:
        self.clear()


class Gap(NamedTuple):
    """A window in which a watch saw nothing and then re-listed: changes made in it that
    undid each other are not on the timeline (see the module docstring)."""

    resource: str  # nodes, pods, ...
    watcher: str  # the watcher's label (resource@namespace)
    since_mono: float  # the last event the watch delivered before it
    until_mono: float  # the re-list that ended it
    reason: str

    @property
    def seconds(self) -> float:
        return max(0.0, self.until_mono - self.since_mono)

    def overlaps(self, start: float, end: float) -> bool:
        return self.since_mono <= end and start <= self.until_mono

    def to_json(self, origin: float | None = None) -> dict[str, Any]:
        base = origin if origin is not None else 0.0
        return {
            "resource": self.resource,
            "from_s": round(self.since_mono - base, 3),
            "to_s": round(self.until_mono - base, 3),
            "seconds": round(self.seconds, 3),
            "reason": self.reason,
        }


def gaps(
    timeline: Timeline,
    *,
    resources: Iterable[str] | None = None,
    between: tuple[float, float] | None = None,
) -> list[Gap]:
    """The gaps the observers announced on ``timeline`` (every re-list after the first list),
    of ``resources`` only if given, overlapping ``between`` (monotonic) if given."""
    wanted = set(resources) if resources is not None else None
    found: list[Gap] = []
    for t in timeline.all(kind=OBSERVER):
        if t.transition != "relisted" or "since_mono" not in t.detail:
            continue
        gap = Gap(
            str(t.detail.get("resource", "")),
            t.name,
            float(t.detail["since_mono"]),
            t.mono,
            str(t.detail.get("reason", "")),
        )
        if wanted is not None and gap.resource not in wanted:
            continue
        if between is not None and not gap.overlaps(*between):
            continue
        found.append(gap)
    return found


_gc_lock = threading.Lock()
_gc_pausers = 0


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while any watcher is listing (counted across threads)."""
    global _gc_pausers
    with _gc_lock:
        _gc_pausers += 1
        if _gc_pausers == 1:
            was_enabled = gc.isenabled()
            gc.disable()
            _gc_state["enabled"] = was_enabled
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_state.get("enabled", True):
                gc.enable()


_gc_state: dict[str, bool] = {}


# -- the observer --------------------------------------------------------------------------


class Observer:
    """Watches nodes, pods, events, VolumeAttachments, PVCs and EndpointSlices.

    ``Observer(client, namespaces=None)``: cluster-wide, or only the given namespaces for
    namespaced resources (nodes and VolumeAttachments are always cluster-wide). The
    observer never uses ``client``'s own connections: each watcher thread gets a
    ``client.clone()`` (same credentials and TLS context, its own connection pool).
    """

    def __init__(
        self,
        client: KubeClient,
        namespaces: Sequence[str] | None = None,
        *,
        timeline: Timeline | None = None,
        resources: Iterable[str] = RESOURCES,
        event_reasons: Iterable[str] = EVENT_REASONS,
        watch_timeout_s: int = 300,
        page_size: int = 500,
        prefetch: bool = True,
        slim_decode: bool = True,
        # Reconnects back off to 1 s at most: while the API servers are down the watch
        # must be back as soon as one answers, or the changes made through it meanwhile are
        # only seen as a re-list's net result (with a 5 s cap, 12 of 40 cordon flips in the
        # fault bench's every-API-server restarts; a watch retrying every 0.2 s lost none).
        backoff_s: tuple[float, float] = (0.2, 1.0),
        sync_timeout_s: float = 60.0,
        gone_retries: int = GONE_RETRIES,
    ) -> None:
        self._client = client
        self.namespaces = list(namespaces) if namespaces else None
        self.timeline = timeline if timeline is not None else Timeline()
        self.watch_timeout_s = watch_timeout_s
        self.page_size = page_size
        self.prefetch = prefetch
        self.slim_decode = slim_decode
        self.backoff_s = backoff_s
        self.sync_timeout_s = sync_timeout_s
        if gone_retries < 0:
            raise ValueError(f"gone_retries must be 0 or more, not {gone_retries}")
        self.gone_retries = gone_retries
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._started = False
        reasons = frozenset(event_reasons)
        factories: dict[str, Callable[[], _Handler[Any]]] = {
            "nodes": _NodeHandler,
            "pods": _PodHandler,
            "events": lambda: _EventHandler(reasons),
            "volumeattachments": _VolumeAttachmentHandler,
            "persistentvolumeclaims": _PvcHandler,
            "endpointslices": _EndpointSliceHandler,
        }
        self._watchers: dict[str, list[_Watcher[Any]]] = {}
        for resource in resources:
            if resource not in factories:
                valid = ", ".join(factories)
                raise ValueError(f"unknown resource {resource!r}; valid: {valid}")
            probe = factories[resource]()
            scopes: list[str | None] = (
                list(self.namespaces) if probe.namespaced and self.namespaces else [None]
            )
            self._watchers[resource] = [_Watcher(self, factories[resource](), ns) for ns in scopes]

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Observer:
        """Start every watcher; return once each has listed its resource once."""
        if self._started:
            raise RuntimeError("observer already started")
        self._started = True
        watchers = self._all_watchers()
        for w in watchers:
            w.thread.start()
        t0 = time.monotonic()
        deadline = t0 + self.sync_timeout_s
        for w in watchers:
            if not w.synced.wait(max(0.0, deadline - time.monotonic())):
                self.stop()
                raise WaitTimeout(
                    f"initial list of {w.label}",
                    w.last_problem or "no answer yet",
                    time.monotonic() - t0,
                )
            if w.error is not None:
                self.stop()
                raise w.error
        # No gc.freeze() here: frozen objects are never collected, so every stopped
        # observer would stay in memory for good. The state held is slim tuples; a full
        # collection over 30,000 of them costs about a millisecond.
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop every watcher thread and wait for them (idempotent)."""
        self._stop.set()
        watchers = self._all_watchers()
        for w in watchers:
            w.cancel()
        deadline = time.monotonic() + timeout_s
        for w in watchers:
            if w.thread.is_alive():
                w.thread.join(max(0.0, deadline - time.monotonic()))
        self.timeline.touch()

    def __enter__(self) -> Observer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._started and not self._stop.is_set()

    def failure(self) -> str | None:
        """Why observation is broken (a watcher died, or the observer was stopped), or None."""
        for w in self._all_watchers():
            if w.error is not None:
                return f"observer {w.label} failed: {w.last_problem}"
        if self._stop.is_set():
            return "observer stopped"
        return None

    def resource_versions(self) -> dict[str, str]:
        """The resourceVersion each watcher would resume from (for diagnostics)."""
        return {w.label: w.rv for w in self._all_watchers()}

    def _all_watchers(self) -> list[_Watcher[Any]]:
        return [w for ws in self._watchers.values() for w in ws]

    def _note(
        self, label: str, transition: str, *, mono: float | None = None, **detail: Any
    ) -> None:
        self.timeline.record(OBSERVER, label, transition, detail=detail, mono=mono)

    # -- current state ---------------------------------------------------------------------

    def _states(self, resource: str) -> list[Any]:
        if resource not in self._watchers:
            raise ValueError(f"resource {resource!r} is not observed")
        with self._lock:
            return [s for w in self._watchers[resource] for s in w.cache.values()]

    def nodes(self) -> list[NodeState]:
        return sorted(self._states("nodes"), key=lambda n: n.name)

    def node(self, name: str) -> NodeState | None:
        return next((n for n in self._states("nodes") if n.name == name), None)

    def pods(
        self,
        *,
        on_node: str | None = None,
        namespace: str | None = None,
        workload: str | None = None,
    ) -> list[PodState]:
        pods: list[PodState] = self._states("pods")
        return sorted(
            (
                p
                for p in pods
                if (on_node is None or p.node == on_node)
                and (namespace is None or p.namespace == namespace)
                and (workload is None or p.workload == workload)
            ),
            key=lambda p: (p.namespace, p.name),
        )

    def pod(self, namespace: str, name: str) -> PodState | None:
        return next(
            (p for p in self._states("pods") if p.namespace == namespace and p.name == name), None
        )

    def volume_attachments(
        self, *, pv: str | None = None, node: str | None = None
    ) -> list[VolumeAttachmentState]:
        vas: list[VolumeAttachmentState] = self._states("volumeattachments")
        return sorted(
            (v for v in vas if (pv is None or v.pv == pv) and (node is None or v.node == node)),
            key=lambda v: v.name,
        )

    def pvcs(self, namespace: str | None = None) -> list[PvcState]:
        pvcs: list[PvcState] = self._states("persistentvolumeclaims")
        return sorted(
            (p for p in pvcs if namespace is None or p.namespace == namespace),
            key=lambda p: (p.namespace, p.name),
        )

    def pvc(self, namespace: str, name: str) -> PvcState | None:
        return next((p for p in self.pvcs(namespace) if p.name == name), None)

    def endpoints(self, namespace: str, service: str) -> EndpointsState:
        """Ready/total endpoints of a Service now (0/0 when it has no EndpointSlice)."""
        if "endpointslices" not in self._watchers:
            raise ValueError("resource 'endpointslices' is not observed")
        with self._lock:
            for w in self._watchers["endpointslices"]:
                h = w.handler
                if isinstance(h, _EndpointSliceHandler) and (namespace, service) in h.services:
                    r, t = h.services[(namespace, service)]
                    return EndpointsState(namespace, service, r, t)
        return EndpointsState(namespace, service, 0, 0)
