"""Assertions over the timeline: each returns a :class:`Measurement` or raises
:class:`CheckFailed` (expected, seen, waited).

References (``since``, ``start``, ``end``) are a :class:`~harness.kube.timeline.Transition`
(typically the harness's own ``power-off acknowledged`` action) or a monotonic timestamp.
Checks about the future wait on the timeline (no polling) until their deadline and end as
soon as the outcome is known; run on a finished timeline they answer at once.
"""

from harness.checks.base import CheckFailed, Measurement, Ref
from harness.checks.nodes import (
    NOT_READY_NO_EXECUTE,
    OUT_OF_SERVICE_NO_EXECUTE,
    UNREACHABLE_NO_EXECUTE,
    node_not_ready,
    node_ready,
    taint_present,
)
from harness.checks.pods import (
    available_throughout,
    pods_evicted,
    quorum_kept,
    replacement_ready,
    spread_over_racks,
    still_terminating,
)
from harness.checks.service import Prober, probe_health
from harness.checks.volumes import multi_attach_absent, multi_attach_seen, volume_moved

__all__ = [
    "NOT_READY_NO_EXECUTE",
    "OUT_OF_SERVICE_NO_EXECUTE",
    "UNREACHABLE_NO_EXECUTE",
    "CheckFailed",
    "Measurement",
    "Prober",
    "Ref",
    "available_throughout",
    "multi_attach_absent",
    "multi_attach_seen",
    "node_not_ready",
    "node_ready",
    "pods_evicted",
    "probe_health",
    "quorum_kept",
    "replacement_ready",
    "spread_over_racks",
    "still_terminating",
    "taint_present",
    "volume_moved",
]
