"""Hardened IPMI: cipher suite 17 and an OPERATOR-only user, against real peers.

- OpenIPMI's ``ipmi_sim`` (Debian ``openipmi``), a BMC powercut did not write: its lanserv
  offers RAKP-HMAC-SHA1/MD5 suites (it lists 0-14) and no SHA-256, so it proves the clear
  refusal of cipher 17 with what it offers, and power off/on with cipher 3 (allowed by
  the inventory) as an OPERATOR-only user, through both interfaces. Its chassis is a
  ``chassis_control`` program that keeps the power in a file.
- The lab's pyghmi BMC taught the SHA-256 RAKP exchange, against ipmitool (a client
  powercut did not write, as the CLI and as the driver's transport) and pyipmi's native
  RMCP+: cipher 17 with an OPERATOR-only user powers a node off and on; cipher 3 is
  refused unless the BMC is configured to offer it; ADMINISTRATOR is refused.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from harness.errors import PermanentError
from harness.failures import FailureKind, strategy
from harness.inventory import load_inventory
from harness.lab.bmc.ipmi import IpmiServer
from harness.lab.bmc.target import MemoryTarget
from harness.power.base import PowerState, ResetType
from harness.power.ipmi import IpmiDriver
from harness.power.ipmi_session import IpmiSessionRefused, offered_cipher_suites
from harness.preflight import deep_preflight

pytestmark = pytest.mark.timeout(60)

INTERFACES = pytest.mark.parametrize("interface", ["ipmitool", "rmcpplus"])
FAST: dict[str, Any] = {"timeout_s": 15.0, "poll_s": 0.05}
OPERATOR = ("oper", "oper-pw-2026")
VIEWER = ("viewer", "view-pw-2026")

_CHASSIS = """#!/bin/sh
# ipmi_sim's chassis_control program: "<mc> get power" / "<mc> set power 0|1".
state="$(dirname "$0")/power"
shift
op=$1; shift
case $op in
  get) for p in "$@"; do case $p in
         power) echo "power:$(cat "$state" 2>/dev/null || echo 1)";;
         boot) echo "boot:default";;
         *) exit 1;; esac; done;;
  set) while [ $# -ge 2 ]; do [ "$1" = power ] && echo "$2" > "$state"; shift 2; done;;
  *) exit 1;;
esac
"""


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class IpmiSim:
    """One ``ipmi_sim`` on 127.0.0.1: an OPERATOR user and a USER-only user."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_udp_port()
        self.power_file = directory / "power"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        chassis = self.directory / "chassis.sh"
        chassis.write_text(_CHASSIS)
        chassis.chmod(0o755)
        self.power_file.write_text("1\n")
        (self.directory / "state").mkdir()
        (self.directory / "lan.conf").write_text(
            f"""name "powercut-test"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 {self.port}
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "{chassis} 0x20"
  user 2 true "{OPERATOR[0]}" "{OPERATOR[1]}" operator 10 none md2 md5 straight
  user 3 true "{VIEWER[0]}" "{VIEWER[1]}" user 10 none md2 md5 straight
"""
        )
        (self.directory / "bmc.emu").write_text(
            "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\n"
            "mc_enable 0x20\n"
        )
        log = (self.directory / "ipmi_sim.log").open("wb")
        self.process = subprocess.Popen(
            ["ipmi_sim", "-c", "lan.conf", "-f", "bmc.emu", "-s", "state", "-n"],
            cwd=self.directory,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 10
        while offered_cipher_suites("127.0.0.1", self.port, 0.3) is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "ipmi_sim did not start: " + (self.directory / "ipmi_sim.log").read_text()
                )

    def power(self) -> str:
        return self.power_file.read_text().strip()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def ipmi_sim(tmp_path: Path) -> Iterator[IpmiSim]:
    if shutil.which("ipmi_sim") is None:
        pytest.fail("ipmi_sim is not installed (Debian package openipmi; scripts/bootstrap.sh)")
    sim = IpmiSim(tmp_path)
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def node() -> MemoryTarget:
    return MemoryTarget("node-a", PowerState.ON)


@pytest.fixture
def lab_bmc(node: MemoryTarget) -> Iterator[IpmiServer]:
    """The lab's BMC as it is by default: cipher 17 only, an OPERATOR-only user, plus a
    USER-only one."""
    with IpmiServer(
        [node], "127.0.0.1", *OPERATOR, users={VIEWER[0]: (VIEWER[1], "user")}
    ) as server:
        yield server


def _driver(port: int, interface: str, user: tuple[str, str] = OPERATOR, **kw: Any) -> IpmiDriver:
    iface: Literal["ipmitool", "rmcpplus"] = "rmcpplus" if interface == "rmcpplus" else "ipmitool"
    return IpmiDriver("node-a", "127.0.0.1", port, *user, interface=iface, **{**FAST, **kw})


# -- ipmi_sim: a BMC powercut did not write ------------------------------------------------


@INTERFACES
def test_ipmi_sim_refuses_cipher_17_in_one_clear_error(ipmi_sim: IpmiSim, interface: str) -> None:
    driver = _driver(ipmi_sim.port, interface)
    started = time.monotonic()
    try:
        with pytest.raises(IpmiSessionRefused) as caught:
            driver.off()
    finally:
        driver.close()
    took = time.monotonic() - started
    error = caught.value
    assert error.what == "cipher suite" and error.field == "power.cipher_suite"
    assert error.offered is not None and 3 in error.offered and 17 not in error.offered
    text = str(error)
    assert f"127.0.0.1:{ipmi_sim.port}" in text and "refused cipher suite 17" in text
    assert "power.cipher_suite of node node-a" in text and "to 3" in text
    assert OPERATOR[1] not in text
    assert took < 5, f"a refusal is permanent, not retried until the deadline ({took:.1f} s)"
    assert ipmi_sim.power() == "1", "nothing was sent"


@INTERFACES
def test_ipmi_sim_operator_with_cipher_3_powers_off_and_on(
    ipmi_sim: IpmiSim, interface: str
) -> None:
    driver = _driver(ipmi_sim.port, interface, cipher_suite=3)
    try:
        assert driver.state() is PowerState.ON
        driver.off()
        assert ipmi_sim.power() == "0"
        assert driver.state() is PowerState.OFF
        driver.on()
        assert ipmi_sim.power() == "1"
    finally:
        driver.close()


@INTERFACES
def test_ipmi_sim_user_privilege_cannot_control_the_chassis(
    ipmi_sim: IpmiSim, interface: str
) -> None:
    driver = _driver(ipmi_sim.port, interface, VIEWER, cipher_suite=3, privilege="user")
    try:
        assert driver.state() is PowerState.ON  # USER may read
        with pytest.raises(IpmiSessionRefused) as caught:
            driver.off()
    finally:
        driver.close()
    assert caught.value.what == "privilege" and caught.value.field == "power.privilege"
    assert "0xD4" in str(caught.value) and "needs OPERATOR" in str(caught.value)
    assert ipmi_sim.power() == "1"


# -- the lab's BMC, cipher 17 ------------------------------------------------------------------


def test_ipmitool_cli_drives_the_lab_bmc_with_cipher_17_as_operator(
    lab_bmc: IpmiServer, node: MemoryTarget
) -> None:
    """ipmitool itself, not through powercut's driver."""
    port = str(lab_bmc.port_of("node-a"))
    env = dict(os.environ, IPMI_PASSWORD=OPERATOR[1])
    base = ["ipmitool", "-I", "lanplus", "-H", "127.0.0.1", "-p", port, "-U", OPERATOR[0], "-E"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *args], env=env, capture_output=True, text=True, timeout=20, check=False
        )

    off = run("-C", "17", "-L", "OPERATOR", "chassis", "power", "off")
    assert off.returncode == 0, off.stderr
    assert node.power_state() is PowerState.OFF
    status = run("-C", "17", "-L", "OPERATOR", "chassis", "power", "status")
    assert "Chassis Power is off" in status.stdout
    refused = run("-C", "3", "-L", "OPERATOR", "chassis", "power", "on")
    assert refused.returncode != 0 and "no matching cipher suite" in refused.stderr
    admin = run("-C", "17", "-L", "ADMINISTRATOR", "chassis", "power", "on")
    assert admin.returncode != 0
    assert node.power_state() is PowerState.OFF, "neither refused session powered it on"


@INTERFACES
def test_lab_bmc_cipher_17_operator_powers_off_and_on(
    lab_bmc: IpmiServer, node: MemoryTarget, interface: str
) -> None:
    driver = _driver(lab_bmc.port_of("node-a"), interface)
    assert (driver.cipher_suite, driver.privilege) == (17, "operator")  # the defaults
    try:
        driver.off()
        assert node.power_state() is PowerState.OFF
        driver.on()
        assert node.power_state() is PowerState.ON
        report = driver.probe()
    finally:
        driver.close()
    assert report.security.startswith("cipher suite 17") and report.privilege == "OPERATOR"
    assert report.reset_types is not None and ResetType.FORCE_OFF in report.reset_types
    assert report.offered == "cipher suites 17"
    assert OPERATOR[1] not in repr(report)


@INTERFACES
def test_lab_bmc_refuses_cipher_3_unless_configured(node: MemoryTarget, interface: str) -> None:
    with IpmiServer([node], "127.0.0.1", *OPERATOR) as strict:
        driver = _driver(strict.port_of("node-a"), interface, cipher_suite=3)
        try:
            with pytest.raises(IpmiSessionRefused) as caught:
                driver.state()
        finally:
            driver.close()
    assert caught.value.offered == (17,)
    assert "refused cipher suite 3" in str(caught.value) and "to 17" in str(caught.value)
    with IpmiServer([node], "127.0.0.1", *OPERATOR, cipher_suites=(17, 3)) as lenient:
        driver = _driver(lenient.port_of("node-a"), interface, cipher_suite=3)
        try:
            driver.off()
        finally:
            driver.close()
    assert node.power_state() is PowerState.OFF


@INTERFACES
def test_lab_bmc_refuses_a_privilege_above_the_users(
    lab_bmc: IpmiServer, node: MemoryTarget, interface: str
) -> None:
    driver = _driver(lab_bmc.port_of("node-a"), interface, privilege="administrator")
    try:
        with pytest.raises(IpmiSessionRefused) as caught:
            driver.off()
    finally:
        driver.close()
    assert caught.value.what == "privilege"
    assert "refused privilege ADMINISTRATOR for user 'oper'" in str(caught.value)
    assert node.power_state() is PowerState.ON
    viewer = _driver(lab_bmc.port_of("node-a"), interface, VIEWER, privilege="user")
    try:
        report = viewer.probe()
    finally:
        viewer.close()
    assert report.reset_types == frozenset(), "a USER session may not control the chassis"


@INTERFACES
def test_lab_bmc_refuses_an_unknown_user_at_once(
    lab_bmc: IpmiServer, node: MemoryTarget, interface: str
) -> None:
    """A hardened BMC answers an unknown name (RAKP status 0x0D): permanent, not a wait
    until the deadline."""
    driver = _driver(lab_bmc.port_of("node-a"), interface, ("nobody", OPERATOR[1]))
    started = time.monotonic()
    try:
        with pytest.raises(PermanentError) as caught:
            driver.state()
    finally:
        driver.close()
    assert time.monotonic() - started < 5
    assert "'nobody'" in str(caught.value) and OPERATOR[1] not in str(caught.value)


# -- preflight --deep through the inventory and the real drivers ---------------------------


def test_deep_preflight_through_the_inventory_names_the_unfit_bmcs(
    lab_bmc: IpmiServer, ipmi_sim: IpmiSim, tmp_path: Path
) -> None:
    """Three IPMI nodes: the lab's BMC as configured (fit), the same BMC asked for
    ADMINISTRATOR, and ipmi_sim at the default cipher 17: the last two are named."""
    (tmp_path / "kubeconfig").write_text("")
    (tmp_path / "pw").write_text(OPERATOR[1])
    node = (
        "  - {{name: {name}, role: worker, power: {{driver: ipmi, endpoint: '127.0.0.1:{port}', "
        "username: {user}, password_file: pw{extra}}}}}\n"
    )
    lab_port = lab_bmc.port_of("node-a")
    nodes = [
        node.format(name="fit", port=lab_port, user=OPERATOR[0], extra=""),
        node.format(
            name="admin", port=lab_port, user=OPERATOR[0], extra=", privilege: administrator"
        ),
        node.format(name="sim", port=ipmi_sim.port, user=OPERATOR[0], extra=""),
    ]
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("name: t\ncluster: {kubeconfig: kubeconfig}\nnodes:\n" + "".join(nodes))
    inv = load_inventory(inventory)
    judges = {"power": strategy(FailureKind.POWER_OFF).served_by}
    result = deep_preflight(inv, inv.node_names(), judges, timeout_s=10)
    assert result.unfit == ["admin", "sim"]
    assert result.uses["fit"]["power"] == (True, "ipmi ForceOff, On")
    table = "\n".join(result.table())
    assert "refused privilege ADMINISTRATOR for user 'oper'" in table
    assert f"127.0.0.1:{ipmi_sim.port} refused cipher suite 17" in table and "to 3" in table
    assert OPERATOR[1] not in table
