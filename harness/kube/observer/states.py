"""The slim state the observer keeps per object (NamedTuples, not whole objects), and the
shape of what a handler emits.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, TypeVar

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


class _HasUid(Protocol):
    @property
    def uid(self) -> str: ...


S = TypeVar("S", bound=_HasUid)
Pair = tuple[S | None, S | None]
