"""The driver factory: which driver a node gets, and with which options."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from harness.budgets import profile
from harness.driver_registry import installed_drivers, load_plugin
from harness.inventory import Inventory, parse_inventory
from harness.power.factory import driver_for
from harness.power.ipmi import IpmiDriver
from harness.power.kind import KindDriver
from harness.power.redfish import RedfishDriver
from harness.power.ssh import SshDriver

INVENTORY = """\
cluster: {kubeconfig: k}
nodes:
  - name: i1
    role: worker
    power:
      driver: ipmi
      endpoint: 10.0.0.1
      username: admin
      password_env: BMC_PW
      extra: {timeout_s: 120, poll_s: 2, keepalive_s: 7}
    power_alternatives:
      - driver: redfish
        endpoint: https://10.0.0.1
        username: admin
        password_env: BMC_PW
        extra: {timeout_s: 45}
    ssh: {host: 10.0.1.1, user: core, key_file: /k}
  - name: r1
    role: worker
    power: {driver: redfish, endpoint: https://10.0.0.3, username: admin, password_env: BMC_PW}
    ssh: {host: 10.0.1.3, user: core, key_file: /k}
  - name: k1
    role: worker
    power: {driver: kind}
  - name: s1
    role: worker
    power:
      driver: ssh
      extra: {command_off: poweroff, command_reboot: reboot -f, probe_timeout_s: 2}
    ssh: {host: 10.0.1.2, user: core, key_file: /k}
"""

DRIVERS = {"ipmi": IpmiDriver, "redfish": RedfishDriver, "ssh": SshDriver, "kind": KindDriver}


@pytest.fixture
def inventory(monkeypatch: pytest.MonkeyPatch) -> Inventory:
    monkeypatch.setenv("BMC_PW", "pw")
    return parse_inventory(INVENTORY, base_dir=Path("/"))


def test_the_built_in_drivers_come_through_the_entry_point() -> None:
    assert set(DRIVERS) <= set(installed_drivers())


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_every_extra_option_is_a_constructor_argument_of_its_driver(driver: str) -> None:
    parameters = inspect.signature(DRIVERS[driver]).parameters
    for key in load_plugin(driver).options.model_fields:
        assert key in parameters, f"{driver}: power.extra.{key} is not an argument"
        assert parameters[key].kind is inspect.Parameter.KEYWORD_ONLY


def test_ipmi_extra_reaches_the_driver(inventory: Inventory) -> None:
    driver = driver_for(inventory.node("i1"))
    assert isinstance(driver, IpmiDriver)
    assert (driver.timeout_s, driver.poll_s, driver.keepalive_s) == (120.0, 2.0, 7)


def test_redfish_extra_reaches_the_driver(inventory: Inventory) -> None:
    driver = driver_for(inventory.node("i1"), "redfish")
    assert isinstance(driver, RedfishDriver)
    assert driver.timeout_s == 45.0


def test_ssh_extra_reaches_the_driver(inventory: Inventory) -> None:
    driver = driver_for(inventory.node("s1"))
    assert isinstance(driver, SshDriver)
    assert driver.command_off == "poweroff"
    assert driver.command_reboot == "reboot -f"
    assert driver.command_off_forced == "systemctl poweroff --force --force"  # the default
    assert driver.probe_timeout_s == 2.0
    # A node whose ssh block is only a second way in has no ssh extra: the defaults.
    other = driver_for(inventory.node("i1"), "ssh")
    assert isinstance(other, SshDriver)
    assert other.command_off == "systemctl poweroff"


def test_options_of_the_caller_win_over_extra(inventory: Inventory) -> None:
    driver = driver_for(inventory.node("i1"), timeout_s=5)
    assert isinstance(driver, IpmiDriver)
    assert driver.timeout_s == 5
    assert driver.poll_s == 2.0


def test_the_budgets_give_the_power_deadline_of_the_built_in_drivers(
    inventory: Inventory,
) -> None:
    fast = profile("fast")  # power_ack 10 s + power_state_verify 20 s
    redfish = driver_for(inventory.node("r1"), budgets=fast)
    assert isinstance(redfish, RedfishDriver)
    assert redfish.timeout_s == 30.0
    ssh = driver_for(inventory.node("r1"), "ssh", budgets=profile("upstream"))
    assert isinstance(ssh, SshDriver)
    assert ssh.timeout_s == 90.0
    # Without budgets, the drivers' own default.
    plain = driver_for(inventory.node("r1"))
    assert isinstance(plain, RedfishDriver)
    assert plain.timeout_s == 60


def test_extra_and_the_caller_win_over_the_budgets(inventory: Inventory) -> None:
    fast = profile("fast")
    node = inventory.node("i1")
    from_extra = driver_for(node, budgets=fast)
    assert isinstance(from_extra, IpmiDriver)
    assert from_extra.timeout_s == 120.0
    redfish = driver_for(node, "redfish", budgets=fast)
    assert isinstance(redfish, RedfishDriver)
    assert redfish.timeout_s == 45.0
    from_caller = driver_for(node, budgets=fast, timeout_s=3)
    assert isinstance(from_caller, IpmiDriver)
    assert from_caller.timeout_s == 3


def test_a_plugin_driver_keeps_its_documented_deadline(inventory: Inventory) -> None:
    kind = driver_for(inventory.node("k1"), budgets=profile("fast"))
    assert isinstance(kind, KindDriver)
    assert kind.timeout_s == 60  # docs/kind.md: extra.timeout_s, default 60


# -- the registry: what a broken or foreign entry point gives ----------------------------------

NOT_A_PLUGIN = object()


def _with_entry_point(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    from collections.abc import Mapping
    from importlib.metadata import EntryPoint

    from harness import driver_registry

    real = driver_registry._entry_points

    def patched() -> Mapping[str, EntryPoint]:
        return {**real(), name: EntryPoint(name, value, driver_registry.ENTRY_POINT_GROUP)}

    monkeypatch.setattr(driver_registry, "_entry_points", patched)


POWER_OF = "cluster: {{kubeconfig: k}}\nnodes: [{{name: w1, role: worker, power: {power}}}]\n"


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("no_such_package.driver:PLUGIN", "does not load: ModuleNotFoundError"),
        ("tests.unit.test_power_factory:NOT_A_PLUGIN", "is not a powercut driver plugin"),
    ],
)
def test_a_broken_driver_package_is_named_when_the_inventory_loads(
    monkeypatch: pytest.MonkeyPatch, value: str, needle: str
) -> None:
    from harness.errors import ConfigError

    _with_entry_point(monkeypatch, "broken", value)
    with pytest.raises(ConfigError) as info:
        parse_inventory(POWER_OF.format(power="{driver: broken}"), base_dir=Path("/"))
    assert info.value.field == "nodes[0].power.driver"
    assert f"power driver 'broken' ({value}) {needle}" in str(info.value)


def test_a_field_the_driver_does_not_read_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        parse_inventory(
            POWER_OF.format(power="{driver: kind, username: admin}"), base_dir=Path("/")
        )
    assert info.value.field == "nodes[0].power.username"
    assert "does not apply to driver kind (it reads: endpoint, extra)" in str(info.value)
