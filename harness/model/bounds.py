"""Each phase's bounds as Kubernetes' own model of the cluster predicts them.

A :class:`Bound` says, for one budget (``harness.budgets``), the least time the phase can
take (``low_s``: a budget below it cannot hold) and the most Kubernetes should take
(``high_s``: beyond it the phase deviates from Kubernetes' own behaviour), the setting that
dominates it and where that setting was read. Phases the model cannot predict (a server's
boot, a drain, the harness's own actions) have no bound. The arithmetic is in
docs/budgets.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from harness.model.facts import WorkloadModel
from harness.model.settings import FIXED, Setting

__all__ = ["OBSERVATION_SLACK_S", "Bound", "compute_bounds"]

#: What watching adds to a phase that Kubernetes ends: the watch's delivery and the
#: informers' queues (the observer stamps events as read). Added to every upper bound.
OBSERVATION_SLACK_S: Final = 2.0


@dataclass(frozen=True, slots=True)
class Bound:
    """The modelled bounds of the phase judged by budget ``budget`` (a field name)."""

    budget: str
    low_s: float
    high_s: float | None
    setting: str  # the dominating setting(s), as the component spells them
    source: str  # where it was read, or "assumed: ..."
    why: str  # the arithmetic in words

    @property
    def assumed(self) -> bool:
        """Whether a setting behind it was assumed (a default), not read from the cluster."""
        return "assumed" in self.source

    def shown(self) -> str:
        high = "no upper bound" if self.high_s is None else f"<= {self.high_s:g} s"
        return f"{self.low_s:g} s .. {high} ({self.setting}: {self.source})"

    def to_json(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "low_s": round(self.low_s, 3),
            "high_s": None if self.high_s is None else round(self.high_s, 3),
            "setting": self.setting,
            "source": self.source,
            "why": self.why,
        }

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> Bound:
        high = doc.get("high_s")
        return Bound(
            str(doc["budget"]),
            float(doc["low_s"]),
            None if high is None else float(high),
            str(doc["setting"]),
            str(doc["source"]),
            str(doc.get("why", "")),
        )


def _src(*settings: Setting) -> str:
    return "; ".join(
        f"{s.name}: " + (f"assumed ({s.source})" if s.assumed else s.source) for s in settings
    )


def _fixed(name: str) -> Setting:
    value, unit, what = FIXED[name]
    return Setting(name, value, unit, what, assumed=True)


def compute_bounds(
    s: Mapping[str, Setting], workloads: Sequence[WorkloadModel], zone_sizes: Sequence[int]
) -> dict[str, Bound]:
    """The bounds the settings ``s`` (by name), the workloads and the zones' node counts
    predict, by budget name."""
    grace, period = s["node-monitor-grace-period"], s["node-monitor-period"]
    lease = s["nodeLeaseDurationSeconds"]
    renew = lease.value / 4  # the kubelet renews its Lease every quarter of its duration
    out: dict[str, Bound] = {}
    low = max(0.0, grace.value - renew)
    high = grace.value + period.value + OBSERVATION_SLACK_S
    out["node_not_ready"] = Bound(
        "node_not_ready",
        low,
        high,
        "node-monitor-grace-period",
        _src(grace, period, lease),
        f"NotReady {grace.value:g} s after the last Lease renewal (renewed every "
        f"{renew:g} s), seen at the next node-monitor-period ({period.value:g} s)",
    )
    lead, retry = s["leader-elect-lease-duration"], s["leader-elect-retry-period"]
    out["control_plane_node_not_ready"] = Bound(
        "control_plane_node_not_ready",
        low,
        high + lead.value + retry.value,
        "node-monitor-grace-period",
        _src(grace, period, lead, retry),
        "as node-not-ready, plus a new controller-manager leader's election "
        f"({lead.value:g} s lease + {retry.value:g} s retry) when the leader's node was lost",
    )
    rate = s["node-eviction-rate"]
    biggest = max(zone_sizes, default=1)
    out["taint_applied"] = Bound(
        "taint_applied",
        0.0,
        period.value + max(0, biggest - 1) / max(rate.value, 1e-9) + OBSERVATION_SLACK_S,
        "node-eviction-rate",
        _src(rate, period, s["unhealthy-zone-threshold"], s["secondary-node-eviction-rate"]),
        f"tainted at the next node-monitor-period; a zone's nodes one per "
        f"{1 / max(rate.value, 1e-9):g} s (largest zone: {biggest} nodes). A zone more than "
        f"{s['unhealthy-zone-threshold'].value:g} NotReady drops to the secondary rate "
        "(0 below large-cluster-size-threshold nodes): failing most of a zone can stop it",
    )
    out.update(_eviction(s, workloads))
    quarantine, gc = _fixed("podgc-quarantine"), _fixed("podgc-period")
    # Low 0 for both: the features judge with them what ends sooner too (pods force-deleted
    # by the operator or the out-of-service taint; a volume released once its node returns).
    out["pod_gc"] = Bound(
        "pod_gc",
        0.0,
        quarantine.value + 2 * gc.value + OBSERVATION_SLACK_S,
        "podgc-quarantine",
        _src(quarantine, gc),
        "an orphaned pod (its Node deleted) is seen at a PodGC pass and deleted at the first "
        f"pass after its {quarantine.value:g} s quarantine (passes every {gc.value:g} s); "
        "a force-deleted pod or one on an out-of-service node goes sooner",
    )
    wait = _fixed("maxWaitForUnmountDuration")
    out["volume_detach"] = Bound(
        "volume_detach",
        0.0,
        wait.value + 60.0 + OBSERVATION_SLACK_S,
        "maxWaitForUnmountDuration",
        _src(wait),
        f"force detach from an unhealthy node after {wait.value:g} s at the latest (plus up "
        "to the desired-state populator's 60 s); sooner when the node returns",
    )
    out["volume_detach_out_of_service"] = Bound(
        "volume_detach_out_of_service",
        0.0,
        gc.value + OBSERVATION_SLACK_S,
        "podgc-period",
        _src(gc),
        "PodGC force-deletes the node's Terminating pods at its next pass, then the volume "
        "is detached at once",
    )
    return out


def _eviction(s: Mapping[str, Setting], workloads: Sequence[WorkloadModel]) -> dict[str, Bound]:
    """pod-eviction: the unreachable taint -> pods deleted, by the workloads' tolerations
    (DaemonSets are never evicted; the longest finite toleration dominates)."""
    evicted = [w for w in workloads if w.unreachable_s != float("inf")]
    default = s["default-unreachable-toleration-seconds"]
    if evicted:
        slowest = max(evicted, key=lambda w: w.unreachable_s)
        fastest = min(w.unreachable_s for w in evicted)
        setting = f"{slowest.ref}'s unreachable tolerationSeconds"
        source = (
            ("assumed: " if slowest.assumed else "")
            + slowest.source
            + f"; the workloads' range: {fastest:g}-{slowest.unreachable_s:g} s"
        )
        low, high = slowest.unreachable_s, slowest.unreachable_s
        why = f"{slowest.ref}'s pods tolerate unreachable for {slowest.unreachable_s:g} s"
    else:
        setting, source = default.name, _src(default)
        low = high = default.value
        why = f"pods without tolerations of their own get {default.value:g} s at admission"
    return {
        "pod_eviction": Bound(
            "pod_eviction", low, high + OBSERVATION_SLACK_S + 1.0, setting, source, why
        )
    }
