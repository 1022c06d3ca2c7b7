"""The observer's slim decoding (harness.kube.fields) keeps every field a projection reads.

Two guards: every key a projection looks up (found or not) must be in its handler's
schema, whatever the test objects hold; and projections of full objects equal those of the
same objects decoded through the schemas, for realistic objects with every optional part
present, absent or null.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import orjson
import pytest

from harness.kube import fields
from harness.kube.observer.handlers import (
    _EndpointSliceHandler,
    _EventHandler,
    _key,
    _NodeHandler,
    _PodHandler,
    _PvcHandler,
    _VolumeAttachmentHandler,
)

JSON = dict[str, Any]

NOISE: JSON = {
    "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:x": {}}}],
    "generation": 3,
    "creationTimestamp": "2026-11-25T00:00:00Z",
}

NODE: JSON = {
    "kind": "Node",
    "apiVersion": "v1",
    "metadata": {
        "name": "w-a1",
        "uid": "n-uid",
        "resourceVersion": "42",
        "labels": {"topology.kubernetes.io/zone": "rack-a", "kubernetes.io/os": "linux"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        **NOISE,
    },
    "spec": {
        "podCIDR": "10.0.0.0/24",
        "unschedulable": True,
        "taints": [
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "t"},
            {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
        ],
    },
    "status": {
        "capacity": {"cpu": "8"},
        "conditions": [
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
            {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "m"},
        ],
        "nodeInfo": {"kubeletVersion": "v1.36.3"},
        "images": [{"names": ["a", "b"], "sizeBytes": 1}],
    },
}

POD: JSON = {
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {
        "name": "web-5d8f7-abcde",
        "namespace": "lab",
        "uid": "p-uid",
        "resourceVersion": "43",
        "deletionTimestamp": "2026-11-25T00:00:10Z",
        "deletionGracePeriodSeconds": 30,
        "labels": {"app": "web", "pod-template-hash": "5d8f7"},
        "annotations": {"kubernetes.io/config.mirror": "x", "other": "y"},
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "1"},
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-5d8f7",
                "uid": "2",
                "controller": True,
                "blockOwnerDeletion": True,
            },
        ],
        **NOISE,
    },
    "spec": {
        "nodeName": "w-a1",
        "containers": [{"name": "c", "image": "i", "env": [{"name": "A", "value": "B"}]}],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    },
    "status": {
        "phase": "Running",
        "podIP": "10.0.0.5",
        "conditions": [
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": "True", "reason": "r"},
        ],
        "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0}],
    },
}

VOLUME_ATTACHMENT: JSON = {
    "kind": "VolumeAttachment",
    "metadata": {
        "name": "csi-123",
        "uid": "va-uid",
        "resourceVersion": "44",
        "deletionTimestamp": "t",
        **NOISE,
    },
    "spec": {
        "attacher": "lab.powercut.io",
        "nodeName": "w-b2",
        "source": {"persistentVolumeName": "pv-1"},
    },
    "status": {
        "attached": True,
        "attachmentMetadata": {"devicePath": "/dev/x"},
        "attachError": {"time": "t", "message": "attach failed " * 40},
        "detachError": {"time": "t", "message": "detach failed"},
    },
}

PVC: JSON = {
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data-db-0", "namespace": "lab", "uid": "c-uid", **NOISE},
    "spec": {"volumeName": "pv-1", "accessModes": ["ReadWriteOnce"]},
    "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}},
}

ENDPOINT_SLICE: JSON = {
    "kind": "EndpointSlice",
    "metadata": {
        "name": "web-abc",
        "namespace": "lab",
        "uid": "e-uid",
        "labels": {"kubernetes.io/service-name": "web", "x": "y"},
        **NOISE,
    },
    "addressType": "IPv4",
    "endpoints": [
        {"addresses": ["10.0.0.5"], "conditions": {"ready": True, "serving": True}},
        {"addresses": ["10.0.0.6"], "conditions": {"ready": False}},
        {"addresses": ["10.0.0.7"], "conditions": {}},
        {"addresses": ["10.0.0.8"]},
    ],
    "ports": [{"port": 80}],
}

EVENT: JSON = {
    "kind": "Event",
    "metadata": {"name": "db-0.1", "namespace": "lab", "uid": "ev-uid", **NOISE},
    "involvedObject": {
        "kind": "Pod",
        "namespace": "lab",
        "name": "db-0",
        "uid": "p-uid",
        "fieldPath": "spec",
    },
    "reason": "FailedAttachVolume",
    "message": 'Multi-Attach error for volume "pv-1" Volume is already exclusively attached',
    "count": 3,
    "series": {"count": 5, "lastObservedTime": "t"},
    "source": {"component": "attachdetach-controller"},
    "type": "Warning",
}

CASES: list[tuple[str, Any, JSON]] = [
    ("nodes", _NodeHandler(), NODE),
    ("pods", _PodHandler(), POD),
    ("volumeattachments", _VolumeAttachmentHandler(), VOLUME_ATTACHMENT),
    ("persistentvolumeclaims", _PvcHandler(), PVC),
    ("endpointslices", _EndpointSliceHandler(), ENDPOINT_SLICE),
    ("events", _EventHandler(frozenset({"FailedAttachVolume"})), EVENT),
]


# -- which keys a projection looks up ----------------------------------------------------


class _Tracked(dict[str, Any]):
    """A dict that records every key looked up in it (found or not), by path."""

    def __init__(self, data: JSON, path: str, seen: set[str]) -> None:
        super().__init__({k: _track(v, f"{path}.{k}", seen) for k, v in data.items()})
        self._path, self._seen = path, seen

    def get(self, key: str, default: Any = None) -> Any:
        self._seen.add(f"{self._path}.{key}")
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._seen.add(f"{self._path}.{key}")
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._seen.add(f"{self._path}.{key}")
        return super().__contains__(key)


def _track(value: Any, path: str, seen: set[str]) -> Any:
    if isinstance(value, dict):
        return _Tracked(value, path, seen)
    if isinstance(value, list):
        return [_track(v, f"{path}[]", seen) for v in value]
    return value


def _schema_paths(tp: Any, path: str = "$") -> set[str]:
    """Every path a TypedDict schema keeps (nested TypedDicts, lists of them, optionals)."""
    out: set[str] = set()
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            out |= _schema_paths(arg, path)
        return out
    if origin is list:
        return _schema_paths(typing.get_args(tp)[0], f"{path}[]")
    if typing.is_typeddict(tp):
        for key, sub in typing.get_type_hints(tp).items():
            out.add(f"{path}.{key}")
            out |= _schema_paths(sub, f"{path}.{key}")
    return out


@pytest.mark.parametrize(("resource", "handler", "obj"), CASES, ids=[c[0] for c in CASES])
def test_every_key_a_projection_reads_is_in_its_schema(
    resource: str, handler: Any, obj: JSON
) -> None:
    seen: set[str] = set()
    handler.project(_track(obj, "$", seen))
    assert seen, "the projection read nothing: the tracking is broken"
    kept = _schema_paths(handler.schema)
    missing = sorted(seen - kept)
    assert not missing, f"{resource}: the projection reads {missing}, not in fields.{resource}"


# -- projections of full and of slim-decoded objects --------------------------------------


def _variants(obj: JSON) -> list[JSON]:
    """The object as is, then with each top-level part and each metadata part absent or
    null (the API omits empty fields; some clients send null)."""
    out = [obj]
    for key in [k for k in obj if k not in ("kind", "apiVersion")]:
        for repl in ("absent", None):
            o = orjson.loads(orjson.dumps(obj))
            if repl == "absent":
                del o[key]
            else:
                o[key] = None
            out.append(o)
    for key in obj.get("metadata") or {}:
        o = orjson.loads(orjson.dumps(obj))
        o["metadata"][key] = None
        out.append(o)
    return out


@pytest.mark.parametrize(("resource", "handler", "obj"), CASES, ids=[c[0] for c in CASES])
def test_slim_decoding_projects_like_a_full_decode(resource: str, handler: Any, obj: JSON) -> None:
    page_decode = fields.list_decoder(handler.schema, resource)
    line_decode = fields.watch_decoder(handler.schema, resource)
    for variant in _variants(obj):
        raw = orjson.dumps(variant)
        expected = handler.project(orjson.loads(raw))
        page = page_decode(orjson.dumps({"metadata": {"continue": "c"}, "items": [variant]}))
        (slim,) = page["items"]
        assert handler.project(slim) == expected
        ev = line_decode(orjson.dumps({"type": "MODIFIED", "object": variant}))
        assert ev["type"] == "MODIFIED"
        assert handler.project(ev["object"]) == expected


def test_slim_decoding_drops_what_no_projection_reads() -> None:
    decode = fields.list_decoder(fields.Pod, "pods")
    page = decode(orjson.dumps({"metadata": {"resourceVersion": "9"}, "items": [POD]}))
    (slim,) = page["items"]
    assert "managedFields" not in slim["metadata"] and "containers" not in slim["spec"]
    assert slim["metadata"]["labels"] == {"pod-template-hash": "5d8f7"}
    assert slim["metadata"]["annotations"] == {"kubernetes.io/config.mirror": "x"}
    assert page["metadata"] == {"resourceVersion": "9"}


def test_an_error_event_keeps_its_status() -> None:
    decode = fields.watch_decoder(fields.Pod, "pods")
    status = {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired"}
    ev = decode(orjson.dumps({"type": "ERROR", "object": {**status, "message": "too old"}}))
    assert ev == {"type": "ERROR", "object": {**status, "message": "too old"}}
    # written with spaces (not what the API server writes): the schema keeps them too
    spaced = b'{"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "m"}}'
    assert decode(spaced)["object"] == {"code": 410, "reason": "Expired", "message": "m"}


def test_an_unexpected_shape_falls_back_to_a_full_decode() -> None:
    decode = fields.list_decoder(fields.Pod, "pods")
    odd = {"metadata": {}, "items": [{**POD, "status": {**POD["status"], "conditions": "?"}}]}
    page = decode(orjson.dumps(odd))
    assert page["items"][0]["spec"]["containers"], "the fallback decodes everything"
    with pytest.raises(orjson.JSONDecodeError):
        decode(b'{"metadata": {}, "items": [{"metadata": ')


def test_values_many_pods_share_are_kept_once() -> None:
    """Two pages decoded apart hold their own copies of a namespace, node, phase and
    workload; the projections keep one of each (the names and uids stay their own)."""
    decode = fields.list_decoder(fields.Pod, "pods")
    other = {**POD, "metadata": {**POD["metadata"], "name": "web-5d8f7-fghij", "uid": "q-uid"}}
    (a,) = decode(orjson.dumps({"items": [POD]}))["items"]
    (b,) = decode(orjson.dumps({"items": [other]}))["items"]
    assert a["metadata"]["namespace"] is not b["metadata"]["namespace"]  # what decoding gives
    pa, pb = _PodHandler().project(a), _PodHandler().project(b)
    assert pa is not None and pb is not None
    for field in ("namespace", "node", "phase", "workload"):
        assert getattr(pa, field) is getattr(pb, field), field
    assert pa.name != pb.name and pa.uid != pb.uid
    (ka, _), (kb, _) = _key(a), _key(b)
    assert ka is kb is pa.namespace
    node = {**NODE, "metadata": {**NODE["metadata"], "name": "w-a2"}}
    na = _NodeHandler().project(fields.decoder(fields.Node, "n")(orjson.dumps(NODE)))
    nb = _NodeHandler().project(fields.decoder(fields.Node, "n")(orjson.dumps(node)))
    assert na is not None and nb is not None
    assert na.zone is nb.zone and na.ready is nb.ready and na.reason is nb.reason
