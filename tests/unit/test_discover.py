"""powercut init and inventory discover: the pure parts (the lab test reads a real API)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.cli.init import SKELETON
from harness.discover import (
    DiscoveredNode,
    RedfishFacts,
    bmc_from_address,
    discover,
    probe,
    render,
)
from harness.inventory import parse_inventory


@pytest.mark.parametrize(
    ("address", "driver", "endpoint", "system_id"),
    [
        ("ipmi://10.0.0.11:6230", "ipmi", "10.0.0.11:6230", None),
        ("ipmi://10.0.0.11", "ipmi", "10.0.0.11:623", None),
        ("redfish://bmc.example/redfish/v1/Systems/1", "redfish", "https://bmc.example", "1"),
        (
            "redfish+http://10.0.0.5:8000/redfish/v1/Systems/abc",
            "redfish",
            "http://10.0.0.5:8000",
            "abc",
        ),
        (
            "idrac-virtualmedia://10.0.0.6/redfish/v1/Systems/System.Embedded.1",
            "redfish",
            "https://10.0.0.6",
            "System.Embedded.1",
        ),
        ("ipmi://[fd00::1]:623", "ipmi", "[fd00::1]:623", None),
    ],
)
def test_bmc_addresses_as_metal3_writes_them(
    address: str, driver: str, endpoint: str, system_id: str | None
) -> None:
    bmc = bmc_from_address(address, "test")
    assert (bmc.driver, bmc.endpoint, bmc.system_id) == (driver, endpoint, system_id)


def test_an_unknown_bmc_scheme_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="scheme 'ilo4' is not understood; expected ipmi://"):
        bmc_from_address("ilo4://10.0.0.1", "test")


class FakeClient:
    """What discover reads: the node list and the BareMetalHost list (None: no CRD)."""

    def __init__(self, nodes: list[dict[str, Any]], hosts: list[dict[str, Any]] | None) -> None:
        self.nodes, self.hosts = nodes, hosts

    def list(self, path: str) -> tuple[list[dict[str, Any]], str]:
        assert path == "/api/v1/nodes"
        return self.nodes, "1"

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        return None if self.hosts is None else {"items": self.hosts}


def node(name: str, *, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}, "annotations": meta.get("ann", {})},
        "spec": {"providerID": meta.get("provider", "")},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.1.0.9"}]},
    }


def test_discover_roles_racks_and_bmcs_from_annotation_and_baremetalhost(tmp_path: Path) -> None:
    zone = {"topology.kubernetes.io/zone": "r1"}
    nodes = [
        node("w2", labels=zone),
        node(
            "cp1",
            labels={"node-role.kubernetes.io/control-plane": "", **zone},
            ann={"powercut.io/bmc": "ipmi://10.0.0.1:623", "powercut.io/bmc-username": "ops"},
        ),
        node(
            "w1",
            labels={"topology.kubernetes.io/zone": "r2"},
            provider="metal3://infra/host-w1/m3m-abc",
        ),
    ]
    hosts = [
        {
            "metadata": {"name": "host-w1", "namespace": "infra", "uid": "u1"},
            "spec": {
                "bmc": {
                    "address": "redfish://10.0.0.3/redfish/v1/Systems/1",
                    "credentialsName": "host-w1-bmc",
                    "disableCertificateVerification": True,
                }
            },
        }
    ]
    found = discover(FakeClient(nodes, hosts))  # type: ignore[arg-type]
    assert [(n.name, n.role, n.rack) for n in found] == [
        ("cp1", "control-plane", "r1"),
        ("w1", "worker", "r2"),
        ("w2", "worker", "r1"),
    ]
    assert found[0].bmc is not None and found[0].bmc.username == "ops"
    w1 = found[1].bmc
    assert w1 is not None
    assert (w1.driver, w1.endpoint, w1.system_id, w1.verify_tls, w1.credentials) == (
        "redfish",
        "https://10.0.0.3",
        "1",
        False,
        "infra/host-w1-bmc",
    )
    assert found[2].bmc is None
    text = render(found, kubeconfig=tmp_path / "kubeconfig", context=None, name="dc1")
    inv = parse_inventory(text, base_dir=tmp_path)  # what discover writes loads as is
    assert [r.name for r in inv.rack_specs] == ["r1", "r2"]
    assert inv.node("cp1").power.username == "ops"
    assert inv.node("w1").power.verify_tls is False
    assert inv.node("w2").power.endpoint == "w2.bmc.invalid:623"
    assert "# TODO: no BMC known" in text
    assert "# credentials: Secret infra/host-w1-bmc (username, password); not read" in text
    assert inv.node("w1").power.password_env == "BMC_PASSWORD"


def test_init_writes_a_skeleton_whose_inventory_loads_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "resilience"
    assert main(["init", str(project)]) == 0
    for rel in SKELETON:
        assert (project / rel).is_file()
    parse_inventory((project / "inventory.yaml").read_text(), base_dir=project)
    assert 'scenarios("features")' in (project / "test_features.py").read_text()
    (project / "features" / "worker_power_loss.feature").write_text("mine")
    assert main(["init", str(project)]) == 2
    err = capsys.readouterr().err
    assert "would overwrite inventory.yaml, features/worker_power_loss.feature" in err
    assert (project / "features" / "worker_power_loss.feature").read_text() == "mine"


def test_probe_fills_system_id_and_auth_and_marks_what_it_could_not_learn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zone = {"topology.kubernetes.io/zone": "r1"}
    nodes = [
        node("w1", labels=zone, ann={"powercut.io/bmc": "redfish://10.0.0.3"}),
        node("w2", labels=zone, ann={"powercut.io/bmc": "redfish://10.0.0.4"}),
        node("w3", labels=zone, ann={"powercut.io/bmc": "ipmi://10.0.0.5:623"}),
        node("w4", labels=zone, ann={"powercut.io/bmc": "redfish://10.0.0.6"}),
    ]
    found = discover(FakeClient(nodes, None))  # type: ignore[arg-type]
    facts = {
        "https://10.0.0.3": RedfishFacts(
            "https://10.0.0.3",
            True,
            "1.6.0",
            "HPE",
            sessions=True,
            systems=[("1", "w1")],
        ),
        "https://10.0.0.4": RedfishFacts(
            "https://10.0.0.4",
            True,
            "1.11.0",
            "Dell",
            sessions=False,
            systems=[("System.Embedded.1", "a"), ("System.Embedded.2", "b")],
        ),
        "https://10.0.0.5": RedfishFacts(
            "https://10.0.0.5", True, "1.15.0", "OpenBMC", sessions=True
        ),
        "https://10.0.0.6": RedfishFacts(
            "https://10.0.0.6", False, problem="no answer: connection refused"
        ),
    }
    asked: list[tuple[str, str | None, str | None]] = []

    def probe_one(url: str, **kwargs: Any) -> RedfishFacts:
        asked.append((url, kwargs["username"], kwargs["password"]))
        return facts[url]

    monkeypatch.setenv("SITE_BMC_PW", "pw-from-env")
    probe(found, username="ops", password_env="SITE_BMC_PW", probe_one=probe_one)
    by_name = {n.name: n for n in found}

    assert asked[0] == ("https://10.0.0.3", "ops", "pw-from-env")
    assert by_name["w1"].bmc is not None and by_name["w1"].bmc.system_id == "1"
    assert "TODO system_id: 2 systems" in by_name["w2"].notes[0]
    assert "System.Embedded.1, System.Embedded.2" in by_name["w2"].notes[0]
    assert "also offers Redfish 1.15.0" in by_name["w3"].notes[0]
    assert by_name["w4"].notes == [
        "TODO: no Redfish service at https://10.0.0.6 (no answer: connection refused)"
    ]

    text = render(found, kubeconfig=tmp_path / "kubeconfig", context=None)
    inv = parse_inventory(text, base_dir=tmp_path)
    assert inv.node("w1").power.system_id == "1"
    assert inv.node("w1").power.auth == "session"
    assert inv.node("w2").power.auth == "basic"
    assert "# probed: Redfish 1.6.0 at https://10.0.0.3; Vendor HPE; SessionService: yes" in text
    assert "pw-from-env" not in text


def test_probe_without_credentials_leaves_system_ids_marked() -> None:
    found = [
        DiscoveredNode("w1", "worker", None, None, bmc_from_address("redfish://10.0.0.3", "a"))
    ]
    facts = RedfishFacts(
        "https://10.0.0.3",
        True,
        "1.6.0",
        None,
        problem="system ids not read: no credentials given (--password-env)",
    )
    probe(found, password_env="POWERCUT_TEST_UNSET_VAR", probe_one=lambda url, **kw: facts)
    assert found[0].notes == [
        "TODO system_id: system ids not read: no credentials given (--password-env)"
    ]
