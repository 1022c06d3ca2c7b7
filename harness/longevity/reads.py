"""The raw API reads of a longevity cycle: the inventory's workloads as the API has them
now, each with its desired Ready count (``spec.replicas``; a DaemonSet's
``desiredNumberScheduled``). A workload that does not exist is a configuration error.
"""

from __future__ import annotations

from typing import Final

from harness.errors import ConfigError
from harness.inventory import Inventory, WorkloadSpec
from harness.kube.client import JSON, KubeClient, NotFound

__all__ = ["resolve_workloads"]

PLURAL: Final = {
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
}


def resolve_workloads(
    client: KubeClient, inventory: Inventory
) -> list[tuple[WorkloadSpec, str, int]]:
    """(spec, ``Kind/name``, desired Ready count) of every inventory workload, read from the
    API now (a GET per named workload, a LIST per selector)."""
    out: list[tuple[WorkloadSpec, str, int]] = []
    for spec in inventory.workloads:
        base = f"/apis/apps/v1/namespaces/{spec.namespace}/{PLURAL[spec.kind]}"
        objs: list[JSON]
        if spec.name is not None:
            try:
                objs = [client.get(f"{base}/{spec.name}")]
            except NotFound:
                raise ConfigError(
                    f"workload {spec.ref} does not exist", field="workloads"
                ) from None
        else:
            objs, _ = client.list(base, labelSelector=spec.selector)
            if not objs:
                raise ConfigError(f"no workload matches {spec.ref}", field="workloads")
        for obj in objs:
            name = str((obj.get("metadata") or {}).get("name"))
            if spec.kind == "DaemonSet":
                desired = int((obj.get("status") or {}).get("desiredNumberScheduled") or 0)
            else:
                replicas = (obj.get("spec") or {}).get("replicas")
                desired = 1 if replicas is None else int(replicas)
            out.append((spec, f"{spec.kind}/{name}", desired))
    return out
