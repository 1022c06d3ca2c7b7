"""The slim state the observer keeps per object (NamedTuples, not whole objects), and the
shape of what a handler emits.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, Protocol, TypeVar

Emit = tuple[str, str, str, str, Mapping[str, Any]]  # kind, namespace, name, transition, detail
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
    """One pod as the harness knows it: as the observer holds it now (``grace_s``: its
    termination grace period), and as a replay of the timeline rebuilds it at a moment
    (:class:`harness.checks.replay.PodReplay`; ``since``: the monotonic time of the
    transition that produced it)."""

    namespace: str
    name: str
    uid: str
    node: str
    phase: str
    ready: bool
    terminating: bool
    workload: str
    grace_s: int | None = None
    since: float = 0.0

    @property
    def available(self) -> bool:
        """Ready and not Terminating: what a Service or a Deployment would count."""
        return self.ready and not self.terminating

    @property
    def is_mirror(self) -> bool:
        return self.workload.startswith("Node/")

    @property
    def is_daemonset(self) -> bool:
        return self.workload.startswith("DaemonSet/")


class PodDetail(Mapping[str, Any]):
    """The detail of a pod's ``observed`` transition, read from its :class:`PodState`: the
    same keys and values as the dict ``{"uid", "node", "phase", "ready", "terminating",
    "workload"}`` it stands for (equal to it, and ``dict(detail)`` gives it), without a dict
    per pod. The initial list records one per pod, and the timeline keeps them all: a
    six-key dict is 272 bytes, 8 MB for 30,000 pods; this is 48.
    """

    __slots__ = ("_state",)
    KEYS = ("uid", "node", "phase", "ready", "terminating", "workload")

    def __init__(self, state: PodState) -> None:
        self._state = state

    def __getitem__(self, key: str) -> Any:
        if key in self.KEYS:
            return getattr(self._state, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.KEYS)

    def __len__(self) -> int:
        return len(self.KEYS)

    def __repr__(self) -> str:
        return repr(dict(self))


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
