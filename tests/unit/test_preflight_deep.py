"""``preflight --deep`` against fake probing drivers: the table, what each failure kind
uses on each node, and the nodes named when they cannot serve the chosen kinds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.errors import PowercutError
from harness.failures import FailureKind, strategy
from harness.inventory import Inventory, NodeSpec, load_inventory
from harness.power.base import PowerState, ResetType
from harness.power.ipmi import IPMI_RESET_TYPES
from harness.power.ipmi_session import IpmiSessionRefused
from harness.power.probe import CertInfo, ProbeReport, probe
from harness.preflight import DeepResult, DeepRow, deep_preflight
from tests.fakes.api import FakeApiServer
from tests.fakes.power import FakeBmcs, FakeDriver, write_inventory

SECRET = "not-used"  # the fake inventory's password (FAKE_BMC_PW)


class ProbingDriver(FakeDriver):
    """A fake driver whose probe reports ``resets`` (or raises ``error``)."""

    def __init__(
        self,
        bmcs: FakeBmcs,
        node: str,
        resets: frozenset[ResetType] | None,
        error: PowercutError | None = None,
        kinds: frozenset[str] | None = None,
    ) -> None:
        super().__init__(bmcs, node, "ipmi")
        self.resets = resets
        self.error = error
        self.kinds = kinds

    def supports(self, kind: str) -> bool:
        if self.kinds is not None:
            return kind in self.kinds
        return kind in ("power", "graceful", "reboot")

    def probe(self) -> ProbeReport:
        if self.error is not None:
            raise self.error
        return ProbeReport(
            protocol="ipmi",
            endpoint="10.0.0.1:623",
            state=PowerState.ON,
            authentication="RAKP-HMAC-SHA256 as 'admin'",
            security="cipher suite 17 (ipmitool)",
            privilege="OPERATOR",
            reset_types=self.resets,
            offered="cipher suites 17, 3",
            connect_s=0.25,
            readback_s=0.0125,
        )


@pytest.fixture
def drivers(monkeypatch: pytest.MonkeyPatch, bmcs: FakeBmcs) -> dict[str, dict[str, Any]]:
    """node -> keyword arguments of its :class:`ProbingDriver` (default: full IPMI)."""
    per_node: dict[str, dict[str, Any]] = {}

    def driver_for(node: NodeSpec, protocol: str | None = None, **_: Any) -> ProbingDriver:
        kwargs = per_node.get(node.name, {"resets": IPMI_RESET_TYPES})
        return ProbingDriver(bmcs, node.name, **kwargs)

    monkeypatch.setattr("harness.preflight.driver_for", driver_for)
    return per_node


@pytest.fixture
def inventory(tmp_path: Path, api: FakeApiServer, bmcs: FakeBmcs) -> Inventory:
    return load_inventory(write_inventory(tmp_path, api.url))


def judges(*kinds: FailureKind) -> dict[str, Any]:
    """Each kind's judge, as ``powercut preflight --deep`` asks it."""
    return {k.value: strategy(k).served_by for k in kinds}


def _refused() -> IpmiSessionRefused:
    return IpmiSessionRefused(
        "w3", "10.0.0.12:623", what="cipher suite", cipher_suite=17, privilege="operator",
        username="admin", reason="status 0x11, no matching cipher suite", offered=(1, 2, 3),
    )  # fmt: skip


def test_every_node_serving_every_kind_says_what_each_kind_uses(
    inventory: Inventory, drivers: dict[str, dict[str, Any]]
) -> None:
    kinds = [FailureKind.POWER_OFF, FailureKind.GRACEFUL, FailureKind.REBOOT]
    result = deep_preflight(inventory, ["w1", "w2"], judges(*kinds))
    assert result.unfit == []
    assert result.uses["w1"]["power"] == (True, "ipmi ForceOff, On")
    assert result.uses["w1"]["graceful"] == (True, "ipmi GracefulShutdown, On")
    assert result.uses["w1"]["reboot"] == (True, "ipmi PowerCycle")
    table = result.table()
    assert table[0].split()[:3] == ["NODE", "PROTOCOL", "AUTHENTICATION"]
    assert table[0].split()[-3:] == ["POWER", "GRACEFUL", "REBOOT"]
    assert len(table) == 3 and table[1].startswith("w1  ") and "250 ms" in table[1]
    assert "ipmi (primary)" in table[1] and "cipher suite 17" in table[1]


def test_a_bmc_session_without_chassis_control_is_named(
    inventory: Inventory, drivers: dict[str, dict[str, Any]]
) -> None:
    drivers["w2"] = {"resets": frozenset()}  # a USER-privilege session
    result = deep_preflight(inventory, ["w1", "w2"], judges(FailureKind.POWER_OFF))
    assert result.unfit == ["w2"]
    assert result.uses["w2"]["power"] == (False, "ipmi lacks ForceOff, On")
    assert "NO: ipmi lacks ForceOff, On" in result.table()[2]


def test_a_refused_session_is_named_with_its_error_and_no_secret(
    inventory: Inventory, drivers: dict[str, dict[str, Any]]
) -> None:
    drivers["w3"] = {"resets": None, "error": _refused()}
    result = deep_preflight(inventory, ["w1", "w3"], judges(FailureKind.POWER_OFF))
    assert result.unfit == ["w3"]
    row = next(r for r in result.rows if r.node == "w3")
    assert row.report is None and "refused cipher suite 17" in row.error
    text = "\n".join(result.table())
    assert "FAILED: node w3: IPMI BMC 10.0.0.12:623 refused cipher suite 17" in text
    assert "power.cipher_suite" in text and SECRET not in text


def test_reboot_falls_back_to_off_then_on_and_cuts_need_a_driver_that_can(
    inventory: Inventory, drivers: dict[str, dict[str, Any]]
) -> None:
    drivers["w1"] = {"resets": frozenset({ResetType.FORCE_OFF, ResetType.ON})}
    drivers["w2"] = {"resets": IPMI_RESET_TYPES, "kinds": frozenset(k.value for k in FailureKind)}
    kinds = [FailureKind.REBOOT, FailureKind.PARTITION]
    result = deep_preflight(inventory, ["w1", "w2"], judges(*kinds))
    assert result.uses["w1"]["reboot"] == (True, "ipmi ForceOff, On")
    assert result.uses["w1"]["partition"] == (
        False, "no driver of this node can (ssh can)",
    )  # fmt: skip
    assert result.uses["w2"]["partition"] == (True, "ipmi")
    assert result.unfit == ["w1"]


def test_unknown_reset_types_are_said_not_checked(
    inventory: Inventory, drivers: dict[str, dict[str, Any]]
) -> None:
    drivers["w1"] = {"resets": None}
    result = deep_preflight(inventory, ["w1"], judges(FailureKind.GRACEFUL))
    assert result.uses["w1"]["graceful"] == (
        True, "ipmi (reset types unknown: not checked)",
    )  # fmt: skip


def test_a_driver_without_probe_gets_one_timed_state_read(bmcs: FakeBmcs) -> None:
    report = probe(FakeDriver(bmcs, "w1", "ipmi"), "ipmi")
    assert report.state is PowerState.ON and report.reset_types is None
    assert bmcs.calls == [("w1", "state")]


def test_the_tls_column_shows_verification_and_expiry() -> None:
    cert = CertInfo("CN=bmc", "CN=lab-ca", "2027-01-01T00:00:00Z", 34.2)
    report = ProbeReport(
        protocol="redfish", endpoint="https://bmc", state=PowerState.ON,
        tls_chain=(cert,), tls_verified=False, reset_types=frozenset(),
    )  # fmt: skip
    row = DeepRow("w1", "redfish", report, primary=True)
    line = DeepResult((row,), (), {"w1": {}}).table()[1]
    assert "NOT verified, expires 2027-01-01T00:00:00Z (34 d), 1 cert(s)" in line


def test_cli_deep_exits_2_naming_every_unfit_node(
    inventory: Inventory,
    drivers: dict[str, dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    drivers["w2"] = {"resets": frozenset()}
    drivers["w4"] = {"resets": None, "error": _refused()}
    path = str(inventory.source)
    assert main(["preflight", "--deep", "-i", path, "--failure", "power"]) == 2
    out, err = capsys.readouterr()
    assert "cannot serve power: w2, w4" in err
    assert out.splitlines()[0].startswith("NODE")
    assert "offers w1 ipmi: cipher suites 17, 3" in out
    assert len(out.splitlines()) >= 1 + 7  # every node of the inventory
    assert main(["preflight", "--deep", "-i", path, "w1", "w3"]) == 0


def test_cli_failure_without_deep_is_refused(
    inventory: Inventory, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["preflight", "-i", str(inventory.source), "--failure", "power"]) != 0
    assert "--failure applies to --deep only" in capsys.readouterr().err
    assert bmcs.calls == [], "refused before any BMC was asked"
