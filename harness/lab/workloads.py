"""The lab's sample workloads: what failure features assert against.

- ``web``: 3-replica Deployment spread across racks, with a PodDisruptionBudget (minAvailable 2).
- ``quorum``: 3-member StatefulSet with RWO PVCs and hard pod anti-affinity (an etcd-like
  quorum service), PDB maxUnavailable 1.
- ``registry``: singleton Deployment with an RWO PVC (like an image registry). It is placed
  next to a quorum member (required pod affinity), so losing one node shows every behaviour
  at once: an evicted Deployment pod, a StatefulSet member stuck Terminating, and a RWO
  volume whose replacement pod hits a Multi-Attach error.
- ``node-agent``: a DaemonSet on every worker.
- ``seed-data``: a Job of one pod (kwok's ``pod-complete`` stage takes it to Succeeded), as
  the repopulation runbook re-runs after an etcd rebuild; the Job controller of the lab's
  real kube-controller-manager marks it Complete.
"""

from __future__ import annotations

from typing import Any

from harness.kube.names import LABEL_HOSTNAME, LABEL_ZONE
from harness.lab.spec import CSI_DRIVER, LAB_NAMESPACE, VOLUME_GATE

JSON = dict[str, Any]
#: The lab's Job (re-run by the repopulation feature).
SEED_JOB = "seed-data"
STORAGE_CLASS = "lab-rwo"
SERVICES = ("web", "quorum", "registry")
N_VOLUMES = 8


def _container(name: str) -> JSON:
    return {
        "name": name,
        "image": f"registry.powercut.invalid/{name}:1",
        "ports": [{"containerPort": 8080, "name": "http"}],
    }


def _meta(name: str, **labels: str) -> JSON:
    return {"name": name, "namespace": LAB_NAMESPACE, "labels": {"app": name, **labels}}


def storage_objects() -> list[tuple[str, JSON]]:
    """(collection path, object) for the CSI driver, the class and the volumes."""
    out: list[tuple[str, JSON]] = [
        (
            "/apis/storage.k8s.io/v1/csidrivers",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSIDriver",
                "metadata": {"name": CSI_DRIVER},
                "spec": {"attachRequired": True, "podInfoOnMount": False},
            },
        ),
        (
            "/apis/storage.k8s.io/v1/storageclasses",
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": STORAGE_CLASS},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "Immediate",
                "reclaimPolicy": "Retain",
            },
        ),
    ]
    for i in range(N_VOLUMES):
        out.append(
            (
                "/api/v1/persistentvolumes",
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": f"lab-vol-{i}"},
                    "spec": {
                        "capacity": {"storage": "1Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "storageClassName": STORAGE_CLASS,
                        "csi": {"driver": CSI_DRIVER, "volumeHandle": f"vol-{i}"},
                    },
                },
            )
        )
    return out


def workload_objects() -> list[tuple[str, JSON]]:
    """Every object of the lab's workloads, in the order they are created: the namespace,
    the web Deployment, the quorum StatefulSet, the registry, the node agent, the seed Job
    and the Services."""
    ns = LAB_NAMESPACE
    return [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        *_web(),
        *_quorum(),
        *_registry(),
        *_node_agent(),
        _seed_job(),
        *_services(),
    ]


def _web() -> list[tuple[str, JSON]]:
    """A Deployment spread over the zones, with its PodDisruptionBudget."""
    apps = f"/apis/apps/v1/namespaces/{LAB_NAMESPACE}"
    pol = f"/apis/policy/v1/namespaces/{LAB_NAMESPACE}"
    zone = LABEL_ZONE
    return [
        (
            f"{apps}/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta("web", tier="frontend"),
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "containers": [_container("web")],
                            "topologySpreadConstraints": [
                                {
                                    "maxSkew": 1,
                                    "topologyKey": zone,
                                    "whenUnsatisfiable": "DoNotSchedule",
                                    "nodeTaintsPolicy": "Honor",
                                    "labelSelector": {"matchLabels": {"app": "web"}},
                                }
                            ],
                        },
                    },
                },
            },
        ),
        (
            f"{pol}/poddisruptionbudgets",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta("web"),
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            },
        ),
    ]


def _quorum() -> list[tuple[str, JSON]]:
    """A StatefulSet of three, one per node, with a volume each and its budget."""
    apps = f"/apis/apps/v1/namespaces/{LAB_NAMESPACE}"
    pol = f"/apis/policy/v1/namespaces/{LAB_NAMESPACE}"
    zone = LABEL_ZONE
    host = LABEL_HOSTNAME
    return [
        (
            f"{apps}/statefulsets",
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": _meta("quorum", tier="storage"),
                "spec": {
                    "replicas": 3,
                    "serviceName": "quorum",
                    "podManagementPolicy": "Parallel",
                    "selector": {"matchLabels": {"app": "quorum"}},
                    "template": {
                        # Like a kubelet: not Ready before its volume is attached here.
                        "metadata": {
                            "labels": {"app": "quorum"},
                            "annotations": {VOLUME_GATE: "waiting"},
                        },
                        "spec": {
                            "containers": [
                                {
                                    **_container("quorum"),
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                                }
                            ],
                            "affinity": {
                                "podAntiAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": [
                                        {
                                            "topologyKey": host,
                                            "labelSelector": {"matchLabels": {"app": "quorum"}},
                                        }
                                    ],
                                    "preferredDuringSchedulingIgnoredDuringExecution": [
                                        {
                                            "weight": 100,
                                            "podAffinityTerm": {
                                                "topologyKey": zone,
                                                "labelSelector": {"matchLabels": {"app": "quorum"}},
                                            },
                                        }
                                    ],
                                }
                            },
                        },
                    },
                    "volumeClaimTemplates": [
                        {
                            "metadata": {"name": "data"},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "storageClassName": STORAGE_CLASS,
                                "resources": {"requests": {"storage": "1Gi"}},
                            },
                        }
                    ],
                },
            },
        ),
        (
            f"{pol}/poddisruptionbudgets",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta("quorum"),
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "quorum"}}},
            },
        ),
    ]


def _registry() -> list[tuple[str, JSON]]:
    """A single Deployment with a ReadWriteOnce claim, beside a quorum member."""
    apps = f"/apis/apps/v1/namespaces/{LAB_NAMESPACE}"
    core = f"/api/v1/namespaces/{LAB_NAMESPACE}"
    host = LABEL_HOSTNAME
    return [
        (
            f"{core}/persistentvolumeclaims",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": _meta("registry-data"),
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": STORAGE_CLASS,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        ),
        (
            f"{apps}/deployments",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta("registry", tier="storage"),
                "spec": {
                    "replicas": 1,
                    "strategy": {"type": "Recreate"},
                    "selector": {"matchLabels": {"app": "registry"}},
                    "template": {
                        # Like a kubelet: not Ready before its volume is attached here.
                        "metadata": {
                            "labels": {"app": "registry"},
                            "annotations": {VOLUME_GATE: "waiting"},
                        },
                        "spec": {
                            "containers": [
                                {
                                    **_container("registry"),
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                                }
                            ],
                            "volumes": [
                                {
                                    "name": "data",
                                    "persistentVolumeClaim": {"claimName": "registry-data"},
                                }
                            ],
                            "affinity": {
                                "podAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": [
                                        {
                                            "topologyKey": host,
                                            "labelSelector": {"matchLabels": {"app": "quorum"}},
                                        }
                                    ]
                                }
                            },
                        },
                    },
                },
            },
        ),
    ]


def _node_agent() -> list[tuple[str, JSON]]:
    """A DaemonSet."""
    apps = f"/apis/apps/v1/namespaces/{LAB_NAMESPACE}"
    return [
        (
            f"{apps}/daemonsets",
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": _meta("node-agent", tier="infra"),
                "spec": {
                    "selector": {"matchLabels": {"app": "node-agent"}},
                    "template": {
                        "metadata": {"labels": {"app": "node-agent"}},
                        "spec": {"containers": [_container("node-agent")]},
                    },
                },
            },
        ),
    ]


def _seed_job() -> tuple[str, JSON]:
    """The Job the repopulation runbook re-runs."""
    ns = LAB_NAMESPACE
    return (
        f"/apis/batch/v1/namespaces/{ns}/jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": _meta(SEED_JOB, tier="batch"),
            "spec": {
                "completions": 1,
                "parallelism": 1,
                "backoffLimit": 2,
                "template": {
                    "metadata": {"labels": {"app": SEED_JOB}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": SEED_JOB,
                                "image": f"registry.powercut.invalid/{SEED_JOB}:1",
                            }
                        ],
                    },
                },
            },
        },
    )


def _services() -> list[tuple[str, JSON]]:
    core = f"/api/v1/namespaces/{LAB_NAMESPACE}"
    objs: list[tuple[str, JSON]] = []
    for svc in SERVICES:
        spec: JSON = {"selector": {"app": svc}, "ports": [{"port": 80, "targetPort": 8080}]}
        if svc == "quorum":
            spec["clusterIP"] = "None"
        objs.append(
            (
                f"{core}/services",
                {"apiVersion": "v1", "kind": "Service", "metadata": _meta(svc), "spec": spec},
            )
        )
    return objs
