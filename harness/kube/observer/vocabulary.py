"""The names the observer puts on the timeline and reads from the cluster: the kinds of
object it records, the resources it watches, the Event reasons it keeps, and the labels and
annotations its projections read.
"""

from __future__ import annotations

import re

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
