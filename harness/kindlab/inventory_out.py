"""Write the inventory of a running powercut kind cluster (power driver ``kind``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.kindlab.netstorage import PORT, recorded_address
from harness.kindlab.spec import KindSpec
from harness.kindlab.workloads import NAMESPACE


def inventory_doc(spec: KindSpec) -> dict[str, Any]:
    nodes = []
    for n in spec.nodes():
        entry: dict[str, Any] = {
            "name": n.name,
            "role": n.role,
            "rack": n.rack,
            "power": {"driver": "kind", "endpoint": n.name},
        }
        nodes.append(entry)
    workloads: list[dict[str, Any]] = []
    if spec.workloads:
        for name, kind, min_available in (
            ("web", "Deployment", 2),
            ("quorum", "StatefulSet", 2),
            ("singleton", "Deployment", 0),
        ):
            workloads.append(
                {
                    "namespace": NAMESPACE,
                    "kind": kind,
                    "name": name,
                    "min_available": min_available,
                    "critical": name != "singleton",
                    "health": {"http": f"http://127.0.0.1:{spec.http_port(name)}/readyz"},
                }
            )
        workloads.append(
            {"namespace": NAMESPACE, "kind": "DaemonSet", "name": "node-agent", "min_available": 0}
        )
    racks = sorted({n.rack for n in spec.nodes()})
    storage = recorded_address(spec) if spec.storage == "csi" else None
    doc: dict[str, Any] = {
        "name": f"kind-{spec.name}",
        "timings": spec.timings,
        "cluster": {"kubeconfig": str(spec.kubeconfig), "context": f"kind-{spec.name}"},
        "racks": [{"name": r} for r in racks],
        "nodes": nodes,
        "workloads": workloads,
        "budgets": {
            "profile": spec.timings,
            # Real kubelets on two shared cores: a restarted node runs systemd, containerd
            # and the kubelet before it is Ready. A graceful power-off is confirmed only once
            # the kubelet's node shutdown (shutdownGracePeriod 10 s) and systemd's are done:
            # 39 s measured at load 40 in `make test` (2026-11-28). A lost worker's endpoints
            # leave the Service after NotReady, the endpoint update and every kube-proxy's
            # resync: 50-53 s measured at that load (under 45 s quiet).
            "overrides": {
                "power-state-verify": "40s",
                "node-not-ready": "40s",
                "pod-eviction": "40s",
                "pod-rescheduled": "90s",
                "node-ready-after-power-on": "120s",
                "service-outage": "60s",
                "recovery": "300s",
            },
        },
        "safety": {"max_nodes_down": max(1, len(nodes) // 2)},
    }
    if storage is not None:  # the storage server on the kind network (sshfs over SSH)
        doc["storage_network"] = {"endpoints": [f"{storage}:{PORT}"]}
    return doc


def write_inventory(spec: KindSpec, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Written by `powercut kind up`: the running kind cluster's inventory (power driver\n"
        "# kind: a node's power is its container). Regenerated on every `kind up`.\n"
    )
    path.write_text(header + yaml.safe_dump(inventory_doc(spec), sort_keys=False))
