"""The cluster's own model on kind (issue #34's kind shape): read from kubeadm's static pods
(the controller-manager's and the API server's flags), the nodes' Leases and a real
kubelet's configz; `powercut budgets derive` writes a budget file commented with those
settings. Read-only: the cluster is not touched."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.budgets import PROFILES
from harness.kindlab.spec import KindTimings
from tests.kind.conftest import KindCluster, powercut

pytestmark = [pytest.mark.kind, pytest.mark.slow]

#: The kind tests' cluster runs the fast timings (``kind up``'s default).
FAST = KindTimings.named("fast")


def _static_pod(cluster: KindCluster, component: str) -> str:
    return f"static pod kube-system/{component}-{cluster.name}-control-plane"


def _model(cluster: KindCluster) -> dict[str, Any]:
    out = powercut("budgets", "model", "-i", str(cluster.inventory_path), "--json")
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_the_model_reads_kubeadms_static_pods_leases_and_the_kubelets_configz(
    kind_cluster: KindCluster,
) -> None:
    settings = _model(kind_cluster)["settings"]
    cm = _static_pod(kind_cluster, "kube-controller-manager")
    grace = settings["node-monitor-grace-period"]
    assert grace["value"] == FAST.node_monitor_grace_s and not grace["assumed"], grace
    assert cm in grace["source"], grace
    assert f"--node-monitor-grace-period={FAST.node_monitor_grace_s}s" in grace["source"]
    period = settings["node-monitor-period"]
    assert period["value"] == FAST.node_monitor_period_s and cm in period["source"], period
    unreachable = settings["default-unreachable-toleration-seconds"]
    assert unreachable["value"] == FAST.toleration_s, unreachable
    assert _static_pod(kind_cluster, "kube-apiserver") in unreachable["source"], unreachable
    lease = settings["nodeLeaseDurationSeconds"]
    assert lease["value"] == FAST.node_lease_s and "Leases in kube-node-lease" in lease["source"]
    shutdown = settings["shutdownGracePeriod"]
    assert shutdown["value"] == 10 and "kubelet configz of node" in shutdown["source"], shutdown


def test_budgets_derive_writes_a_commented_budget_file_from_the_kind_clusters_settings(
    kind_cluster: KindCluster, tmp_path: Path
) -> None:
    out = tmp_path / "budgets.yaml"
    inv = str(kind_cluster.inventory_path)
    powercut("budgets", "derive", "-i", inv, "-o", str(out), "--margin", "50%")
    text = out.read_text()
    cm = _static_pod(kind_cluster, "kube-controller-manager")
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  node-not-ready:"))
    dominated = lines[at - 1]  # the comment above the figure names the setting behind it
    assert dominated.startswith("  # dominated by node-monitor-grace-period: "), text
    assert f"{cm} --node-monitor-grace-period={FAST.node_monitor_grace_s}s" in dominated, text
    assert "assumed" not in dominated, dominated  # grace, period and Lease all read
    doc = yaml.safe_load(text)
    derived = PROFILES[doc["profile"]].with_overrides(doc["overrides"])
    # NotReady: grace + period + the observer's 2 s slack, plus the 50% margin
    high = FAST.node_monitor_grace_s + FAST.node_monitor_period_s + 2
    assert derived.node_not_ready == math.ceil(high * 1.5), text
    # eviction: web's pods carry the API server's default (the flag above) from admission
    assert derived.pod_eviction == math.ceil((FAST.toleration_s + 3) * 1.5), text
