"""What a powercut kind cluster is made of: nodes, racks, host ports and timings."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.kindlab import images
from harness.kindlab import versions as v
from harness.kube.names import LABEL_ZONE
from harness.settings import Settings, or_environment

RACKS = "abcdefghij"
# NodePorts of the sample workloads (kindlab/workloads.py), each published on 127.0.0.1 by
# the first control-plane node at base_port + offset.
NODE_PORTS = {"web": (30080, 80), "quorum": (30081, 81), "singleton": (30082, 82)}
#: Where every node sees the shared storage of the CSI driver (harness/kindlab/csi.py): one
#: host directory (``KindSpec.shared_storage``) bind-mounted into each node container.
SHARED_STORAGE_PATH = "/var/lib/powercut-csi"
#: The workloads' volumes: kind's local-path (on the node; nothing to attach), or the
#: attachable storage (``kind up --storage csi``).
STORAGE_KINDS = ("local-path", "csi")


@dataclass(frozen=True)
class KindTimings:
    """How fast the cluster reacts to a dead node (kube-controller-manager, kubelet,
    kube-apiserver flags). ``fast`` leaves room for real kubelets on two shared cores."""

    name: str
    node_monitor_grace_s: int
    node_monitor_period_s: int
    node_lease_s: int
    toleration_s: int

    @staticmethod
    def named(name: str) -> KindTimings:
        if name == "fast":
            return KindTimings("fast", 16, 2, 16, 10)
        if name == "upstream":
            return KindTimings("upstream", 50, 5, 40, 300)
        raise ConfigError(
            f"unknown timing profile {name!r}; valid: fast, upstream", field="--timings"
        )


@dataclass(frozen=True)
class KindNode:
    name: str
    role: str  # control-plane | worker
    rack: str


@dataclass
class KindSpec:
    state_dir: str
    name: str = "powercut"
    control_planes: int = 1
    workers: int = 2
    racks: int = 3
    timings: str = "fast"
    base_port: int = 24000
    workloads: bool = False
    node_image: str = v.NODE_IMAGE
    storage: str = "local-path"  # one of STORAGE_KINDS
    network: str = "kind"  # the Docker network of the nodes (kind creates it if missing)

    def __post_init__(self) -> None:
        if self.control_planes not in (1, 3):
            raise ConfigError(
                f"--control-planes {self.control_planes}: valid values are 1 and 3",
                field="--control-planes",
            )
        if not 0 <= self.workers <= 6:
            raise ConfigError(
                f"--workers {self.workers}: valid values are 0 to 6 (two shared cores)",
                field="--workers",
            )
        if not 1 <= self.racks <= len(RACKS):
            raise ConfigError(f"--racks {self.racks}: valid values are 1 to 10", field="--racks")
        if not 1024 < self.base_port < 65000:
            raise ConfigError(
                f"--base-port {self.base_port}: valid values are 1025 to 64999",
                field="--base-port",
            )
        KindTimings.named(self.timings)
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", self.network):
            raise ConfigError(
                f"--network {self.network!r}: a Docker network name is letters, digits and "
                "_ . - (starting with a letter or digit, at most 63)",
                field="--network",
            )
        if self.storage not in STORAGE_KINDS:
            raise ConfigError(
                f"--storage {self.storage}: valid values are {', '.join(STORAGE_KINDS)}",
                field="--storage",
            )

    @property
    def root(self) -> Path:
        return Path(self.state_dir)

    @property
    def shared_storage(self) -> Path:
        """The host directory behind every node's ``SHARED_STORAGE_PATH``: the CSI
        driver's volumes and attachments, reachable from any node, as a SAN or NAS is."""
        return self.root / "shared-storage"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def api_port(self) -> int:
        return self.base_port

    def http_port(self, service: str) -> int:
        return self.base_port + NODE_PORTS[service][1]

    def nodes(self) -> list[KindNode]:
        out = []
        for i in range(self.control_planes):
            suffix = "" if i == 0 else str(i + 1)
            out.append(
                KindNode(f"{self.name}-control-plane{suffix}", "control-plane", self._rack(i))
            )
        for i in range(self.workers):
            suffix = "" if i == 0 else str(i + 1)
            out.append(KindNode(f"{self.name}-worker{suffix}", "worker", self._rack(i)))
        return out

    def _rack(self, i: int) -> str:
        return f"rack-{RACKS[i % self.racks]}"

    def kind_config(self) -> str:
        """kind's cluster config (YAML, written as JSON: a YAML subset kind reads)."""
        t = KindTimings.named(self.timings)
        names = images.image_names()
        cluster_cfg = {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "ClusterConfiguration",
            # Every image comes from the node's containerd; nothing is pulled.
            "imageRepository": v.REPO,
            "etcd": {"local": {"imageTag": names["etcd"].rsplit(":", 1)[1]}},
            "dns": {"imageTag": names["coredns"].rsplit(":", 1)[1]},
            "apiServer": {
                "extraArgs": [
                    {"name": "default-not-ready-toleration-seconds", "value": str(t.toleration_s)},
                    {
                        "name": "default-unreachable-toleration-seconds",
                        "value": str(t.toleration_s),
                    },
                ]
            },
            "controllerManager": {
                "extraArgs": [
                    {"name": "node-monitor-grace-period", "value": f"{t.node_monitor_grace_s}s"},
                    {"name": "node-monitor-period", "value": f"{t.node_monitor_period_s}s"},
                ]
            },
        }
        kubelet_cfg = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "nodeLeaseDurationSeconds": t.node_lease_s,
            # This machine's cgroups are v1; Kubernetes 1.35+ kubelets refuse v1 unless told.
            "failCgroupV1": False,
            # Graceful node shutdown: the kind driver's graceful off (`systemctl poweroff` in
            # the node, through logind) waits on the kubelet's delay inhibitor lock, which
            # gives its pods this long to stop first (`docker stop` would bypass it).
            "shutdownGracePeriod": "10s",
            "shutdownGracePeriodCriticalPods": "4s",
        }
        preflight = ["SystemVerification"]  # kernel config and cgroup v1 checks, not the node
        init_cfg = {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "InitConfiguration",
            "nodeRegistration": {"ignorePreflightErrors": preflight},
        }
        join_cfg = {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "JoinConfiguration",
            "nodeRegistration": {"ignorePreflightErrors": preflight},
        }
        nodes: list[dict[str, Any]] = []
        for i, n in enumerate(self.nodes()):
            node: dict[str, Any] = {
                "role": n.role,
                "image": self.node_image,
                "labels": {LABEL_ZONE: n.rack},
            }
            if self.storage == "csi":
                node["extraMounts"] = [
                    {"hostPath": str(self.shared_storage), "containerPath": SHARED_STORAGE_PATH}
                ]
            if i == 0:
                node["extraPortMappings"] = [
                    {
                        "containerPort": port,
                        "hostPort": self.base_port + offset,
                        "listenAddress": "127.0.0.1",
                        "protocol": "TCP",
                    }
                    for port, offset in NODE_PORTS.values()
                ]
            nodes.append(node)
        cfg = {
            "kind": "Cluster",
            "apiVersion": "kind.x-k8s.io/v1alpha4",
            "name": self.name,
            "networking": {"apiServerAddress": "127.0.0.1", "apiServerPort": self.api_port},
            "kubeadmConfigPatches": [
                json.dumps(c) for c in (cluster_cfg, kubelet_cfg, init_cfg, join_cfg)
            ],
            "nodes": nodes,
        }
        return json.dumps(cfg, indent=2) + "\n"

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "spec.json").write_text(json.dumps(asdict(self), indent=2) + "\n")

    @staticmethod
    def load(root: Path) -> KindSpec:
        return KindSpec(**json.loads((root / "spec.json").read_text()))


def default_state_dir(settings: Settings | None = None) -> Path:
    """POWERCUT_KIND_DIR (docs/settings.md), from ``settings`` or the environment now."""
    return or_environment(settings).kind_dir
