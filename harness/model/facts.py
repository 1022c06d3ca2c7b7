"""What the model knows of each workload: its controller's semantics and its pods'
tolerations, as read from the cluster (see docs/budgets.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from harness.kube import names

__all__ = ["NOT_READY", "SEMANTICS", "UNREACHABLE", "WorkloadModel", "toleration_for"]

UNREACHABLE: Final = names.TAINT_UNREACHABLE
NOT_READY: Final = names.TAINT_NOT_READY

#: What each controller does about a pod on a dead node (the model's words for the report).
SEMANTICS: Final[dict[str, str]] = {
    "Deployment": (
        "evicted when its unreachable toleration runs out; the ReplicaSet creates a "
        "replacement at once (the old pod stays Terminating until the node returns or is "
        "deleted)"
    ),
    "StatefulSet": (
        "evicted when its toleration runs out, but never replaced while the old pod exists: "
        "it stays Terminating until the node returns, the Node object is deleted, the pod "
        "is force-deleted or the node is tainted out-of-service"
    ),
    "DaemonSet": (
        "tolerates unreachable and not-ready without limit: never evicted, never replaced "
        "elsewhere; back when its node is"
    ),
    "Job": (
        "evicted when its toleration runs out; the Job controller creates a replacement "
        "(counted against backoffLimit only if the pod failed)"
    ),
}


def toleration_for(tolerations: list[dict[str, Any]], taint: str) -> float:
    """Seconds a pod with ``tolerations`` stays on a node with the NoExecute ``taint``:
    ``tolerationSeconds`` of the matching toleration (the longest if several), ``inf`` for a
    match without seconds, 0 when none matches (evicted at once)."""
    best: float | None = None
    for t in tolerations:
        key, op, effect = t.get("key") or "", t.get("operator") or "Equal", t.get("effect") or ""
        if effect not in ("", "NoExecute"):
            continue
        if not (key == taint or (key == "" and op == "Exists")):
            continue
        seconds = t.get("tolerationSeconds")
        value = float("inf") if seconds is None else max(0.0, float(seconds))
        best = value if best is None else max(best, value)
    return 0.0 if best is None else best


@dataclass(frozen=True, slots=True)
class WorkloadModel:
    """One workload of the inventory as the model sees it.

    ``unreachable_s`` / ``not_ready_s``: how long its pods stay on an unreachable / not-ready
    node (the longest over its pods; ``inf``: never evicted), read from ``source``.
    """

    ref: str  # namespace/name
    kind: str
    replicas: int | None
    unreachable_s: float
    not_ready_s: float
    source: str
    assumed: bool = False
    pdb: str | None = None
    pod_management_policy: str | None = None

    @property
    def semantics(self) -> str:
        text = SEMANTICS.get(self.kind, "")
        if self.kind == "StatefulSet" and self.pod_management_policy:
            text += f" (podManagementPolicy {self.pod_management_policy})"
        if self.pdb:
            text += f"; PodDisruptionBudget {self.pdb} limits drains and evictions"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "kind": self.kind,
            "replicas": self.replicas,
            "unreachable_s": _finite(self.unreachable_s),
            "not_ready_s": _finite(self.not_ready_s),
            "source": self.source,
            "assumed": self.assumed,
            "pdb": self.pdb,
            "pod_management_policy": self.pod_management_policy,
            "semantics": self.semantics,
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> WorkloadModel:
        return WorkloadModel(
            ref=str(doc["ref"]),
            kind=str(doc["kind"]),
            replicas=doc.get("replicas"),
            unreachable_s=_seconds(doc.get("unreachable_s")),
            not_ready_s=_seconds(doc.get("not_ready_s")),
            source=str(doc.get("source", "")),
            assumed=bool(doc.get("assumed", False)),
            pdb=doc.get("pdb"),
            pod_management_policy=doc.get("pod_management_policy"),
        )


def _finite(x: float) -> float | None:
    """JSON has no infinity: None stands for "never"."""
    return None if x == float("inf") else x


def _seconds(x: object) -> float:
    return float("inf") if x is None else float(str(x))
