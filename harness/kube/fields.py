"""What the observer reads of each object, as schemas a decoder can skip the rest with.

A pod as listed is about 6 KB of JSON, of which the observer's projections read a few
dozen bytes: names, the node, the phase, the Ready condition, the owner. Decoding all of it
into dicts (``orjson.loads``) is most of the client's cost of a large list or a busy watch.
These ``TypedDict`` schemas name the fields the projections in ``observer/handlers.py`` read, and
msgspec decodes a page or a watch line straight into plain dicts holding those fields only,
skipping the others without building them (about 8x faster than a full decode of a page of
pods, and a fraction of the memory). The projections are unchanged: they still read dicts.

Every field is optional (``total=False``) and every container may be ``null``, as in the
API. A value whose type is not the expected one (a server or a version that differs) makes
the decoder fall back to a full ``orjson`` decode of that page or line, so nothing is lost,
only time. A field a projection reads must be named here: ``tests/unit/test_fields.py``
compares every projection of full objects with the projection of the same objects decoded
through these schemas, and the lab tests do so for every object of a live cluster.

This module has no ``from __future__ import annotations``: msgspec reads the annotations.
"""

import logging
from collections.abc import Callable
from typing import Any, Generic, TypedDict, TypeVar

import msgspec
import orjson

log = logging.getLogger(__name__)

T = TypeVar("T")

# Well-known label and annotation keys (the only ones any projection reads).
_Labels = TypedDict(
    "_Labels",
    {
        "pod-template-hash": Any,
        "topology.kubernetes.io/zone": Any,
        "kubernetes.io/service-name": Any,
    },
    total=False,
)
_Annotations = TypedDict("_Annotations", {"kubernetes.io/config.mirror": Any}, total=False)


class _OwnerRef(TypedDict, total=False):
    kind: Any
    name: Any
    controller: Any


class _Meta(TypedDict, total=False):
    name: Any
    namespace: Any
    uid: Any
    resourceVersion: Any
    deletionTimestamp: Any
    deletionGracePeriodSeconds: Any
    ownerReferences: list[_OwnerRef] | None
    labels: _Labels | None
    annotations: _Annotations | None


class _Condition(TypedDict, total=False):
    type: Any
    status: Any
    reason: Any


class _Taint(TypedDict, total=False):
    key: Any
    value: Any
    effect: Any


# An ERROR watch event carries a Status (code, reason, message) instead of the object; it
# is decoded whole (watch_decoder), and every schema keeps those fields all the same.
class _Object(TypedDict, total=False):
    metadata: _Meta | None
    code: Any
    reason: Any
    message: Any


class _NodeSpec(TypedDict, total=False):
    taints: list[_Taint] | None
    unschedulable: Any


class _NodeStatus(TypedDict, total=False):
    conditions: list[_Condition] | None


class Node(_Object, total=False):
    spec: _NodeSpec | None
    status: _NodeStatus | None


class _PodSpec(TypedDict, total=False):
    nodeName: Any


class _PodStatus(TypedDict, total=False):
    phase: Any
    conditions: list[_Condition] | None


class Pod(_Object, total=False):
    spec: _PodSpec | None
    status: _PodStatus | None


class _VaSource(TypedDict, total=False):
    persistentVolumeName: Any


class _VaSpec(TypedDict, total=False):
    nodeName: Any
    attacher: Any
    source: _VaSource | None


class _VaError(TypedDict, total=False):
    message: Any


class _VaStatus(TypedDict, total=False):
    attached: Any
    attachError: _VaError | None
    detachError: _VaError | None


class VolumeAttachment(_Object, total=False):
    spec: _VaSpec | None
    status: _VaStatus | None


class _PvcSpec(TypedDict, total=False):
    volumeName: Any


class _PvcStatus(TypedDict, total=False):
    phase: Any


class PersistentVolumeClaim(_Object, total=False):
    spec: _PvcSpec | None
    status: _PvcStatus | None


class _EndpointConditions(TypedDict, total=False):
    ready: Any


class _Endpoint(TypedDict, total=False):
    conditions: _EndpointConditions | None


class EndpointSlice(_Object, total=False):
    endpoints: list[_Endpoint] | None


class _InvolvedObject(TypedDict, total=False):
    kind: Any
    namespace: Any
    name: Any
    uid: Any


class _Series(TypedDict, total=False):
    count: Any


class Event(_Object, total=False):
    count: Any
    series: _Series | None
    involvedObject: _InvolvedObject | None


# `continue` is a keyword, hence the functional form.
_ListMeta = TypedDict(
    "_ListMeta",
    {"resourceVersion": Any, "continue": Any, "remainingItemCount": Any},
    total=False,
)


class ListOf(TypedDict, Generic[T], total=False):
    metadata: _ListMeta | None
    items: list[T] | None


class WatchEventOf(TypedDict, Generic[T], total=False):
    type: Any
    object: T | None


#: what a decoder reads: a watch line (bytes) or a list page (bytes, or a view of the memory
#: map harness.kube.client read it into)
Buffer = bytes | bytearray | memoryview
Decode = Callable[[Buffer], Any]


def decoder(schema: type[Any], what: str) -> Decode:
    """A decoder that keeps the fields of ``schema`` only; on a value of an unexpected type
    it decodes the whole document with orjson instead (malformed JSON raises orjson's
    ``JSONDecodeError``, as a full decode would)."""
    fast = msgspec.json.Decoder(schema)
    warned = False

    def decode(raw: Buffer) -> Any:
        nonlocal warned
        try:
            return fast.decode(raw)
        except msgspec.DecodeError as exc:
            if not warned and isinstance(exc, msgspec.ValidationError):
                warned = True
                log.info("%s: decoding in full (unexpected shape: %s)", what, exc)
            return orjson.loads(raw)

    return decode


def list_decoder(schema: type[Any], what: str) -> Decode:
    """Decoder for one page of a list of ``schema`` objects."""
    return decoder(ListOf[schema], f"list of {what}")  # type: ignore[valid-type]


_ERROR_EVENT = b'{"type":"ERROR"'


def watch_decoder(schema: type[Any], what: str) -> Decode:
    """Decoder for one line of a watch of ``schema`` objects. An ERROR event (the API
    server writes ``type`` first) carries a Status, decoded whole."""
    slim = decoder(WatchEventOf[schema], f"watch of {what}")  # type: ignore[valid-type]

    def decode(raw: Buffer) -> Any:
        if raw[: len(_ERROR_EVENT)] == _ERROR_EVENT:
            return orjson.loads(raw)
        return slim(raw)

    return decode
