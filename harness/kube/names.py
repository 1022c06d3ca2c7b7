"""The harness's vocabulary, declared once: well-known taints, labels and annotations
(Kubernetes' own and powercut's), the kinds of objects on the timeline, the transitions the
observer and the probers emit, and the harness's own actions with their stages.

Producers (the session, :mod:`harness.kube.actions`, the observer, the probers, longevity)
record these values, and consumers (the checks, the phases, the reports, longevity's
measurements) match them by importing the same members, so a name cannot be spelt two
ways. ``tests/unit/test_vocabulary.py`` drives the real producers and checks that every
name a consumer matches is produced, and that no library module spells an action's name
as a string of its own.

This module imports nothing of the harness: the reports, the lab and kindlab may use it.

Sources: Kubernetes' ``well_known_taints.go`` and ``well_known_labels.go``
(k8s.io/api/core/v1), ``kubernetes.io/config.mirror`` (k8s.io/kubernetes/pkg/kubelet/types),
``kubernetes.io/service-name`` (discovery/v1).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Generic, TypedDict, TypeVar

# -- Kubernetes' well-known names -------------------------------------------------------------

#: Taint keys the node lifecycle controller and an operator set (``well_known_taints.go``).
TAINT_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
TAINT_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"
TAINT_OUT_OF_SERVICE: Final = "node.kubernetes.io/out-of-service"
#: The value the out-of-service taint is set with (the Kubernetes docs' example).
OUT_OF_SERVICE_VALUE: Final = "nodeshutdown"
NO_EXECUTE: Final = "NoExecute"
NO_SCHEDULE: Final = "NoSchedule"
#: Taints (``key:effect``, as :attr:`~harness.kube.observer.Taint.id`) the checks wait for.
UNREACHABLE_NO_EXECUTE: Final = f"{TAINT_UNREACHABLE}:{NO_EXECUTE}"
NOT_READY_NO_EXECUTE: Final = f"{TAINT_NOT_READY}:{NO_EXECUTE}"
OUT_OF_SERVICE_NO_EXECUTE: Final = f"{TAINT_OUT_OF_SERVICE}:{NO_EXECUTE}"
#: Taint keys that say a node is not back (the node lifecycle controller's and the operator's).
NODE_DOWN_TAINTS: Final = (TAINT_UNREACHABLE, TAINT_NOT_READY, TAINT_OUT_OF_SERVICE)
#: The prefix of the taints Kubernetes itself manages.
KUBERNETES_TAINT_PREFIX: Final = "node.kubernetes.io/"

#: kubeadm's taint on control-plane nodes (the key is the role label's).
TAINT_CONTROL_PLANE: Final = "node-role.kubernetes.io/control-plane"

LABEL_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_CONTROL_PLANE: Final = TAINT_CONTROL_PLANE
LABEL_MASTER: Final = "node-role.kubernetes.io/master"  # before Kubernetes 1.24
LABEL_WORKER: Final = "node-role.kubernetes.io/worker"
LABEL_SERVICE_NAME: Final = "kubernetes.io/service-name"  # on an EndpointSlice
ANNOTATION_MIRROR: Final = "kubernetes.io/config.mirror"  # a static pod's mirror

# -- powercut's own ------------------------------------------------------------------------------

#: A node's BMC address (``ipmi://host:623``, ``redfish://host``, ...), read by discovery.
ANNOTATION_BMC: Final = "powercut.io/bmc"
ANNOTATION_BMC_USERNAME: Final = "powercut.io/bmc-username"
#: On the lab's nodes.
LABEL_LAB: Final = "powercut.io/lab"
ANNOTATION_LAB_RESYNC: Final = "lab.powercut.io/resync"
LAB_VOLUME_GATE: Final = "lab.powercut.io/volumes"


# -- the timeline --------------------------------------------------------------------------------


class Kind(enum.StrEnum):
    """``Transition.kind``: what a transition is about."""

    NODE = "Node"
    POD = "Pod"
    VOLUME_ATTACHMENT = "VolumeAttachment"
    PVC = "PersistentVolumeClaim"
    SERVICE = "Service"
    OBSERVER = "Observer"
    PROBE = "Probe"  # a service prober's sample
    ACTION = "Action"  # the harness's own actions


class Change(enum.StrEnum):
    """``Transition.transition`` of what the observer and the probers saw (see
    :mod:`harness.kube.observer` for the details each carries)."""

    OBSERVED = "observed"
    CREATED = "created"
    DELETED = "deleted"
    # Node
    READY = "ready"
    NOT_READY = "not-ready"
    TAINT_ADDED = "taint-added"
    TAINT_REMOVED = "taint-removed"
    CORDONED = "cordoned"
    UNCORDONED = "uncordoned"
    # Pod (also READY, NOT_READY)
    SCHEDULED = "scheduled"
    TERMINATING = "terminating"
    PHASE = "phase"
    MULTI_ATTACH = "multi-attach"
    EVENT = "event"
    # VolumeAttachment (also TERMINATING)
    ATTACHED = "attached"
    DETACHED = "detached"
    ATTACH_ERROR = "attach-error"
    DETACH_ERROR = "detach-error"
    # Service
    ENDPOINTS = "endpoints"
    # Observer
    SYNCED = "synced"
    RELISTED = "relisted"
    WATCH_GONE = "watch-gone"
    WATCH_BROKEN = "watch-broken"
    WATCH_ERROR = "watch-error"
    FAILED = "failed"
    # Probe
    OK = "ok"
    FAIL = "fail"


#: What tells a volume is no longer attached to its node.
VOLUME_RELEASED: Final = frozenset({Change.DETACHED, Change.DELETED})


class Stage(enum.StrEnum):
    """Where an action of the harness is: ``<verb> <stage>`` is its transition."""

    SENT = "sent"  # the request went out
    ACKNOWLEDGED = "acknowledged"  # the BMC or node answered it
    CONFIRMED = "confirmed"  # the new state was read back
    DONE = "done"  # an API action finished
    FAILED = "failed"  # an API action raised


class Act(enum.StrEnum):
    """The harness's actions (``Transition.name`` is the node, pod or selector acted on).

    Staged ones are recorded as ``<verb> <stage>`` (:meth:`at`); the others alone."""

    # power (the session)
    POWER_OFF = "power-off"
    POWER_ON = "power-on"
    POWER_CYCLE = "power-cycle"
    POWER_CYCLE_OFF = "power-cycle off"  # the off half of a synchronized cycle
    POWER_CYCLE_ON = "power-cycle on"
    # cuts (the session); the verbs are the failure kinds' names (harness.failures)
    PARTITION = "partition"
    KUBELET_STOP = "kubelet"
    HEAL = "heal"
    KUBELET_START = "kubelet-start"
    STORAGE_CUT = "storage-cut"  # the node's storage network cut (harness.failures)
    STORAGE_HEAL = "storage-heal"
    # the API (harness.kube.actions)
    CORDON = "cordon"
    UNCORDON = "uncordon"
    TAINT = "taint"
    UNTAINT = "untaint"
    DRAIN = "drain"
    DELETE_NODE = "delete-node"
    FORCE_DELETE_PODS = "force-delete-pods"
    RESTART_PODS = "restart-pods"
    RERUN_JOB = "rerun-job"

    def at(self, stage: Stage) -> str:
        """This action's transition at ``stage``: ``Act.POWER_OFF.at(Stage.SENT)`` is
        ``"power-off sent"``."""
        return f"{self.value} {stage.value}"


class Event(enum.StrEnum):
    """The harness's actions recorded once, without stages."""

    POWER_OFF_SKEW = "power-off ack skew"
    POWER_CYCLE_SKEW = "power-cycle ack skew"
    POWER_CYCLE_HELD_OFF = "power-cycle held off"  # a cycle held off for its off_s
    FENCED = "fenced"
    FENCE_OVERRIDDEN = "fencing overridden"
    FINALIZERS_CLEARED = "finalizers cleared"
    EVICTED = "evicted"  # a drain's eviction of one pod (name: the pod)
    BREACHED = "breached"  # a stop condition (name "stop-condition")
    RESTARTED = "restarted"  # longevity's remediation: a pod never Ready again
    RESPREAD_EVICTION = "respread eviction"  # longevity's remediation: spread over racks


#: Where a failure begins on the timeline, per failure verb: the node is down from the
#: acknowledgement of what took it down (a reboot: as :mod:`harness.failures.reboot` says).
#: Each failure kind declares its own (``down_at``; tests/unit/test_failure_kinds.py keeps
#: the two equal). :func:`downs` applies it: the steps, longevity and the reports all read
#: where a node went down through it.
DOWN_FROM: Final = (
    Act.POWER_OFF.at(Stage.ACKNOWLEDGED),
    Act.PARTITION.at(Stage.ACKNOWLEDGED),
    Act.KUBELET_STOP.at(Stage.ACKNOWLEDGED),
    Act.STORAGE_CUT.at(Stage.ACKNOWLEDGED),
    Act.POWER_CYCLE_OFF.at(Stage.ACKNOWLEDGED),
    Act.POWER_CYCLE.at(Stage.SENT),
)
#: Where it ends: power back on, the partition healed, the kubelet started, the cycle done.
BACK_AT: Final = (
    Act.POWER_ON.at(Stage.ACKNOWLEDGED),
    Act.HEAL.at(Stage.ACKNOWLEDGED),
    Act.KUBELET_START.at(Stage.ACKNOWLEDGED),
    Act.STORAGE_HEAL.at(Stage.ACKNOWLEDGED),
    Act.POWER_CYCLE.at(Stage.ACKNOWLEDGED),
)
_CYCLE_SENT: Final = Act.POWER_CYCLE.at(Stage.SENT)
_CYCLE_OFF: Final = Act.POWER_CYCLE_OFF.at(Stage.ACKNOWLEDGED)

A = TypeVar("A")


@dataclass(frozen=True)
class Down(Generic[A]):
    """One node down: the action it went down at and the one it was back at (None: not
    back yet), as the caller's items (a transition, a report's action record)."""

    node: str
    since: A
    back: A | None


def downs(actions: Iterable[tuple[str, str, A]]) -> list[Down[A]]:
    """Where each node was down, from the harness's actions in time order, each given as
    (node, transition, item): from its :data:`DOWN_FROM` to its :data:`BACK_AT` (see
    there). A power cycle opens at its request and, once its power-off is acknowledged
    within the cycle, is down from there instead. Closed ones in the order they closed,
    then the ones still open."""
    open_: dict[str, tuple[str, A]] = {}
    out: list[Down[A]] = []
    for node, what, item in actions:
        if what in DOWN_FROM:
            was = open_.get(node)
            if was is None or (was[0] == _CYCLE_SENT and what == _CYCLE_OFF):
                open_[node] = (what, item)
        elif what in BACK_AT and node in open_:
            out.append(Down(node, open_.pop(node)[1], item))
    out.extend(Down(node, item, None) for node, (_, item) in open_.items())
    return out


# -- typed details: the keys read most -------------------------------------------------------------


class NodeDetail(TypedDict, total=False):
    """``detail`` of a Node transition."""

    uid: str
    ready: str
    status: str
    previous: str
    reason: str
    unschedulable: bool
    taints: list[str]
    zone: str
    taint: str  # taint-added / taint-removed: ``key:effect``
    key: str
    value: str
    effect: str


class PodDetail(TypedDict, total=False):
    """``detail`` of a Pod transition."""

    uid: str
    node: str
    workload: str
    phase: str
    previous: str
    ready: bool
    terminating: bool
    grace_s: int | None
    volume: str
    count: int
    reason: str
    message: str


class VolumeDetail(TypedDict, total=False):
    """``detail`` of a VolumeAttachment transition."""

    uid: str
    node: str
    pv: str
    attached: bool
    attacher: str
    message: str
