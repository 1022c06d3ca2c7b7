"""``powercut preflight --deep`` on the lab: every node's BMCs probed read-only (IPMI at
cipher 17 as the lab's OPERATOR-only user, Redfish over the lab CA's TLS, SSH), and the
nodes whose BMC lacks what a chosen feature needs are named: an SSH-only node for the power
kinds (SSH cannot power on), and an IPMI node whose inventory asks for ADMINISTRATOR."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.lab.conftest import LabHandle, powercut

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]


def _secret(lab: LabHandle) -> str:
    doc = yaml.safe_load(lab.inventory_path.read_text())
    return Path(doc["nodes"][0]["power"]["password_file"]).read_text().strip()


def _ipmi_primary(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [n for n in doc["nodes"] if n["power"]["driver"] == "ipmi"]


def test_deep_preflight_probes_every_bmc_of_the_lab(lab: LabHandle) -> None:
    out = powercut("preflight", "--deep", "-i", str(lab.inventory_path), timeout=300)
    lines = out.stdout.splitlines()
    assert lines[0].split()[:2] == ["NODE", "PROTOCOL"], out.stdout
    nodes = lab.inventory.node_names()
    for node in nodes:
        rows = [ln for ln in lines if ln.split()[:1] == [node]]
        assert {r.split()[1] for r in rows} == {"ipmi", "redfish", "ssh"}, rows
    ipmi = [ln for ln in lines if " ipmi" in ln and "RAKP" in ln]
    assert len(ipmi) == len(nodes), out.stdout
    assert all("cipher suite 17" in ln and "OPERATOR" in ln for ln in ipmi)
    offers = [ln for ln in lines if ln.startswith("offers ") and " ipmi: " in ln]
    assert len(offers) == len(nodes) and all(ln.endswith(": cipher suites 17") for ln in offers)
    redfish = [ln for ln in lines if "redfish" in ln.split()[1:2]]
    assert all("verified, expires" in ln and "NOT" not in ln for ln in redfish), redfish
    assert _secret(lab) not in out.stdout + out.stderr


def test_deep_preflight_names_the_nodes_that_cannot_serve_the_kinds(
    lab: LabHandle, tmp_path: Path
) -> None:
    doc = yaml.safe_load(lab.inventory_path.read_text())
    ssh_only, admin = doc["nodes"][0], _ipmi_primary(doc)[0]
    ssh_only["power"] = {"driver": "ssh"}
    ssh_only["power_alternatives"] = []
    admin["power"]["privilege"] = "administrator"
    changed = lab.inventory_path.parent / "lab-deep.yaml"  # relative paths stay valid
    changed.write_text(yaml.safe_dump(doc))
    others = [n for n in lab.inventory.node_names() if n not in (ssh_only["name"], admin["name"])]
    picked = [ssh_only["name"], admin["name"], others[0]]
    proc = powercut(
        "preflight", "--deep", "-i", str(changed), "--failure", "power", "--failure",
        "reboot", *picked, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"cannot serve power, reboot: {ssh_only['name']}, {admin['name']}" in proc.stderr
    rows = {ln.split()[0] + " " + ln.split()[1]: ln for ln in proc.stdout.splitlines()[1:]}
    assert "NO: ssh lacks On" in rows[f"{ssh_only['name']} ssh"]
    refused = rows[f"{admin['name']} ipmi"]
    assert "refused privilege ADMINISTRATOR" in refused and "power.privilege" in refused
    fine = proc.stdout.splitlines()
    assert any(ln.startswith(others[0]) and "(primary)" in ln and "NO:" not in ln for ln in fine)
    assert _secret(lab) not in proc.stdout + proc.stderr
