"""IPMI session terms: the refusal's rendering, cipher suite records and the sessionless
request's framing, ipmitool's refusal texts, the spec's key derivation, the inventory's
fields. No network."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest

from harness.errors import ConfigError, PermanentError
from harness.inventory import load_inventory
from harness.power.ipmi import IpmiDriver, _ipmitool_refusal, _SpecSessionKeys
from harness.power.ipmi_session import (
    IpmiSessionRefused,
    cipher_suite_ids,
    cipher_suites_answer,
    cipher_suites_request,
)

PASSWORD = "s3cret-Pw"


def refusal(**kw: object) -> IpmiSessionRefused:
    args: dict[str, object] = {
        "what": "cipher suite", "cipher_suite": 17, "privilege": "operator",
        "username": "ops", "reason": "status 0x11, no matching cipher suite", "offered": (1, 2, 3),
    }  # fmt: skip
    args.update(kw)
    return IpmiSessionRefused("w3", "10.0.0.23:623", **args)  # type: ignore[arg-type]


def test_a_cipher_refusal_names_the_bmc_what_it_offers_and_the_field() -> None:
    error = refusal()
    assert str(error) == (
        "node w3: IPMI BMC 10.0.0.23:623 refused cipher suite 17 (RAKP-HMAC-SHA256, "
        "HMAC-SHA256-128, AES-CBC-128): status 0x11, no matching cipher suite; it offers "
        "cipher suites 1, 2, 3; set power.cipher_suite of node w3 in the inventory to 3 "
        "(3 only where your site accepts SHA-1); powercut can use 17, 3"
    )
    assert isinstance(error, PermanentError) and error.acted is False
    assert error.field == "power.cipher_suite" and error.offered == (1, 2, 3)


def test_a_cipher_refusal_when_the_bmc_lists_nothing_usable_or_nothing() -> None:
    assert (
        "it offers cipher suites 1, 2; set power.cipher_suite of node w3 in the "
        "inventory to a suite it offers" in str(refusal(offered=(1, 2)))
    )
    assert "it did not list the cipher suites it offers" in str(refusal(offered=None))
    assert "to 17;" in str(refusal(cipher_suite=3, offered=(17,)))


def test_a_privilege_refusal_names_the_user_the_level_and_the_field() -> None:
    error = refusal(what="privilege", privilege="administrator", reason="status 0x09, invalid role")
    assert str(error) == (
        "node w3: IPMI BMC 10.0.0.23:623 refused privilege ADMINISTRATOR for user 'ops': "
        "status 0x09, invalid role; set power.privilege of node w3 in the inventory to a "
        "level the user has (operator is what power control needs), or give the user that "
        "privilege on the BMC"
    )
    assert error.field == "power.privilege"


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("Error in open session response message : no matching cipher suite\n", "cipher suite"),
        ("Error in open session response message : invalid authentication algorithm",
         "cipher suite"),
        ("RAKP 2 message indicates an error : invalid role\n", "privilege"),
        ("Set Session Privilege Level to ADMINISTRATOR failed: Requested privilege level "
         "exceeds limit", "privilege"),
    ],
)  # fmt: skip
def test_ipmitool_refusals_are_recognised(text: str, what: str) -> None:
    found = _ipmitool_refusal("Running Get VSO Capabilities\n" + text)
    assert found is not None and found.what == what
    assert found.reason == text.strip().splitlines()[0].strip()


def test_other_ipmitool_failures_are_not_refusals() -> None:
    assert _ipmitool_refusal("Error: Unable to establish IPMI v2 / RMCP+ session") is None


def test_cipher_suite_records_standard_and_oem() -> None:
    records = bytes([0xC0, 0x03, 0x01, 0x41, 0x81, 0xC1, 0x80, 0x57, 0x01, 0x00, 0x01,
                     0xC0, 0x11, 0x03, 0x44, 0x81])  # fmt: skip
    assert cipher_suite_ids(records) == (3, 0x80, 17)
    assert cipher_suite_ids(b"") == ()


def _answer(records: bytes, *, rmcpplus: bool, cc: int = 0) -> bytes:
    body = bytes([0x20, 0x1C, 0xC4, 0x81, 0x04, 0x54, cc, 0x01]) + records + b"\x00"
    if rmcpplus:
        return b"\x06\x00\xff\x07\x06\x00" + bytes(8) + len(body).to_bytes(2, "little") + body
    return b"\x06\x00\xff\x07\x00" + bytes(8) + bytes([len(body)]) + body


def test_the_answer_is_read_in_both_framings_and_a_refusal_is_none() -> None:
    records = bytes([0xC0, 0x11, 0x03, 0x44, 0x81])
    assert cipher_suites_answer(_answer(records, rmcpplus=True)) == records
    assert cipher_suites_answer(_answer(records, rmcpplus=False)) == records
    assert cipher_suites_answer(_answer(records, rmcpplus=False, cc=0xC1)) is None
    assert cipher_suites_answer(b"junk") is None


def test_the_request_is_a_sessionless_get_channel_cipher_suites() -> None:
    packet = cipher_suites_request(2, seq=5)
    assert packet[:5] == b"\x06\x00\xff\x07\x00" and packet[13] == len(packet) - 14
    message = packet[14:]
    assert message[0] == 0x20 and message[1] >> 2 == 0x06 and (sum(message[:3]) & 0xFF) == 0
    assert message[5:9] == bytes([0x54, 0x0E, 0x00, 0x82]) and (sum(message[3:]) & 0xFF) == 0


def test_session_keys_use_the_specs_20_byte_constants() -> None:
    import pyipmi.interfaces.rmcpplus as rmcpplus

    sik = bytes(range(32))
    keys = rmcpplus.SessionKeys(rmcpplus.CIPHER_SUITES[17], sik)
    assert isinstance(keys, _SpecSessionKeys)
    assert keys.k1 == hmac.new(sik, b"\x01" * 20, hashlib.sha256).digest()
    assert keys.k2 == hmac.new(sik, b"\x02" * 20, hashlib.sha256).digest()


def test_the_driver_refuses_other_suites_and_privileges_before_any_session() -> None:
    with pytest.raises(PermanentError, match=r"cipher suite 1 \(valid: 17, 3\)"):
        IpmiDriver("n", "h", 623, "u", "p", cipher_suite=1)
    with pytest.raises(PermanentError, match="privilege 'root'"):
        IpmiDriver("n", "h", 623, "u", "p", privilege="root")  # type: ignore[arg-type]
    driver = IpmiDriver("n", "h", 623, "u", PASSWORD)
    assert (driver.cipher_suite, driver.privilege) == (17, "operator")
    assert PASSWORD not in repr(driver) and "cipher_suite=17" in repr(driver)


INVENTORY = """\
name: t
cluster: {{kubeconfig: kc}}
nodes:
  - name: w1
    role: worker
    power: {{driver: {driver}, endpoint: "{endpoint}", username: u, password_env: P, {extra}}}
"""


def _load(tmp_path: Path, extra: str, driver: str = "ipmi") -> object:
    (tmp_path / "kc").write_text("")
    endpoint = "10.0.0.1" if driver == "ipmi" else "https://10.0.0.1"
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY.format(driver=driver, endpoint=endpoint, extra=extra))
    return load_inventory(path)


def test_the_inventory_takes_cipher_suite_and_privilege_for_ipmi(tmp_path: Path) -> None:
    inv = _load(tmp_path, "cipher_suite: 3, privilege: administrator")
    power = inv.node("w1").power  # type: ignore[attr-defined]
    assert (power.cipher_suite, power.privilege) == (3, "administrator")
    default = _load(tmp_path, "interface: rmcpplus").node("w1").power  # type: ignore[attr-defined]
    assert (default.cipher_suite, default.privilege) == (None, None)


@pytest.mark.parametrize(
    ("extra", "driver", "says"),
    [
        ("cipher_suite: 2", "ipmi", "cipher_suite"),
        ("privilege: root", "ipmi", "privilege"),
        ("cipher_suite: 17", "redfish", "does not apply to driver redfish"),
    ],
)
def test_the_inventory_refuses_bad_values_naming_the_field(
    tmp_path: Path, extra: str, driver: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, extra, driver)
    assert "nodes[0].power" in str(caught.value) and says in str(caught.value)
