"""The names the observer puts on the timeline and reads from the cluster: the kinds of
object it records, the resources it watches, the Event reasons it keeps, and the labels and
annotations its projections read.
"""

from __future__ import annotations

import re

from harness.kube import names
from harness.kube.names import Kind

NODE = Kind.NODE
POD = Kind.POD
VOLUME_ATTACHMENT = Kind.VOLUME_ATTACHMENT
PVC = Kind.PVC
SERVICE = Kind.SERVICE
OBSERVER = Kind.OBSERVER

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
SERVICE_NAME_LABEL = names.LABEL_SERVICE_NAME
ZONE_LABEL = names.LABEL_ZONE
MIRROR_ANNOTATION = names.ANNOTATION_MIRROR
