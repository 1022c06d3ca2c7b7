"""A large lab's plan: every node a distinct pod CIDR inside the cluster CIDR, ports that fit."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.lab import controlplane as cpl
from harness.lab.spec import CLUSTER_CIDR, MAX_NODES, LabSpec, node_pod_cidr


def _spec(tmp_path: Path, racks: int, workers: int, base: int = 10000) -> LabSpec:
    return LabSpec(
        state_dir=str(tmp_path),
        racks=racks,
        workers_per_rack=workers,
        control_planes=3,
        base_port=base,
    )


def test_small_labs_keep_their_cidrs_and_ports(tmp_path: Path) -> None:
    spec = _spec(tmp_path, 3, 3)
    nodes = spec.nodes()
    assert [n.pod_cidr for n in nodes[:3]] == ["10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"]
    assert spec.port_span == 1000
    assert spec.ports.ipmi(5) == 10205 and spec.ports.ssh(5) == 10605


def test_a_1000_node_lab_has_distinct_cidrs_within_the_cluster_cidr(tmp_path: Path) -> None:
    spec = _spec(tmp_path, 1, MAX_NODES - 3)
    nodes = spec.nodes()
    assert len(nodes) == MAX_NODES == 1000
    cluster = ipaddress.ip_network(CLUSTER_CIDR)
    nets = [ipaddress.ip_network(n.pod_cidr) for n in nodes]
    assert len(set(nets)) == len(nets)
    assert all(net.subnet_of(cluster) and net.prefixlen == 24 for net in nets)  # type: ignore[arg-type]
    # The 256th node is where a /16 ran out ("10.244.256.0/24" was invalid).
    assert nodes[256].pod_cidr == "10.245.0.0/24"


def test_a_large_labs_ports_do_not_overlap(tmp_path: Path) -> None:
    spec = _spec(tmp_path, 10, 50)  # 503 nodes
    ports = spec.all_ports()
    ipmi_ssh = [spec.ports.ipmi(n.index) for n in spec.nodes()] + [
        spec.ports.ssh(n.index) for n in spec.nodes()
    ]
    assert len(set(ipmi_ssh)) == len(ipmi_ssh) == 2 * 503
    assert len(ports) >= len(ipmi_ssh)
    assert spec.port_span == 2000
    assert min(ports) >= spec.base_port and max(ports) < spec.base_port + spec.port_span


def test_too_many_nodes_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at most 1000 nodes"):
        _spec(tmp_path, 26, 40)
    with pytest.raises(ValueError, match="outside"):
        node_pod_cidr(1024)


def test_a_base_port_too_high_for_a_large_lab_names_the_span(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="takes 2000 ports"):
        _spec(tmp_path, 10, 50, base=64000)


def test_ports_in_the_ephemeral_range_only_when_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.lab.spec as lab_spec

    monkeypatch.setattr(lab_spec, "ephemeral_port_range", lambda: (32768, 60999))
    with pytest.raises(ConfigError, match=r"ephemeral range 32768-60999.*allow-ephemeral-ports"):
        _spec(tmp_path, 3, 3, base=33200)
    spec = LabSpec(state_dir=str(tmp_path), base_port=33200, allow_ephemeral_ports=True)
    assert spec.ports.ssh(0) == 33800
    spec.save()
    assert LabSpec.load(tmp_path).allow_ephemeral_ports  # the supervisor re-reads lab.json


def test_controller_manager_is_told_the_cluster_cidr(tmp_path: Path) -> None:
    spec = _spec(tmp_path, 1, 1)
    argv = cpl.controller_manager_argv(spec, spec.nodes()[0], "kcm", tmp_path / "kc")
    assert f"--cluster-cidr={CLUSTER_CIDR}" in argv
    assert "--node-cidr-mask-size=24" in argv
    assert "--allocate-node-cidrs=false" in argv  # the lab assigns them itself
