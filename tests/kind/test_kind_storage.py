"""The attachable storage on real kubelets: every volume of the workloads is a volume of
powercut's CSI driver with a real VolumeAttachment to its pod's node, attached by the real
external-attacher, its data on the shared host directory every node reaches."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.kindlab.csi import DRIVER, STORAGE_CLASS
from harness.steps import BUILTIN_FEATURES
from tests.kind.conftest import POWERCUT, STORAGE, KindCluster

pytestmark = [
    pytest.mark.kind,
    pytest.mark.slow,
    pytest.mark.skipif(
        STORAGE != "csi", reason="the attachable storage: POWERCUT_TEST_KIND_STORAGE=csi"
    ),
]
VOLUME_FEATURES = BUILTIN_FEATURES / "kind-volumes"
FORCE_DETACH_FEATURES = BUILTIN_FEATURES / "kind-force-detach"
#: The forced-detach feature waits out the attach/detach controller's 6 minutes: opt-in.
FORCE_DETACH = os.environ.get("POWERCUT_TEST_KIND_FORCE_DETACH", "") == "1"


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


def _run_features(cluster: KindCluster, out: Path, features: Path) -> None:
    """``powercut run`` of one kind feature set against the session's cluster: every
    scenario must pass (none skipped)."""
    proc = subprocess.run(
        [
            *POWERCUT, "run", "-i", str(cluster.inventory_path), "--out", str(out),
            "--features", str(features), "--no-builtin", "--fail-on-skip",
            "--no-html", "--progress", "plain",
        ],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    log = out / "run.log"
    detail = f"{proc.stdout}\n{proc.stderr}\n{log.read_text() if log.is_file() else ''}"
    assert proc.returncode == 0, f"powercut run exited {proc.returncode}:\n{detail[-20000:]}"
    cases = list(ET.parse(out / "junit.xml").getroot().iter("testcase"))  # noqa: S314 (ours)
    assert len(cases) == len(list(features.glob("*.feature")))
    assert all(not [c for c in case if c.tag in ("failure", "error", "skipped")] for case in cases)


def test_the_volume_features_pass_with_real_attachments(
    cluster: KindCluster, tmp_path: Path
) -> None:
    """features/kind-volumes: the singleton's Multi-Attach until the out-of-service taint, a
    StatefulSet member moved by it, every token read back on another node."""
    _run_features(cluster, tmp_path / "report", VOLUME_FEATURES)


@pytest.mark.timeout(1800)
@pytest.mark.skipif(
    not FORCE_DETACH,
    reason="the 6-minute forced detach (~9 min): POWERCUT_TEST_KIND_FORCE_DETACH=1",
)
def test_a_force_deleted_pods_volume_is_detached_after_six_minutes(
    cluster: KindCluster, tmp_path: Path
) -> None:
    """features/kind-force-detach: with the node still off, its stuck pods force-deleted but
    no out-of-service taint, the volume stays attached until the attach/detach controller's
    6-minute forced detach, then moves with its data."""
    _run_features(cluster, tmp_path / "report", FORCE_DETACH_FEATURES)
