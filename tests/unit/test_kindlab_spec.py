"""The kind cluster config and workloads powercut generates (no Docker needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.kindlab import images, workloads
from harness.kindlab.inventory_out import inventory_doc
from harness.kindlab.spec import KindSpec


def test_config_names_every_image_source_and_the_racks(tmp_path: Path) -> None:
    spec = KindSpec(state_dir=str(tmp_path), workers=3, racks=3, base_port=32000)
    cfg = json.loads(spec.kind_config())
    assert cfg["networking"] == {"apiServerAddress": "127.0.0.1", "apiServerPort": 32000}
    patches = [json.loads(p) for p in cfg["kubeadmConfigPatches"]]
    cluster = next(p for p in patches if p["kind"] == "ClusterConfiguration")
    assert cluster["imageRepository"] == "powercut.local"
    assert cluster["etcd"]["local"]["imageTag"] == images.image_names()["etcd"].split(":")[1]
    args = {a["name"]: a["value"] for a in cluster["controllerManager"]["extraArgs"]}
    assert args["node-monitor-grace-period"] == "16s"
    kubelet = next(p for p in patches if p["kind"] == "KubeletConfiguration")
    assert kubelet["failCgroupV1"] is False
    assert kubelet["shutdownGracePeriod"] == "10s"
    zones = [(n["role"], n["labels"]["topology.kubernetes.io/zone"]) for n in cfg["nodes"]]
    assert zones == [
        ("control-plane", "rack-a"),
        ("worker", "rack-a"),
        ("worker", "rack-b"),
        ("worker", "rack-c"),
    ]
    ports = [m["hostPort"] for m in cfg["nodes"][0]["extraPortMappings"]]
    assert ports == [32080, 32081, 32082]
    assert all(n["image"] == images.image_names()["probe"].split("/")[0] + "/kind-node:v1.36.3"
               for n in cfg["nodes"])  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("control_planes", 2, "--control-planes 2: valid values are 1 and 3"),
        ("workers", 9, "--workers 9: valid values are 0 to 6"),
        ("racks", 0, "--racks 0: valid values are 1 to 10"),
        ("timings", "slow", "unknown timing profile 'slow'; valid: fast, upstream"),
        ("network", "my net", "--network 'my net': a Docker network name is letters"),
    ],
)
def test_bad_values_name_the_option_and_the_valid_ones(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        KindSpec(state_dir=str(tmp_path), **{field: value})  # type: ignore[arg-type]


def test_workloads_never_pull_and_mount_their_volumes_where_the_probe_reads() -> None:
    objs = workloads.manifests()
    pods = [
        o["spec"]["template"]["spec"] for o in objs if o["kind"] in ("Deployment", "StatefulSet",
                                                                      "DaemonSet")
    ]  # fmt: skip
    for pod in pods:
        [c] = pod["containers"]
        assert c["imagePullPolicy"] == "Never"
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert all(m["mountPath"] == f"/data/{m['name']}" for m in c["volumeMounts"])
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs if "spec" in o)
    assert ("PodDisruptionBudget", "web") in kinds and ("StatefulSet", "quorum") in kinds


def test_inventory_uses_the_kind_driver(tmp_path: Path) -> None:
    spec = KindSpec(state_dir=str(tmp_path), workloads=True, base_port=32000)
    doc = inventory_doc(spec)
    assert {n["power"]["driver"] for n in doc["nodes"]} == {"kind"}
    web = next(w for w in doc["workloads"] if w["name"] == "web")
    assert web["health"]["http"] == "http://127.0.0.1:32080/readyz"


def test_with_csi_storage_every_node_reaches_the_same_shared_storage(tmp_path: Path) -> None:
    plain = json.loads(KindSpec(state_dir=str(tmp_path), base_port=32000).kind_config())
    assert not any("extraMounts" in n for n in plain["nodes"])
    spec = KindSpec(state_dir=str(tmp_path), workers=2, base_port=32000, storage="csi")
    cfg = json.loads(spec.kind_config())
    mounts = [n["extraMounts"] for n in cfg["nodes"]]
    assert (
        mounts
        == [
            [
                {
                    "hostPath": str(tmp_path / "shared-storage"),
                    "containerPath": "/var/lib/powercut-csi",
                }
            ]
        ]
        * 3
    )


def test_the_storage_attaches_and_the_workloads_use_it() -> None:
    from harness.kindlab import csi

    objs = {obj["kind"] + "/" + obj["metadata"]["name"]: obj for _p, obj in csi.manifests()}
    driver = objs["CSIDriver/csi.powercut.io"]
    assert driver["spec"]["attachRequired"] is True
    assert objs["StorageClass/powercut-csi"]["provisioner"] == "csi.powercut.io"
    ctl = objs["Deployment/pcsi-controller"]["spec"]["template"]["spec"]
    assert [c["name"] for c in ctl["containers"]] == ["driver", "csi-provisioner", "csi-attacher"]
    assert ctl["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    node = objs["DaemonSet/pcsi-node"]["spec"]["template"]["spec"]["containers"][0]
    assert node["securityContext"] == {"privileged": True}
    kubelet = next(m for m in node["volumeMounts"] if m["name"] == "kubelet-dir")
    assert kubelet["mountPropagation"] == "Bidirectional"
    assert "--kubelet-endpoint=/var/lib/kubelet/plugins/csi.powercut.io/csi.sock" in node["args"]
    attacher = objs["ClusterRole/pcsi-attacher"]["rules"]
    assert any("volumeattachments/status" in r["resources"] for r in attacher)
    for path, obj in csi.manifests():  # each at its own path, named as the object
        assert path.endswith("/" + obj["metadata"]["name"])

    def classes(o: object) -> list[str]:
        if isinstance(o, dict):
            return [v for k, v in o.items() if k == "storageClassName"] + [
                c for v in o.values() for c in classes(v)
            ]
        return [c for v in o for c in classes(v)] if isinstance(o, list) else []

    found = classes(workloads.manifests(workloads.storage_class(KindSpec("x", storage="csi"))))
    assert len(found) == 2 and set(found) == {"powercut-csi"}  # quorum's template, the PVC
    assert set(classes(workloads.manifests())) == {"standard"}
    with pytest.raises(ConfigError, match="--storage nfs: valid values are local-path, csi"):
        KindSpec("x", storage="nfs")
