"""Pinned versions of everything a powercut kind node image is built from."""

from __future__ import annotations

from pathlib import Path

from harness.lab import versions as lab

KUBERNETES = lab.KUBERNETES
ETCD = lab.ETCD
KIND = "v0.33.0"
CONTAINERD = "v2.4.2"
CRICTL = "v1.37.0"
COREDNS = "v1.14.7"
LOCAL_PATH = "v0.0.30"
# The CSI sidecars of the kind cluster's attachable storage (harness/kindlab/csi.py); the
# node-driver-registrar is not served by the Go module proxy here, so powercut's own driver
# (harness/kindlab/go/cmd/pcsi) registers itself with the kubelet.
CSI_ATTACHER = "v4.13.0"
CSI_PROVISIONER = "v6.4.0"
DEBIAN_SUITE = "bookworm"
HELM = "v3.22.0"  # the chart's linter and installer (deploy/chart), from the Go module proxy
KUBECONFORM = "v0.8.0"  # the schema check of the chart's rendered manifests (make chart)

# Debian packages of the node (and of the images that need a userland: kube-proxy, the CNI
# agent, the storage helper): kind's base image list, minus what a registry-free build
# here does not need (fuse-overlayfs, nfs/iscsi clients).
NODE_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "conntrack",
    "iptables",
    "nftables",
    "iproute2",
    "ethtool",
    "util-linux",
    "mount",
    "kmod",
    "libseccomp2",
    "pigz",
    "e2fsprogs",
    "bash",
    "ca-certificates",
    "curl",
    "jq",
    "procps",
    "runc",
    "containernetworking-plugins",
)

# Images are named under a repository that no registry serves, so nothing can be pulled by
# mistake: kubeadm's imageRepository points here and every image is imported beforehand.
REPO = "powercut.local"
PAUSE_TAG = "3.10.2"  # what kubeadm v1.36 lists
NODE_IMAGE = f"{REPO}/kind-node:{KUBERNETES}"
BASE_IMAGE = f"{REPO}/debian:{DEBIAN_SUITE}"

# Source of the two images powercut writes itself (pause, probe): the Go module beside this
# file. Its content is part of the cache key.
GO_SOURCE = Path(__file__).parent / "go"


def cache_root() -> Path:
    return lab.cache_root()


def kind_cache() -> Path:
    return cache_root() / "kind"


#: The image kind v0.33.0 runs its API server load balancer from when a cluster has several
#: control planes (``pkg/cluster/internal/loadbalancer/const.go``). No registry serves it
#: here: ``harness/kindlab/lb.py`` builds a stand-in of that name (labelled as powercut's).
KIND_LB_IMAGE = "envoyproxy/envoy:v1.36.2"
