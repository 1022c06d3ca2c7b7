"""A fake kind cluster for the chaostoolkit extension's unit tests.

The fake API server (``tests.fakes.api``) for Kubernetes, the fake docker CLI
(``tests.fakes.docker``) for the kind nodes' power, an inventory file naming both, and the
environment an experiment runs in (``POWERCUT_INVENTORY``, ``POWERCUT_STATE_DIR``).
Nodes: ``cp1`` and workers ``w1``-``w3`` (kind), ``bmc1`` (Redfish, never reached).
Pods in ``shop``: Deployment ``web`` on every worker, StatefulSet ``db`` on ``w2``, a
DaemonSet ``agent`` on every worker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.chaos import _common
from harness.inventory import Inventory, load_inventory
from harness.journal import Journal, JournalEntry
from harness.kube.client import KubeClient
from harness.session import journal_path_for
from tests.fakes.api import JSON, FakeApiServer, node, pod
from tests.fakes.docker import Docker, install

WORKERS = ("w1", "w2", "w3")

INVENTORY = """
name: fake-kind
cluster: {{kubeconfig: kubeconfig}}
racks: [{{name: rack-a}}, {{name: rack-b}}, {{name: rack-c}}]
nodes:
  - {{name: cp1, role: control-plane, rack: rack-a, power: {{driver: kind, extra: {extra}}}}}
  - {{name: w1, role: worker, rack: rack-a, power: {{driver: kind, extra: {extra}}}}}
  - {{name: w2, role: worker, rack: rack-b, power: {{driver: kind, extra: {extra}}}}}
  - {{name: w3, role: worker, rack: rack-c, power: {{driver: kind, extra: {extra}}}}}
  - name: bmc1
    role: worker
    rack: rack-c
    power:
      driver: redfish
      endpoint: https://127.0.0.1:9
      username: admin
      password_env: FAKE_BMC_PASSWORD
workloads:
  - {{namespace: shop, kind: Deployment, name: web, min_available: 2}}
  - {{namespace: shop, kind: StatefulSet, name: db, min_available: 1, critical: false}}
timings: fast
safety: {{max_nodes_down: 2}}
"""


def owned(name: str, node_name: str, kind: str, owner: str, **kw: Any) -> JSON:
    p = pod(name, namespace="shop", node_name=node_name, ready=True, owner=(kind, owner), **kw)
    return p


@dataclass
class Cluster:
    api: FakeApiServer
    docker: Docker
    inventory: Inventory
    path: Path
    state: Path

    def client(self) -> KubeClient:
        return self.api.client()

    def journal(self) -> list[JournalEntry]:
        return Journal.read(journal_path_for(self.inventory))

    def node(self, name: str) -> JSON:
        n = self.api.get("nodes", "", name)
        assert n is not None
        return n


@contextmanager
def fake_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    docker = install(tmp_path, monkeypatch)
    for n in ("cp1", *WORKERS):
        docker.container(n)
    path = tmp_path / "inventory.yaml"
    extra = json.dumps({"docker": str(docker.exe), "poll_s": 0.05, "timeout_s": 10})
    path.write_text(INVENTORY.format(extra=extra))
    state = tmp_path / "state"
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(state))
    monkeypatch.setenv("POWERCUT_INVENTORY", str(path))
    monkeypatch.setenv("FAKE_BMC_PASSWORD", "not-used")
    with FakeApiServer() as api:
        for i, n in enumerate(("cp1", *WORKERS)):
            api.add("nodes", node(n, zone=f"rack-{'aabc'[i]}"))
        api.live_nodes = set(WORKERS)
        rs = {"pod-template-hash": "abc"}
        api.add("pods", owned("web-abc-1", "w1", "ReplicaSet", "web-abc", labels=rs))
        api.add("pods", owned("web-abc-2", "w2", "ReplicaSet", "web-abc", labels=rs))
        api.add("pods", owned("web-abc-3", "w3", "ReplicaSet", "web-abc", labels=rs))
        api.add("pods", owned("db-0", "w2", "StatefulSet", "db"))
        for n in WORKERS:
            api.add("pods", owned(f"agent-{n}", n, "DaemonSet", "agent"))
        monkeypatch.setattr(_common, "kube_client", lambda _inventory: api.client())
        yield Cluster(api, docker, load_inventory(path), path, state)
