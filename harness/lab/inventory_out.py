"""Write the inventory of a running lab: what the rest of the harness reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.lab.bmc.creds import BMC_USER
from harness.lab.bmc.profiles import PROFILES
from harness.lab.bmc.target import system_uuid
from harness.lab.prometheus import lab_slo_sections
from harness.lab.spec import LAB_NAMESPACE, LabSpec, NodeSpec
from harness.lab.workloads import SERVICES


def primary_driver(spec: LabSpec, node: NodeSpec) -> str:
    """Mix the protocols like a real site: Redfish on most racks, IPMI on every second one;
    a node whose BMC plays a vendor profile is driven through Redfish."""
    if spec.redfish_profile(node.name) is not None:
        return "redfish"
    return "ipmi" if int(node.index) % 2 else "redfish"


def node_entry(spec: LabSpec, n: NodeSpec) -> dict[str, Any]:
    creds = spec.root / "creds"
    p = spec.ports
    profile = spec.redfish_profile(n.name)
    port = p.redfish if profile is None else p.redfish_vendor(profile)
    sessions = profile is not None and PROFILES[profile].has_sessions
    redfish = {
        "driver": "redfish",
        "endpoint": f"https://127.0.0.1:{port}",
        "username": BMC_USER,
        "password_file": str(creds / "bmc-password"),
        "verify_tls": str(creds / "bmc-ca.crt"),
        "auth": "session" if sessions else "basic",
        # One emulator serves every node's system: without the id the driver would read
        # every system to find the one named after its node (96 GETs per node at 96 nodes).
        "system_id": system_uuid(n.name),
    }
    ipmi = {
        "driver": "ipmi",
        "endpoint": f"127.0.0.1:{p.ipmi(n.index)}",
        "username": BMC_USER,
        "password_file": str(creds / "bmc-password"),
        "interface": "ipmitool",
    }
    power = ipmi if primary_driver(spec, n) == "ipmi" else redfish
    entry: dict[str, Any] = {
        "name": n.name,
        "role": n.role,
        "rack": n.rack,
        "power": power,
        "power_alternatives": [redfish if power is ipmi else ipmi],
        "ssh": {
            "host": "127.0.0.1",
            "port": p.ssh(n.index),
            "user": "root",
            "key_file": str(creds / "ssh_client_ed25519_key"),
            "known_hosts": str(creds / "known_hosts"),
        },
    }
    if n.cp_index is not None:
        entry["api_endpoint"] = f"https://127.0.0.1:{p.apiserver(n.cp_index)}"
    return entry


#: What the lab's inventory names as its storage network.
LAB_STORAGE_ENDPOINT = "198.51.100.10:3260"


def inventory_doc(spec: LabSpec) -> dict[str, Any]:
    p = spec.ports
    workloads: list[dict[str, Any]] = []
    if spec.workloads:
        mins = {"web": 2, "quorum": 2, "registry": 0}
        kinds = {"web": "Deployment", "quorum": "StatefulSet", "registry": "Deployment"}
        for i, svc in enumerate(SERVICES):
            workloads.append(
                {
                    "namespace": LAB_NAMESPACE,
                    "kind": kinds[svc],
                    "name": svc,
                    "min_available": mins[svc],
                    "critical": svc != "registry",
                    "health": {"http": f"http://127.0.0.1:{p.health(i)}/"},
                }
            )
        workloads.append(
            {
                "namespace": LAB_NAMESPACE,
                "kind": "DaemonSet",
                "name": "node-agent",
                "min_available": 0,
            }
        )
    doc: dict[str, Any] = {
        "name": "lab",
        "timings": spec.timings,
        "cluster": {"kubeconfig": str(spec.root / "kubeconfig"), "context": "powercut-lab"},
        "budgets": {"profile": spec.timings},
        "nodes": [node_entry(spec, n) for n in spec.nodes()],
        "workloads": workloads,
        # Room for the lab's own scenarios: a whole rack (its workers and a control plane)
        # or one third of the workers at once.
        "safety": {
            "max_nodes_down": max(
                spec.workers_per_rack + 1, -(-spec.racks * spec.workers_per_rack // 3)
            )
        },
    }
    # The lab's simulated array (its CSI volumes): a documentation address (TEST-NET-2,
    # RFC 5737) no packet goes to; the node's SSH server records a cut of it and the lab's
    # storage controller fails that node's volume I/O (harness/lab/storage.py).
    doc["storage_network"] = {"endpoints": [LAB_STORAGE_ENDPOINT]}
    if spec.prometheus:
        doc.update(lab_slo_sections(spec))
    return doc


def write_inventory(spec: LabSpec, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Written by `powercut lab up`: the running lab's inventory. Credentials are\n"
        "# referenced by file, never inlined. Regenerated on every `lab up`.\n"
    )
    profiles = {n.name: spec.redfish_profile(n.name) for n in spec.nodes()}
    chosen = [f"{node}: {name}" for node, name in profiles.items() if name is not None]
    if chosen:
        header += (
            "# Redfish BMC vendor profiles (docs/bmc.md): " + ", ".join(chosen) + "\n"
            "# (the other nodes' Redfish BMC is the lab's own).\n"
        )
    path.write_text(header + yaml.safe_dump(inventory_doc(spec), sort_keys=False))
