"""Pinned versions of the lab's binaries and where they are cached."""

from __future__ import annotations

from pathlib import Path

from harness.settings import Settings, or_environment

KUBERNETES = "v1.36.3"
KUBE_STAGING = "v0.36.3"  # the published staging modules that match KUBERNETES
ETCD = "v3.6.16"
KWOK = "v0.8.0"

# Only what the lab runs: kubectl is built with the kind node's binaries (the kind node image
# and the management cluster's tests use it), kwokctl not at all (the lab runs kwok itself).
KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
ETCD_BINARIES = ("etcd", "etcdctl")
KWOK_BINARIES = ("kwok",)


def cache_root(settings: Settings | None = None) -> Path:
    """POWERCUT_CACHE (docs/settings.md), from ``settings`` or the environment now."""
    return or_environment(settings).cache_dir


def bin_cache(settings: Settings | None = None) -> Path:
    return cache_root(settings) / "bin"
