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
Watch transitions are stamped when their line was read, by the timeline's clock (the real
one unless the timeline was given another): the watch loop's backoff and a gap's bounds
run on the same clock, so a test steps them with a fake one.

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

The package, one concern a module: :mod:`~harness.kube.observer.vocabulary` (kinds,
resources, reasons, labels), :mod:`~harness.kube.observer.states` (the slim states),
:mod:`~harness.kube.observer.handlers` (projections and diffs, per resource),
:mod:`~harness.kube.observer.watch` (one resource's list+watch loop),
:mod:`~harness.kube.observer.gaps` (announced gaps), :mod:`~harness.kube.observer.gcpause`
(the collector paused while listing) and :mod:`~harness.kube.observer.core` (the
:class:`Observer` and its queries). Import from ``harness.kube.observer``.
"""

from __future__ import annotations

from harness.kube.observer.core import Observer
from harness.kube.observer.gaps import Gap, gaps
from harness.kube.observer.handlers import workload_of
from harness.kube.observer.states import (
    EndpointSliceState,
    EndpointsState,
    EventState,
    NodeState,
    PodState,
    PvcState,
    Taint,
    VolumeAttachmentState,
)
from harness.kube.observer.vocabulary import (
    EVENT_REASONS,
    MIRROR_ANNOTATION,
    MULTI_ATTACH_RE,
    NODE,
    OBSERVER,
    POD,
    PVC,
    RESOURCES,
    SERVICE,
    SERVICE_NAME_LABEL,
    VOLUME_ATTACHMENT,
    ZONE_LABEL,
)
from harness.kube.observer.watch import GONE_RETRIES, LIVE_MARGIN_S, PERMANENT_RETRY_S

__all__ = [
    "EVENT_REASONS",
    "GONE_RETRIES",
    "LIVE_MARGIN_S",
    "MIRROR_ANNOTATION",
    "MULTI_ATTACH_RE",
    "NODE",
    "OBSERVER",
    "PERMANENT_RETRY_S",
    "POD",
    "PVC",
    "RESOURCES",
    "SERVICE",
    "SERVICE_NAME_LABEL",
    "VOLUME_ATTACHMENT",
    "ZONE_LABEL",
    "EndpointSliceState",
    "EndpointsState",
    "EventState",
    "Gap",
    "NodeState",
    "Observer",
    "PodState",
    "PvcState",
    "Taint",
    "VolumeAttachmentState",
    "gaps",
    "workload_of",
]
