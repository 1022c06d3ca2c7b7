"""Pinned versions of the lab's binaries and where they are cached."""

from __future__ import annotations

import os
from pathlib import Path

KUBERNETES = "v1.36.3"
KUBE_STAGING = "v0.36.3"  # the published staging modules that match KUBERNETES
ETCD = "v3.6.16"
KWOK = "v0.8.0"

KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
ETCD_BINARIES = ("etcd", "etcdctl")
KWOK_BINARIES = ("kwok", "kwokctl")


def cache_root() -> Path:
    return Path(os.environ.get("POWERCUT_CACHE", Path.home() / ".cache" / "powercut"))


def bin_cache() -> Path:
    return cache_root() / "bin"
