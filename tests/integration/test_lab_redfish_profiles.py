"""A lab spec with per-node Redfish vendor profiles, through the supervisor's own BMC wiring
(``start_bmcs``) and the inventory it writes, to the driver the harness builds from that
inventory: no cluster, the nodes' power kept in a dictionary."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from harness.inventory import load_inventory
from harness.lab.bmcs import start_bmcs
from harness.lab.inventory_out import write_inventory
from harness.lab.spec import LabSpec
from harness.power.base import PowerState
from harness.power.factory import driver_for

pytestmark = pytest.mark.timeout(120)


class StubLab:
    """What ``start_bmcs`` reads of the supervisor's Lab: the spec, its root, its nodes and
    their power switch."""

    def __init__(self, spec: LabSpec) -> None:
        self.spec = spec
        self.root = spec.root
        self.nodes = spec.nodes()
        self.state = {n.name: PowerState.ON for n in self.nodes}
        self.calls: list[tuple[str, str]] = []

    def power_state(self, name: str) -> PowerState:
        return self.state[name]

    def os_state(self, name: str) -> PowerState:
        return self.state[name]

    def power_on(self, name: str) -> None:
        self.calls.append((name, "on"))
        self.state[name] = PowerState.ON

    def power_off(self, name: str, *, graceful: bool) -> None:
        self.calls.append((name, "graceful" if graceful else "off"))
        self.state[name] = PowerState.OFF

    def reset(self, name: str) -> None:
        self.calls.append((name, "reset"))
        self.state[name] = PowerState.ON


def test_profiles_chosen_per_node_are_served_and_driven_from_the_written_inventory(
    tmp_path: Path,
) -> None:
    base = int(os.environ.get("POWERCUT_TEST_BMC_PORT", "0") or 0) or _free_base()
    probe = LabSpec(
        state_dir=str(tmp_path / "lab"),
        racks=1,
        workers_per_rack=2,
        control_planes=1,
        base_port=base,
    )
    first, *rest = [n.name for n in probe.nodes()]
    spec = LabSpec(
        state_dir=str(tmp_path / "lab"),
        racks=1,
        workers_per_rack=2,
        control_planes=1,
        base_port=base,
        redfish_profiles={"*": "bmcweb", first: "ilo"},
    )
    spec.root.mkdir(parents=True)
    lab = StubLab(spec)
    servers: list[Any] = start_bmcs(lab)  # type: ignore[arg-type]
    try:
        path = tmp_path / "inventory.yaml"
        write_inventory(spec, path)
        assert "Redfish BMC vendor profiles (docs/bmc.md): " + f"{first}: ilo" in path.read_text()
        inventory = load_inventory(path)
        for name in (first, rest[0]):
            node = inventory.node(name)
            assert node.power.driver == "redfish"
            assert node.power.auth == "session"
            driver = driver_for(node)
            try:
                driver.cycle()
                driver.off()
                assert driver.state() is PowerState.OFF
                driver.on()
            finally:
                driver.close()
        # iLO has no PowerCycle: its node was cycled by ForceOff then On; bmcweb's by PowerCycle.
        assert lab.calls == [
            (first, "off"),
            (first, "on"),
            (first, "off"),
            (first, "on"),
            (rest[0], "reset"),
            (rest[0], "off"),
            (rest[0], "on"),
        ]
        redfish = servers[0]
        assert redfish.vendor("ilo").open_sessions() == 0
        assert redfish.vendor("bmcweb").open_sessions() == 0
        assert redfish.vendor("ilo").created == 1  # one session for all of its requests
    finally:
        for server in reversed(servers):
            server.stop()


def _free_base() -> int:
    """A base port below the kernel's ephemeral range (the lab refuses one inside it) whose
    ports this test's lab takes are free now: Redfish base+1..+7, IPMI (UDP) base+200..,
    SSH base+600.. for its three nodes."""
    import socket

    for base in range(24000, 31001, 500):
        wanted = [(socket.SOCK_STREAM, base + i) for i in range(1, 8)]
        wanted += [(socket.SOCK_DGRAM, base + 200 + i) for i in range(3)]
        wanted += [(socket.SOCK_STREAM, base + 600 + i) for i in range(3)]
        try:
            for kind, port in wanted:
                with socket.socket(socket.AF_INET, kind) as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError("no free base port between 24000 and 31000")
