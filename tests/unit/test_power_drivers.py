"""Power drivers without a network: secrets, arguments, error mapping, waits on a fake clock."""

from __future__ import annotations

import types
from importlib import metadata
from typing import Any

import pytest
import sushy
from sushy import exceptions as sushy_exc

from harness.errors import PermanentError, TemporaryError, WaitTimeout
from harness.power.base import PowerDriver, PowerState
from harness.power.ipmi import IpmiDriver
from harness.power.redfish import Answer, RedfishDriver
from harness.power.ssh import SshDriver
from tests.fakes.clock import FakeClock

PASSWORD = "s3cr3t-Passw0rd"


def http_error(cls: type[sushy_exc.HTTPError], status: int, message: str) -> sushy_exc.HTTPError:
    response = types.SimpleNamespace(
        status_code=status, json=lambda: {"error": {"code": "Base.1.0.X", "message": message}}
    )
    return cls("GET", "https://127.0.0.1:9/redfish/v1/Systems/1", response)


class FakeSystem:
    """A Redfish ComputerSystem as sushy shows it, scripted per test."""

    def __init__(self, state: str, allowed: tuple[str, ...], apply: bool = True) -> None:
        self.state = state
        self.allowed = allowed
        self.apply = apply
        self.resets: list[str] = []
        self.fail_with: Exception | None = None

    @property
    def power_state(self) -> Any:
        return sushy.PowerState(self.state)

    def refresh(self, force: bool = True) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def get_allowed_reset_system_values(self) -> set[Any]:
        return {sushy.ResetType(v) for v in self.allowed}

    def reset_system(self, value: Any) -> None:
        self.resets.append(value.value)
        if self.apply:
            self.state = "On" if value.value in ("On", "PowerCycle", "ForceRestart") else "Off"


def fake_redfish(system: FakeSystem, clock: FakeClock, **kwargs: Any) -> RedfishDriver:
    driver = RedfishDriver(
        "node-a",
        "https://127.0.0.1:9",
        "admin",
        PASSWORD,
        timeout_s=10,
        poll_s=0.5,
        clock=clock,
        **kwargs,
    )
    # Never connect: discovery and HTTP are covered by the integration tests.
    driver._get_system = lambda: system  # type: ignore[method-assign]

    def post(reset: Any) -> Answer:
        system.refresh()
        system.reset_system(sushy.ResetType(reset.value))
        return Answer(204)

    driver._post_reset = post  # type: ignore[method-assign]
    return driver


def test_every_driver_implements_the_protocol_and_hides_its_password() -> None:
    drivers: list[PowerDriver] = [
        IpmiDriver("n", "127.0.0.1", 623, "admin", PASSWORD),
        RedfishDriver("n", "https://127.0.0.1", "admin", PASSWORD),
        SshDriver("n", "127.0.0.1", 22, "root", "/nonexistent/key", known_hosts=None),
    ]
    for driver in drivers:
        assert isinstance(driver, PowerDriver)
        assert PASSWORD not in repr(driver)
        assert PASSWORD not in str(vars(driver))


def test_entry_points_name_the_drivers() -> None:
    found = {ep.name: ep.value for ep in metadata.entry_points(group="powercut.power_drivers")}
    for name in ("ipmi", "redfish", "ssh", "kind"):
        assert found.get(name) == f"harness.power.builtin:{name.upper()}"


def test_bad_arguments_are_permanent_errors() -> None:
    with pytest.raises(PermanentError, match="at most 20 bytes"):
        IpmiDriver("n", "h", 623, "u", "x" * 21)
    with pytest.raises(PermanentError, match="'ipmitool' or 'rmcpplus'"):
        IpmiDriver("n", "h", 623, "u", "p", interface="lan")  # type: ignore[arg-type]
    with pytest.raises(PermanentError, match="'basic' or 'session'"):
        RedfishDriver("n", "https://h", "u", "p", auth="digest")  # type: ignore[arg-type]
    with pytest.raises(PermanentError, match="https://"):
        RedfishDriver("n", "bmc.example:443", "u", "p")


def test_ssh_refuses_to_power_on_without_touching_the_network() -> None:
    driver = SshDriver("node-a", "192.0.2.1", 22, "root", "/nonexistent", known_hosts=None)
    with pytest.raises(PermanentError) as caught:
        driver.on()
    assert str(caught.value) == (
        "node-a: SSH can cut power but cannot restore it; use the node's BMC (ipmi or redfish)"
    )


def test_redfish_maps_requests_to_reset_types() -> None:
    clock = FakeClock(start=0.0)
    system = FakeSystem("On", ("On", "ForceOff", "GracefulShutdown", "PowerCycle"))
    driver = fake_redfish(system, clock)

    driver.off(graceful=True)
    driver.off(graceful=True)  # already off: nothing sent
    driver.on()
    driver.off()
    driver.cycle()  # off: powers on
    driver.cycle()

    assert system.resets == ["GracefulShutdown", "On", "ForceOff", "On", "PowerCycle"]
    assert clock.sleeps == []


def test_redfish_cycle_without_power_cycle_is_off_then_on_else_force_restart() -> None:
    system = FakeSystem("On", ("On", "ForceOff", "ForceRestart"))  # as iLO: no PowerCycle
    fake_redfish(system, FakeClock(start=0.0)).cycle()
    assert system.resets == ["ForceOff", "On"]

    system = FakeSystem("On", ("On", "ForceRestart"))
    fake_redfish(system, FakeClock(start=0.0)).cycle()
    assert system.resets == ["ForceRestart"]


def test_redfish_cycle_with_no_way_to_cycle_names_the_allowed_reset_types() -> None:
    system = FakeSystem("On", ("On", "GracefulShutdown", "Nmi"))
    with pytest.raises(PermanentError) as caught:
        fake_redfish(system, FakeClock(start=0.0)).cycle()
    assert "allows no way to power-cycle (PowerCycle or ForceOff+On or ForceRestart)" in str(
        caught.value
    )
    assert "allowed ResetTypes: GracefulShutdown, Nmi, On" in str(caught.value)
    assert system.resets == []


def test_redfish_refuses_a_reset_type_the_system_does_not_allow() -> None:
    clock = FakeClock(start=0.0)
    system = FakeSystem("On", ("On", "ForceOff"))

    with pytest.raises(PermanentError) as caught:
        fake_redfish(system, clock).off(graceful=True)

    assert "does not allow ResetType GracefulShutdown; valid values: ForceOff, On" in str(
        caught.value
    )
    assert system.resets == []
    assert clock.sleeps == []


def test_redfish_state_that_never_changes_ends_in_wait_timeout() -> None:
    clock = FakeClock(start=0.0)
    system = FakeSystem("On", ("ForceOff",), apply=False)

    with pytest.raises(WaitTimeout) as caught:
        fake_redfish(system, clock).off()

    assert caught.value.expected.startswith("node-a: PowerState off from Redfish")
    assert "after ResetType ForceOff" in caught.value.expected
    assert caught.value.last_seen == "PowerState On"
    assert caught.value.waited_s == pytest.approx(10)
    assert system.resets == ["ForceOff"]


def test_redfish_401_is_permanent_at_once_and_5xx_is_retried_until_the_deadline() -> None:
    clock = FakeClock(start=0.0)
    system = FakeSystem("On", ("ForceOff",))
    system.fail_with = http_error(sushy_exc.AccessError, 401, "Incorrect username or password")

    with pytest.raises(PermanentError, match="refused the credentials of user 'admin'"):
        fake_redfish(system, clock).off()
    assert clock.sleeps == []

    system.fail_with = http_error(sushy_exc.ServerSideError, 503, "busy")
    with pytest.raises(WaitTimeout) as caught:
        fake_redfish(system, clock).state()
    assert "busy (HTTP 503)" in caught.value.last_seen
    assert sum(clock.sleeps) == pytest.approx(10)


def test_redfish_error_messages_never_contain_the_password() -> None:
    clock = FakeClock(start=0.0)
    system = FakeSystem("On", ("ForceOff",))
    system.fail_with = http_error(sushy_exc.BadRequestError, 400, f"bad password {PASSWORD}")

    with pytest.raises(PermanentError) as caught:
        fake_redfish(system, clock).off()

    assert PASSWORD not in str(caught.value)
    assert "********" in str(caught.value)


def test_ipmi_translates_completion_codes() -> None:
    import pyipmi.errors as ipmi_errors

    driver = IpmiDriver("node-a", "127.0.0.1", 623, "admin", PASSWORD)
    unsupported = driver._translate_code("power cycle", ipmi_errors.CompletionCodeError(0xC1))
    busy = driver._translate_code("power cycle", ipmi_errors.CompletionCodeError(0xC0))
    bad_user = driver._translate_code("open", ipmi_errors.MessageStatusCodeError(0x0D))

    assert isinstance(unsupported, PermanentError)
    assert "0xC1 (invalid command)" in str(unsupported)
    assert isinstance(busy, TemporaryError)
    assert isinstance(bad_user, PermanentError)


def test_states_map_from_redfish_values() -> None:
    clock = FakeClock(start=0.0)
    system = FakeSystem("PoweringOff", ("ForceOff",))
    assert fake_redfish(system, clock).state() is PowerState.UNKNOWN
