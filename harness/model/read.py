"""Reading the model's settings from a live cluster, read-only, before anything is touched.

Where each setting comes from, first found wins (docs/budgets.md):

1. the flags of the static pods in kube-system (``component=kube-controller-manager`` and
   ``kube-apiserver``: kubeadm, RKE2);
2. kubeadm's ClusterConfiguration (ConfigMap ``kube-system/kubeadm-config``,
   ``controllerManager.extraArgs`` / ``apiServer.extraArgs``), which the lab publishes too;
3. the nodes' Leases (``spec.leaseDurationSeconds``) and a kubelet's configz through the
   nodes proxy (shutdown grace periods), where RBAC allows;
4. else the default of the server's version, marked assumed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import yaml

from harness.errors import PowercutError
from harness.kube import names
from harness.model.facts import NOT_READY, UNREACHABLE, WorkloadModel, toleration_for
from harness.model.settings import DEFAULTS, Setting, default_for, go_duration

__all__ = ["Api", "WorkloadRef", "flags_from_command", "read_settings", "read_workloads"]

JSON = dict[str, Any]
ZONE_LABEL = names.LABEL_ZONE


class Api(Protocol):
    """The read-only part of :class:`harness.kube.client.KubeClient` the model uses."""

    def get_or_none(self, path: str) -> JSON | None: ...

    def list(self, path: str, *, page_size: int = 500, **params: Any) -> tuple[list[JSON], str]: ...


class WorkloadRef(Protocol):
    """A workload of the inventory (``harness.inventory.models.WorkloadSpec``)."""

    @property
    def namespace(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str | None: ...

    @property
    def selector(self) -> str | None: ...


def _quiet_get(api: Api, path: str) -> JSON | None:
    """``path``, or None where it is missing or not allowed (the model then assumes)."""
    try:
        return api.get_or_none(path)
    except PowercutError:
        return None


def _quiet_list(api: Api, path: str, **params: Any) -> list[JSON]:
    try:
        return api.list(path, **params)[0]
    except PowercutError:
        return []


_FLAG = re.compile(r"^--([a-z0-9-]+)=(.*)$")


def flags_from_command(args: Iterable[str]) -> dict[str, str]:
    """``{"node-monitor-grace-period": "40s"}`` from a component's command line."""
    return {m.group(1): m.group(2) for a in args if (m := _FLAG.match(a))}


def _static_pod_flags(api: Api, component: str) -> tuple[dict[str, str], str]:
    pods = _quiet_list(
        api, "/api/v1/namespaces/kube-system/pods", labelSelector=f"component={component}"
    )
    for pod in sorted(pods, key=lambda p: str(p.get("metadata", {}).get("name"))):
        for c in (pod.get("spec") or {}).get("containers") or []:
            flags = flags_from_command([*(c.get("command") or []), *(c.get("args") or [])])
            if flags:
                return flags, f"flag of static pod kube-system/{pod['metadata']['name']}"
    return {}, ""


def _kubeadm_flags(api: Api) -> dict[str, tuple[dict[str, str], str]]:
    cm = _quiet_get(api, "/api/v1/namespaces/kube-system/configmaps/kubeadm-config")
    text = ((cm or {}).get("data") or {}).get("ClusterConfiguration")
    if not text:
        return {}
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return {}
    out: dict[str, tuple[dict[str, str], str]] = {}
    for part, component in (
        ("controllerManager", "kube-controller-manager"),
        ("apiServer", "kube-apiserver"),
    ):
        extra = (doc.get(part) or {}).get("extraArgs") or {}
        if isinstance(extra, list):  # kubeadm v1beta4: [{name, value}]
            extra = {str(a.get("name")): a.get("value") for a in extra if isinstance(a, dict)}
        flags = {str(k): str(v) for k, v in extra.items()} if isinstance(extra, dict) else {}
        out[component] = (flags, f"{part}.extraArgs of ConfigMap kube-system/kubeadm-config")
    return out


_COMPONENT_OF = {
    "default-not-ready-toleration-seconds": "kube-apiserver",
    "default-unreachable-toleration-seconds": "kube-apiserver",
}
_KUBELET = ("nodeLeaseDurationSeconds", "shutdownGracePeriod", "shutdownGracePeriodCriticalPods")


def server_version(api: Api) -> tuple[int, int] | None:
    doc = _quiet_get(api, "/version") or {}
    major = re.sub(r"\D", "", str(doc.get("major", "")))
    minor = re.sub(r"\D", "", str(doc.get("minor", "")))
    return (int(major), int(minor)) if major and minor else None


def read_settings(
    api: Api, nodes: Sequence[JSON]
) -> tuple[dict[str, Setting], tuple[int, int] | None]:
    """Every setting of :data:`DEFAULTS`, read where the cluster shows it, and the server's
    version."""
    version = server_version(api)
    sources: dict[str, list[tuple[dict[str, str], str]]] = {}
    kubeadm = _kubeadm_flags(api)
    for component in ("kube-controller-manager", "kube-apiserver"):
        found = [_static_pod_flags(api, component)]
        if component in kubeadm:
            found.append(kubeadm[component])
        sources[component] = [f for f in found if f[1]]
    out: dict[str, Setting] = {}
    for name, (_, unit) in DEFAULTS.items():
        if name in _KUBELET:
            continue
        component = _COMPONENT_OF.get(name, "kube-controller-manager")
        for flags, where in sources[component]:
            if name in flags and (value := go_duration(flags[name])) is not None:
                out[name] = Setting(name, value, unit, f"{where} --{name}={flags[name]}")
                break
        else:
            out[name] = default_for(name, version)
    out.update(_kubelet_settings(api, nodes, version))
    return out, version


def _kubelet_settings(
    api: Api, nodes: Sequence[JSON], version: tuple[int, int] | None
) -> dict[str, Setting]:
    out: dict[str, Setting] = {}
    leases = _quiet_list(api, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")
    durations = Counter(
        int(d) for lease in leases if (d := (lease.get("spec") or {}).get("leaseDurationSeconds"))
    )
    if durations:
        value, count = durations.most_common(1)[0]
        out["nodeLeaseDurationSeconds"] = Setting(
            "nodeLeaseDurationSeconds",
            float(value),
            "s",
            f"spec.leaseDurationSeconds of {count} of {len(leases)} Leases in kube-node-lease",
        )
    for name in configz_candidates(nodes):
        doc = _quiet_get(api, f"/api/v1/nodes/{name}/proxy/configz")
        config = (doc or {}).get("kubeletconfig") or {}
        if not config:
            continue  # its kubelet is down, or its configz is off: the next one
        for key in _KUBELET:
            if (
                key in config
                and key not in out
                and (seconds := go_duration(str(config[key]))) is not None
            ):
                out[key] = Setting(
                    key, seconds, "s", f"kubelet configz of node {name} (nodes/proxy)"
                )
        break
    for key in _KUBELET:
        if key not in out:
            out[key] = default_for(key, version)
    return out


#: How many nodes' configz are asked for before the kubelet's defaults are assumed.
CONFIGZ_TRIES = 3


def _ready(node: JSON) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def configz_candidates(nodes: Sequence[JSON]) -> list[str]:
    """The nodes whose kubelet configz is asked for, in order, at most :data:`CONFIGZ_TRIES`:
    Ready workers first (a worker's kubelet is the one a failure's timings come from; a
    NotReady node's proxy only times out), then the other workers, then the rest."""

    def rank(n: JSON) -> tuple[bool, bool]:
        control = names.LABEL_CONTROL_PLANE in (n.get("metadata", {}).get("labels") or {})
        return (control, not _ready(n))

    return [n["metadata"]["name"] for n in sorted(nodes, key=rank)][:CONFIGZ_TRIES]


def zone_sizes(nodes: Sequence[JSON]) -> list[int]:
    """How many nodes each zone (``topology.kubernetes.io/zone``) has."""
    zones = Counter((n.get("metadata", {}).get("labels") or {}).get(ZONE_LABEL, "") for n in nodes)
    return sorted(zones.values(), reverse=True)


_PLURAL = {
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
    "Job": "jobs",
}


def _selector_text(match: JSON) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((match or {}).items()))


def read_workloads(
    api: Api,
    workloads: Sequence[WorkloadRef],
    default_unreachable: Setting,
    default_not_ready: Setting,
) -> list[WorkloadModel]:
    """Each inventory workload's tolerations (from its pods, else its template plus the
    API server's defaults, assumed), PDB and StatefulSet policy."""
    out: list[WorkloadModel] = []
    for w in workloads:
        group = "batch/v1" if w.kind == "Job" else "apps/v1"
        objs: list[JSON]
        if w.name:
            obj = _quiet_get(
                api, f"/apis/{group}/namespaces/{w.namespace}/{_PLURAL[w.kind]}/{w.name}"
            )
            objs = [obj] if obj else []
        else:
            objs = _quiet_list(
                api,
                f"/apis/{group}/namespaces/{w.namespace}/{_PLURAL[w.kind]}",
                labelSelector=w.selector or "",
            )
        for obj in objs:
            out.append(_workload(api, w.kind, obj, default_unreachable, default_not_ready))
    return out


def _workload(
    api: Api, kind: str, obj: JSON, d_unreach: Setting, d_not_ready: Setting
) -> WorkloadModel:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    match = (spec.get("selector") or {}).get("matchLabels") or {}
    pods = (
        _quiet_list(api, f"/api/v1/namespaces/{ns}/pods", labelSelector=_selector_text(match))
        if match
        else []
    )
    assumed = False
    if pods:
        tols = [(p.get("spec") or {}).get("tolerations") or [] for p in pods]
        unreach = max(toleration_for(t, UNREACHABLE) for t in tols)
        not_ready = max(toleration_for(t, NOT_READY) for t in tols)
        source = f"spec.tolerations of {len(pods)} pod(s) of {ns}/{name}"
    else:
        template = ((spec.get("template") or {}).get("spec") or {}).get("tolerations") or []
        unreach = _with_default(template, UNREACHABLE, d_unreach.value, kind)
        not_ready = _with_default(template, NOT_READY, d_not_ready.value, kind)
        source = f"pod template of {ns}/{name} and the API server's default tolerations"
        assumed = True
    if kind == "DaemonSet":  # the DaemonSet controller adds both without limit
        unreach = not_ready = float("inf")
    templ_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return WorkloadModel(
        ref=f"{ns}/{name}",
        kind=kind,
        replicas=spec.get("replicas"),
        unreachable_s=unreach,
        not_ready_s=not_ready,
        source=source,
        assumed=assumed,
        pdb=_pdb_for(api, ns, templ_labels),
        pod_management_policy=spec.get("podManagementPolicy") if kind == "StatefulSet" else None,
    )


def _with_default(template: list[JSON], taint: str, default: float, kind: str) -> float:
    """Tolerations as admission would leave them: DefaultTolerationSeconds adds ``default``
    where the template has no toleration of ``taint``."""
    if any(t.get("key") == taint for t in template):
        return toleration_for(template, taint)
    return default


def _pdb_for(api: Api, ns: str, labels: JSON) -> str | None:
    for pdb in _quiet_list(api, f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"):
        spec = pdb.get("spec") or {}
        match = (spec.get("selector") or {}).get("matchLabels") or {}
        if match and all(labels.get(k) == v for k, v in match.items()):
            limit = (
                f"minAvailable {spec['minAvailable']}"
                if "minAvailable" in spec
                else f"maxUnavailable {spec.get('maxUnavailable')}"
            )
            return f"{ns}/{pdb['metadata']['name']} ({limit})"
    return None
