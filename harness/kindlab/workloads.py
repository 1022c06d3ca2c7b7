"""The sample workloads of a powercut kind cluster, all running the probe app (HTTP
readiness ``/readyz``, liveness ``/healthz``, volume tokens ``/tokens/NAME``):

- ``web``: a Deployment of 3 spread over the racks, a PodDisruptionBudget of minAvailable 2,
  NodePort 30080 (published on 127.0.0.1 at base+80);
- ``quorum``: a StatefulSet of 3 with a volume each, PDB minAvailable 2, NodePort 30081;
- ``singleton``: a Deployment of 1 with a volume, NodePort 30082;

The volumes are ReadWriteOnce claims of local-path (class ``standard``: on their node), or
with ``kind up --storage csi`` of the attachable storage (``kindlab/csi.py``): each then
has a VolumeAttachment, and moves to another node (with its data) once Kubernetes detached
it from the node that held it.
- ``node-agent``: a DaemonSet on every worker.
"""

from __future__ import annotations

import time
from typing import Any

from harness.clock import SYSTEM_CLOCK
from harness.errors import PowercutError
from harness.kindlab import images
from harness.kindlab.csi import STORAGE_CLASS
from harness.kindlab.spec import NODE_PORTS, KindSpec
from harness.kube.names import LABEL_ZONE
from harness.lab.build import Say

NAMESPACE = "shop"
JSON = dict[str, Any]


def _container(volumes: list[str]) -> JSON:
    return {
        "name": "probe",
        "image": images.image_names()["probe"],
        "imagePullPolicy": "Never",  # every image is in the node's containerd
        "ports": [{"name": "http", "containerPort": 8080}],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "http"},
            "periodSeconds": 2,
            "failureThreshold": 1,
        },
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5},
        "volumeMounts": [{"name": v, "mountPath": f"/data/{v}"} for v in volumes],
        "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}},
    }


def _pod_spec(app: str, volumes: list[str], *, spread: bool) -> JSON:
    spec: JSON = {
        "terminationGracePeriodSeconds": 5,
        "containers": [_container(volumes)],
    }
    if spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": LABEL_ZONE,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    return spec


def _service(app: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": app, "namespace": NAMESPACE},
        "spec": {
            "type": "NodePort",
            "selector": {"app": app},
            "ports": [{"port": 80, "targetPort": "http", "nodePort": NODE_PORTS[app][0]}],
        },
    }


def _pdb(app: str, min_available: int) -> JSON:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": NAMESPACE},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
    }


def storage_class(spec: KindSpec | None) -> str:
    return STORAGE_CLASS if spec is not None and spec.storage == "csi" else "standard"


def _pvc(name: str, storage_class: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "64Mi"}},
        },
    }


def manifests(storage_class: str = "standard") -> list[JSON]:
    def meta(app: str) -> JSON:
        return {"name": app, "namespace": NAMESPACE, "labels": {"app": app}}

    def sel(app: str) -> JSON:
        return {"matchLabels": {"app": app}}

    def tmpl(app: str, vols: list[str], spread: bool) -> JSON:
        return {"metadata": {"labels": {"app": app}}, "spec": _pod_spec(app, vols, spread=spread)}

    web = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta("web"),
        "spec": {"replicas": 3, "selector": sel("web"), "template": tmpl("web", [], True)},
    }
    quorum_tmpl = tmpl("quorum", ["data"], True)
    quorum = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta("quorum"),
        "spec": {
            "replicas": 3,
            "serviceName": "quorum",
            "podManagementPolicy": "Parallel",
            "selector": sel("quorum"),
            "template": quorum_tmpl,
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": storage_class,
                        "resources": {"requests": {"storage": "64Mi"}},
                    },
                }
            ],
        },
    }
    single_tmpl = tmpl("singleton", ["data"], False)
    single_tmpl["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "singleton-data"}}
    ]
    singleton = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta("singleton"),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": sel("singleton"),
            "template": single_tmpl,
        },
    }
    agent_tmpl = tmpl("node-agent", [], False)
    agent = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": meta("node-agent"),
        "spec": {"selector": sel("node-agent"), "template": agent_tmpl},
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        web, _pdb("web", 2), _service("web"),
        quorum, _pdb("quorum", 2), _service("quorum"),
        _pvc("singleton-data", storage_class), singleton, _service("singleton"),
        agent,
    ]  # fmt: skip


def _path(obj: JSON) -> str:
    kind = obj["kind"]
    plural = {
        "Namespace": "/api/v1/namespaces",
        "Service": f"/api/v1/namespaces/{NAMESPACE}/services",
        "PersistentVolumeClaim": f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims",
        "Deployment": f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
        "StatefulSet": f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets",
        "DaemonSet": f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets",
        "PodDisruptionBudget": f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets",
    }[kind]
    return f"{plural}/{obj['metadata']['name']}"


def deploy(spec: KindSpec, say: Say, *, timeout_s: float = 240) -> None:
    """Apply every manifest (server-side) and wait until each workload is fully ready."""
    from harness.kube.client import KubeClient

    c = KubeClient.from_kubeconfig(spec.kubeconfig, timeout_s=10)
    try:
        for obj in manifests(storage_class(spec)):
            c.apply(_path(obj), obj)
        t0 = time.monotonic()
        pending: dict[str, str] = {}
        while time.monotonic() - t0 < timeout_s:
            pending = {}
            for kind, name in (
                ("deployments", "web"),
                ("statefulsets", "quorum"),
                ("deployments", "singleton"),
                ("daemonsets", "node-agent"),
            ):
                st = c.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/{kind}/{name}").get("status", {})
                if kind == "daemonsets":
                    want, ready = st.get("desiredNumberScheduled", -1), st.get("numberReady", 0)
                else:
                    want, ready = st.get("replicas", -1), st.get("readyReplicas", 0)
                if want <= 0 or ready != want:
                    pending[name] = f"{ready}/{want}"
            if not pending:
                say(f"  workloads ready in {time.monotonic() - t0:.0f}s")
                return
            SYSTEM_CLOCK.sleep(2)
        raise PowercutError(f"workloads not ready after {timeout_s:.0f}s: {pending}")
    finally:
        c.close()
