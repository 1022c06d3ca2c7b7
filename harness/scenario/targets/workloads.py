"""The inventory's workloads as they are in the cluster, and the pods that belong to them.

An inventory lists workloads by name or label selector. Scenarios need more: how many
replicas each should have, whether its pods hold ReadWriteOnce volumes, which
PodDisruptionBudget protects it, and which pods (with which volumes) run where. This module
asks the API once per scenario (a few lists per namespace) and returns frozen records; the
observer's watches do the rest.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.inventory import Inventory, WorkloadSpec
from harness.kube.client import JSON, KubeClient
from harness.kube.observer import workload_of

_APPS = {
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
}
#: Controllers whose pods are replaced elsewhere when lost (DaemonSet pods are not).
REPLACED_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet"})


@dataclass(frozen=True)
class Workload:
    """One controller of the inventory, with what the scenarios need to know about it."""

    namespace: str
    kind: str
    name: str
    desired: int  # replicas (DaemonSet: desiredNumberScheduled)
    template_labels: Mapping[str, str]
    rwo: bool  # its pods mount ReadWriteOnce PersistentVolumeClaims
    critical: bool
    min_available: int  # from the inventory
    health: str | None  # probe target (http(s) URL or host:port)
    pdb: str | None = None  # name of the PodDisruptionBudget that selects its pods
    pdb_min_healthy: int | None = None  # pods the PDB wants healthy (status.desiredHealthy)

    @property
    def key(self) -> str:
        """``Kind/name``, as the observer names a pod's controller."""
        return f"{self.kind}/{self.name}"

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def probe(self) -> str:
        """Name of the workload's service probe in the timeline."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PodInfo:
    """A pod of an inventory workload, with the PersistentVolumes it mounts."""

    namespace: str
    name: str
    uid: str
    node: str
    workload: str  # Kind/name
    pvs: tuple[str, ...]  # bound PersistentVolumes of its ReadWriteOnce claims

    @property
    def kind(self) -> str:
        return self.workload.partition("/")[0]

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def replaced_elsewhere(self) -> bool:
        """Its controller re-creates it on another node when it is lost."""
        return self.kind in REPLACED_KINDS

    @property
    def stateless(self) -> bool:
        return not self.pvs


def _meta(obj: JSON) -> JSON:
    return obj.get("metadata") or {}


def _rwo_claims(template_spec: JSON, claim_templates: Iterable[JSON]) -> bool:
    if any(
        "ReadWriteOnce" in ((t.get("spec") or {}).get("accessModes") or [])
        or "ReadWriteOncePod" in ((t.get("spec") or {}).get("accessModes") or [])
        for t in claim_templates
    ):
        return True
    return any(v.get("persistentVolumeClaim") for v in template_spec.get("volumes") or [])


def _desired(kind: str, obj: JSON) -> int:
    if kind == "DaemonSet":
        return int((obj.get("status") or {}).get("desiredNumberScheduled") or 0)
    replicas = (obj.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def _from_object(spec: WorkloadSpec, obj: JSON) -> Workload:
    kind = spec.kind
    s = obj.get("spec") or {}
    template = s.get("template") or {}
    return Workload(
        namespace=spec.namespace,
        kind=kind,
        name=str(_meta(obj)["name"]),
        desired=_desired(kind, obj),
        template_labels=dict((template.get("metadata") or {}).get("labels") or {}),
        rwo=_rwo_claims(template.get("spec") or {}, s.get("volumeClaimTemplates") or []),
        critical=spec.critical,
        min_available=spec.min_available,
        health=(spec.health.http or spec.health.tcp) if spec.health else None,
    )


def selector_matches(selector: JSON | None, labels: Mapping[str, str]) -> bool:
    """A Kubernetes LabelSelector (matchLabels + matchExpressions) against labels.

    An empty selector matches everything (as in a PodDisruptionBudget); ``None`` nothing.
    """
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op = str(expr.get("key")), str(expr.get("operator"))
        values = [str(v) for v in expr.get("values") or []]
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _pdb_min_healthy(pdb: JSON, desired: int) -> int:
    """Pods the budget wants healthy: its status when the controller has computed it, else
    from the spec (minAvailable, or desired - maxUnavailable; percentages round up)."""
    status = pdb.get("status") or {}
    if status.get("desiredHealthy") is not None and status.get("expectedPods"):
        return int(status["desiredHealthy"])
    spec = pdb.get("spec") or {}

    def amount(value: object) -> int:
        if isinstance(value, str) and value.endswith("%"):
            return math.ceil(desired * float(value[:-1]) / 100)
        return int(str(value))

    if spec.get("minAvailable") is not None:
        return amount(spec["minAvailable"])
    if spec.get("maxUnavailable") is not None:
        return max(0, desired - amount(spec["maxUnavailable"]))
    return 0


def resolve_workloads(client: KubeClient, inventory: Inventory) -> list[Workload]:
    """Every inventory workload as it is now (a selector may match several controllers)."""
    out: list[Workload] = []
    for spec in inventory.workloads:
        collection = f"/apis/apps/v1/namespaces/{spec.namespace}/{_APPS[spec.kind]}"
        if spec.name is not None:
            obj = client.get_or_none(f"{collection}/{spec.name}")
            if obj is None:
                raise ConfigError(
                    f"{spec.ref} from the inventory does not exist in the cluster",
                    source=str(inventory.source or ""),
                    field="workloads",
                )
            found = [obj]
        else:
            found, _ = client.list(collection, labelSelector=spec.selector)
            if not found:
                raise ConfigError(
                    f"{spec.ref} from the inventory matches no {spec.kind} in the cluster",
                    source=str(inventory.source or ""),
                    field="workloads",
                )
        out.extend(_from_object(spec, obj) for obj in found)
    pdbs: dict[str, list[JSON]] = {}
    for ns in sorted({w.namespace for w in out}):
        pdbs[ns], _ = client.list(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets")
    resolved = []
    for w in out:
        pdb = next(
            (
                p
                for p in pdbs.get(w.namespace, [])
                if selector_matches((p.get("spec") or {}).get("selector"), w.template_labels)
            ),
            None,
        )
        if pdb is not None:
            w = dataclasses.replace(
                w, pdb=str(_meta(pdb)["name"]), pdb_min_healthy=_pdb_min_healthy(pdb, w.desired)
            )
        resolved.append(w)
    return resolved


def workload_pods(client: KubeClient, workloads: Iterable[Workload]) -> list[PodInfo]:
    """The pods of the given workloads now, with the PVs of their ReadWriteOnce claims.

    Terminating pods are left out: they are already on their way out.
    """
    wanted = {(w.namespace, w.key) for w in workloads}
    out: list[PodInfo] = []
    for ns in sorted({ns for ns, _ in wanted}):
        pods, _ = client.list(f"/api/v1/namespaces/{ns}/pods")
        claims, _ = client.list(f"/api/v1/namespaces/{ns}/persistentvolumeclaims")
        pv_of = {
            str(_meta(c)["name"]): str((c.get("spec") or {}).get("volumeName") or "")
            for c in claims
            if set((c.get("spec") or {}).get("accessModes") or [])
            & {"ReadWriteOnce", "ReadWriteOncePod"}
        }
        for pod in pods:
            m, spec = _meta(pod), pod.get("spec") or {}
            node = str(spec.get("nodeName") or "")
            key = workload_of(m, node)
            if (ns, key) not in wanted or m.get("deletionTimestamp"):
                continue
            pvs = tuple(
                sorted(
                    pv_of[claim]
                    for v in spec.get("volumes") or []
                    if (claim := (v.get("persistentVolumeClaim") or {}).get("claimName"))
                    and pv_of.get(claim)
                )
            )
            out.append(PodInfo(ns, str(m["name"]), str(m.get("uid")), node, key, pvs))
    return sorted(out, key=lambda p: (p.node, p.namespace, p.name))
