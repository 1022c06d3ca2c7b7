"""One handler per watched resource: how an object is projected to its slim state, and which
transitions a change between two states emits (the list in :mod:`harness.kube.observer`).
"""

from __future__ import annotations

from sys import intern
from typing import Any, Protocol

from harness.kube import fields
from harness.kube.client import JSON
from harness.kube.names import Change
from harness.kube.observer.states import (
    Emit,
    EndpointSliceState,
    EventState,
    Key,
    NodeState,
    Pair,
    PodDetail,
    PodState,
    PvcState,
    S,
    Taint,
    VolumeAttachmentState,
)
from harness.kube.observer.vocabulary import (
    MIRROR_ANNOTATION,
    MULTI_ATTACH_RE,
    NODE,
    POD,
    PVC,
    SERVICE,
    SERVICE_NAME_LABEL,
    VOLUME_ATTACHMENT,
    ZONE_LABEL,
)

# -- projections and diffs -----------------------------------------------------------------


def _meta(obj: JSON) -> JSON:
    return obj.get("metadata") or {}


# Values many objects share (a namespace, a node, a phase, a workload) are interned: a
# decoded page holds its own copy of each, and 30,000 pods would keep 30,000 copies of a
# handful of strings (about 8 MB; bench/README.md, "Observer").


def _key(obj: JSON) -> Key:
    m = _meta(obj)
    return intern(str(m.get("namespace") or "")), str(m.get("name") or "")


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
            ready=intern(ready),
            reason=intern(reason),
            unschedulable=bool(spec.get("unschedulable")),
            taints=taints,
            zone=intern(str((m.get("labels") or {}).get(ZONE_LABEL, ""))),
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
        return [(NODE, "", s.name, Change.OBSERVED, self._state(s)) for s in states]

    def changes(self, pairs: list[Pair[NodeState]]) -> list[Emit]:
        out: list[Emit] = []
        for old, new in pairs:
            if new is None:
                if old is not None:
                    out.append((NODE, "", old.name, Change.DELETED, {"uid": old.uid}))
                continue
            if old is None:
                out.append((NODE, "", new.name, Change.CREATED, self._state(new)))
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
                    Change.READY if new.ready == "True" else Change.NOT_READY,
                    {"status": new.ready, "previous": old.ready, "reason": new.reason},
                )
            )
        before = {t.id: t for t in old.taints}
        after = {t.id: t for t in new.taints}
        for tid, t in after.items():
            if tid not in before:
                detail = {"taint": tid, "key": t.key, "value": t.value, "effect": t.effect}
                out.append((NODE, "", new.name, Change.TAINT_ADDED, detail))
        for tid, t in before.items():
            if tid not in after:
                detail = {"taint": tid, "key": t.key, "value": t.value, "effect": t.effect}
                out.append((NODE, "", new.name, Change.TAINT_REMOVED, detail))
        if new.unschedulable != old.unschedulable:
            out.append(
                (
                    NODE,
                    "",
                    new.name,
                    Change.CORDONED if new.unschedulable else Change.UNCORDONED,
                    {},
                )
            )
        return out


class _PodHandler:
    resource = "pods"
    schema: type[Any] = fields.Pod
    api = "/api/v1"
    namespaced = True

    def project(self, obj: JSON) -> PodState | None:
        m, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        node = intern(str(spec.get("nodeName") or ""))
        grace = m.get("deletionGracePeriodSeconds")
        return PodState(
            namespace=intern(str(m.get("namespace", ""))),
            name=str(m.get("name", "")),
            uid=str(m.get("uid", "")),
            node=node,
            phase=intern(str(status.get("phase") or "")),
            ready=_ready_condition(status)[0] == "True",
            terminating=bool(m.get("deletionTimestamp")),
            workload=intern(workload_of(m, node)),
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
        # PodDetail: the keys and values of _state(s), read from s, not a dict per pod
        return [(POD, s.namespace, s.name, Change.OBSERVED, PodDetail(s)) for s in states]

    def changes(self, pairs: list[Pair[PodState]]) -> list[Emit]:
        out: list[Emit] = []
        for old, new in pairs:
            if new is None:
                if old is not None:
                    out.append((POD, old.namespace, old.name, Change.DELETED, self._base(old)))
                continue
            if old is None:
                out.append((POD, new.namespace, new.name, Change.CREATED, self._state(new)))
                old = new._replace(node="", phase="Pending", ready=False, terminating=False)
            out.extend(self._diff(old, new))
        return out

    def _diff(self, old: PodState, new: PodState) -> list[Emit]:
        out: list[Emit] = []
        ns, name = new.namespace, new.name
        if new.node != old.node and new.node:
            out.append((POD, ns, name, Change.SCHEDULED, self._base(new)))
        if new.phase != old.phase and new.phase:
            out.append(
                (
                    POD,
                    ns,
                    name,
                    Change.PHASE,
                    {**self._base(new), "phase": new.phase, "previous": old.phase},
                )
            )
        if new.ready != old.ready:
            out.append(
                (POD, ns, name, Change.READY if new.ready else Change.NOT_READY, self._base(new))
            )
        if new.terminating and not old.terminating:
            out.append(
                (POD, ns, name, Change.TERMINATING, {**self._base(new), "grace_s": new.grace_s})
            )
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
                Change.OBSERVED,
                {**self._base(s), "attached": s.attached, "attacher": s.attacher},
            )
            for s in states
        ]

    def changes(self, pairs: list[Pair[VolumeAttachmentState]]) -> list[Emit]:
        out: list[Emit] = []
        for old, new in pairs:
            if new is None:
                if old is not None:
                    out.append((VOLUME_ATTACHMENT, "", old.name, Change.DELETED, self._base(old)))
                continue
            if old is None:
                detail = {**self._base(new), "attached": new.attached, "attacher": new.attacher}
                out.append((VOLUME_ATTACHMENT, "", new.name, Change.CREATED, detail))
                old = new._replace(
                    attached=False, attach_error="", detach_error="", terminating=False
                )
            base = self._base(new)
            if new.attached != old.attached:
                what = Change.ATTACHED if new.attached else Change.DETACHED
                out.append((VOLUME_ATTACHMENT, "", new.name, what, base))
            if new.attach_error != old.attach_error and new.attach_error:
                detail = {**base, "message": new.attach_error}
                out.append((VOLUME_ATTACHMENT, "", new.name, Change.ATTACH_ERROR, detail))
            if new.detach_error != old.detach_error and new.detach_error:
                detail = {**base, "message": new.detach_error}
                out.append((VOLUME_ATTACHMENT, "", new.name, Change.DETACH_ERROR, detail))
            if new.terminating and not old.terminating:
                out.append((VOLUME_ATTACHMENT, "", new.name, Change.TERMINATING, base))
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
                Change.OBSERVED,
                {"uid": s.uid, "phase": s.phase, "volume": s.volume},
            )
            for s in states
        ]

    def changes(self, pairs: list[Pair[PvcState]]) -> list[Emit]:
        out: list[Emit] = []
        for old, new in pairs:
            if new is None:
                if old is not None:
                    out.append((PVC, old.namespace, old.name, Change.DELETED, {"uid": old.uid}))
                continue
            if old is None:
                detail = {"uid": new.uid, "phase": new.phase, "volume": new.volume}
                out.append((PVC, new.namespace, new.name, Change.CREATED, detail))
                old = new._replace(phase="Pending")
            if new.phase != old.phase and new.phase:
                detail = {
                    "uid": new.uid,
                    "phase": new.phase,
                    "previous": old.phase,
                    "volume": new.volume,
                }
                out.append((PVC, new.namespace, new.name, Change.PHASE, detail))
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
            (SERVICE, ns, svc, Change.OBSERVED, {"ready": r, "total": t})
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
                out.append((SERVICE, key[0], key[1], Change.ENDPOINTS, detail))
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
                what = Change.MULTI_ATTACH
            else:
                detail["reason"] = new.reason
                what = Change.EVENT
            out.append((new.kind, new.obj_namespace, new.obj_name, what, detail))
        return out


# -- watchers ------------------------------------------------------------------------------


def _pairs(old: S | None, new: S | None) -> list[Pair[S]]:
    """One (old, new) pair, split in two when the name now belongs to a new object."""
    if old is not None and new is not None and old.uid != new.uid:
        return [(old, None), (None, new)]
    return [(old, new)]
