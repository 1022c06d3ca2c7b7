"""The attachable storage on real kubelets: every volume of the workloads is a volume of
powercut's CSI driver with a real VolumeAttachment to its pod's node, attached by the real
external-attacher, its data on the shared host directory every node reaches."""

from __future__ import annotations

import pytest

from harness.kindlab.csi import DRIVER, STORAGE_CLASS
from tests.kind.conftest import KindCluster

pytestmark = [pytest.mark.kind, pytest.mark.slow]


def test_every_volume_is_attached_to_its_pods_node_by_the_csi_driver(
    kind_cluster: KindCluster,
) -> None:
    c = kind_cluster.client
    csinodes, _ = c.list("/apis/storage.k8s.io/v1/csinodes")
    assert {n["metadata"]["name"] for n in csinodes if any(
        d["name"] == DRIVER for d in n["spec"].get("drivers") or []
    )} == {f"{kind_cluster.name}-control-plane", *kind_cluster.workers()}  # fmt: skip
    vas, _ = c.list("/apis/storage.k8s.io/v1/volumeattachments")
    attached = {
        v["spec"]["source"]["persistentVolumeName"]: v["spec"]["nodeName"]
        for v in vas
        if v["spec"]["attacher"] == DRIVER and (v.get("status") or {}).get("attached")
    }
    pods, _ = c.list("/api/v1/namespaces/shop/pods", labelSelector="app in (quorum, singleton)")
    shared = kind_cluster.state_dir / "shared-storage"
    seen = 0
    for pod in pods:
        for vol in pod["spec"]["volumes"]:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            pvc = c.get(f"/api/v1/namespaces/shop/persistentvolumeclaims/{claim}")
            assert pvc["spec"]["storageClassName"] == STORAGE_CLASS
            pv = c.get(f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}")
            handle = pv["spec"]["csi"]["volumeHandle"]
            node = pod["spec"]["nodeName"]
            assert attached.get(pv["metadata"]["name"]) == node, (claim, attached)
            # The driver's record on the shared storage says the same; the data is there.
            assert (shared / "attach" / handle).read_text().strip() == node
            assert (shared / "volumes" / handle).is_dir()
            seen += 1
    assert seen == 4  # three quorum members and the singleton
