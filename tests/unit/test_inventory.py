"""Inventory models and loader: valid files, every kind of mistake, and secrets."""

from __future__ import annotations

import logging
import pickle
import textwrap
import warnings
from pathlib import Path

import pytest
import yaml

from harness.errors import ConfigError
from harness.inventory import (
    HostPort,
    InlinePasswordWarning,
    Inventory,
    NodeRole,
    Secret,
    load_inventory,
    parse_host_port,
    parse_inventory,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventories" / "baremetal-example.yaml"
SECRET_VALUE = "hunter2-Zq9!"

MINIMAL = """\
cluster:
  kubeconfig: kube.conf
nodes:
  - name: w1
    role: worker
    power: {driver: kind}
"""

RACKED = """\
cluster:
  kubeconfig: kube.conf
racks:
  - name: r1
  - name: r2
    zone: zone-b
nodes:
  - name: cp1
    role: control-plane
    rack: r1
    power: {driver: kind}
  - name: w1
    role: worker
    rack: r1
    power: {driver: ipmi, endpoint: "10.0.0.1:623", username: admin, password_env: BMC_PW}
  - name: w2
    role: worker
    rack: r2
    power:
      driver: redfish
      endpoint: https://10.0.0.2
      username: admin
      password_file: secrets/w2
  - name: w3
    role: worker
    power: {driver: ssh}
    ssh: {host: 10.0.1.3, user: core, key_file: keys/id}
"""


def write(tmp_path: Path, text: str, name: str = "inv.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> ConfigError:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    error = info.value
    # one clean message: no pydantic noise, no chained traceback
    message = str(error)
    assert "validation error" not in message
    assert "pydantic" not in message
    assert "errors.pydantic.dev" not in message
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
    assert str(path) in message
    return error


# -- valid inventories ------------------------------------------------------------------------


def test_example_inventory_loads() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the example must not use inline passwords
        inventory = load_inventory(EXAMPLE)
    drivers = {n.power.driver for n in inventory.nodes}
    assert {"ipmi", "redfish", "ssh"} <= drivers
    assert inventory.racks() == ["rack-a", "rack-b"]
    assert [n.name for n in inventory.nodes_by_role("control-plane")] == ["cp-1", "cp-2", "cp-3"]
    assert all(n.rack for n in inventory.nodes)
    for node in inventory.nodes:
        if node.power.driver in ("ipmi", "redfish"):
            secret = node.power.secret
            assert secret is not None
            assert node.power.password is None  # credentials come from env or files only
    assert inventory.source == EXAMPLE
    budgets = inventory.timing_budgets()
    assert budgets.node_ready_after_power_on == 15 * 60
    assert budgets.service_outage == 90


def test_minimal_inventory_and_defaults(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, MINIMAL))
    assert inventory.cluster.kubeconfig == tmp_path / "kube.conf"
    assert inventory.cluster.context is None
    assert inventory.safety.max_rack_fraction == 0.55
    assert inventory.safety.rack_fraction_policy == "refuse"
    assert inventory.safety.allow_control_plane_majority is False
    assert inventory.racks() == []
    assert inventory.workloads == []
    assert inventory.timing_budgets().node_not_ready == 75.0  # upstream by default


def test_relative_paths_resolve_against_the_inventory_directory(tmp_path: Path) -> None:
    sub = tmp_path / "site"
    sub.mkdir()
    inventory = load_inventory(write(sub, RACKED))
    assert inventory.cluster.kubeconfig == sub / "kube.conf"
    assert inventory.node("w2").power.password_file == sub / "secrets" / "w2"
    ssh = inventory.node("w3").ssh
    assert ssh is not None
    assert ssh.key_file == sub / "keys" / "id"
    assert ssh.port == 22
    assert ssh.strict_host_key is True


def test_helpers(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, RACKED))
    assert inventory.racks() == ["r1", "r2"]
    assert [n.name for n in inventory.nodes_in_rack("r1")] == ["cp1", "w1"]
    assert [n.name for n in inventory.nodes_in_rack(None)] == ["w3"]
    assert [n.name for n in inventory.nodes_by_role(NodeRole.WORKER)] == ["w1", "w2", "w3"]
    assert [n.name for n in inventory.nodes_by_role("control-plane")] == ["cp1"]
    assert inventory.rack_specs[1].zone_label == "zone-b"
    assert inventory.rack_specs[0].zone_label == "r1"
    assert inventory.node("w1").node_role is NodeRole.WORKER
    with pytest.raises(ConfigError, match=r"unknown rack 'r9'; must be one of: r1, r2"):
        inventory.nodes_in_rack("r9")
    with pytest.raises(ConfigError, match=r"unknown role 'master'; must be one of"):
        inventory.nodes_by_role("master")
    with pytest.raises(ConfigError, match=r"unknown node 'w9'; the inventory has: cp1, w1"):
        inventory.node("w9")


def test_racks_without_declaration_come_from_nodes(tmp_path: Path) -> None:
    text = MINIMAL + "  - {name: w2, role: worker, rack: b, power: {driver: kind}}\n"
    text += "  - {name: w3, role: worker, rack: a, power: {driver: kind}}\n"
    assert load_inventory(write(tmp_path, text)).racks() == ["b", "a"]


def test_driver_specific_defaults_and_addresses(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, RACKED))
    ipmi = inventory.node("w1").power
    assert ipmi.address == HostPort("10.0.0.1", 623)
    assert ipmi.ipmi_interface == "ipmitool"
    assert inventory.node("w2").power.redfish_auth == "session"
    assert inventory.node("w2").power.verify_tls is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bmc1:6230", HostPort("bmc1", 6230)),
        ("10.0.0.1", HostPort("10.0.0.1", 623)),
        ("[fd00::1]:623", HostPort("fd00::1", 623)),
        ("fd00::1", HostPort("fd00::1", 623)),
    ],
)
def test_parse_host_port(text: str, expected: HostPort) -> None:
    assert parse_host_port(text, default_port=623) == expected


@pytest.mark.parametrize("text", ["", ":623", "bmc:0", "bmc:99999", "bmc:x", "bad host:1"])
def test_parse_host_port_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="host:port"):
        parse_host_port(text, default_port=623)


def test_ca_bundle_path(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    text = RACKED.replace("password_file: secrets/w2", "password_file: s\n      verify_tls: ca.pem")
    inventory = load_inventory(write(tmp_path, text))
    assert inventory.node("w2").power.verify_tls == tmp_path / "ca.pem"


def test_workloads(tmp_path: Path) -> None:
    text = (
        MINIMAL
        + """\
workloads:
  - {namespace: shop, kind: Deployment, name: web, health: {http: "http://web.local/healthz"}}
  - {namespace: db, kind: StatefulSet, selector: {app: pg, tier: data}, min_available: 2}
  - {namespace: mon, kind: DaemonSet, selector: "app=exporter", critical: false}
  - {namespace: db, kind: StatefulSet, name: pg, health: {tcp: "pg.local:5432"}}
"""
    )
    workloads = load_inventory(write(tmp_path, text)).workloads
    assert workloads[0].health is not None
    assert workloads[0].health.http == "http://web.local/healthz"
    assert workloads[0].critical is True
    assert workloads[0].min_available == 1
    assert workloads[1].selector == "app=pg,tier=data"
    assert workloads[1].ref == "StatefulSet db/{app=pg,tier=data}"
    assert workloads[2].critical is False
    assert workloads[3].health is not None
    assert workloads[3].health.tcp_address == HostPort("pg.local", 5432)


def test_lab_shaped_inventory_with_power_alternatives(tmp_path: Path) -> None:
    """The shape `powercut lab up` writes: absolute paths, a CA bundle, one BMC per node
    answering Redfish and IPMI."""
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    redfish = {
        "driver": "redfish",
        "endpoint": "https://127.0.0.1:8443",
        "username": "admin",
        "password_file": str(tmp_path / "creds" / "bmc-password"),
        "verify_tls": str(tmp_path / "ca.crt"),
        "system_id": "w1",
    }
    ipmi = {
        "driver": "ipmi",
        "endpoint": "127.0.0.1:6231",
        "username": "admin",
        "password_file": str(tmp_path / "creds" / "bmc-password"),
        "interface": "ipmitool",
    }
    doc = {
        "name": "lab",
        "timings": "fast",
        "cluster": {"kubeconfig": str(tmp_path / "kubeconfig"), "context": "powercut-lab"},
        "budgets": {"profile": "fast"},
        "nodes": [
            {
                "name": "w1",
                "role": "worker",
                "rack": "rack-1",
                "power": ipmi,
                "power_alternatives": [redfish],
                "ssh": {"host": "127.0.0.1", "port": 2201, "user": "root"},
            }
        ],
        "workloads": [
            {
                "namespace": "powercut",
                "kind": "Deployment",
                "name": "web",
                "min_available": 2,
                "critical": True,
                "health": {"http": "http://127.0.0.1:18080/"},
            }
        ],
    }
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    node = load_inventory(path).node("w1")
    assert node.power_for().driver == "ipmi"
    assert node.power_for("redfish").verify_tls == tmp_path / "ca.crt"
    secret = node.power_for("redfish").secret
    assert secret is not None
    assert secret.source == f"file {tmp_path / 'creds' / 'bmc-password'}"
    with pytest.raises(
        ConfigError, match="node w1 has no power driver 'ssh'; it has: ipmi, redfish"
    ):
        node.power_for("ssh")


def test_power_alternatives_must_use_other_drivers(tmp_path: Path) -> None:
    text = RACKED.replace(
        "password_env: BMC_PW}",
        "password_env: BMC_PW}\n    power_alternatives:\n      - {driver: ipmi, endpoint: h, "
        "username: u, password_env: X}",
    )
    error = load_error(tmp_path, text)
    assert error.field == "nodes[1].power_alternatives[0].driver"
    assert "driver ipmi is already given in power" in str(error)


# -- errors: file, YAML path, bad value, valid values -----------------------------------------


def test_bad_driver_names_file_path_value_and_valid_values(tmp_path: Path) -> None:
    text = RACKED.replace("power: {driver: ssh}", "power: {driver: ipmii}")
    error = load_error(tmp_path, text)
    message = str(error)
    assert error.field == "nodes[3].power.driver"
    assert "nodes[3].power.driver" in message
    assert "'ipmii' is not an installed power driver (did you mean 'ipmi'?)" in message
    assert "installed: ipmi, kind, redfish, ssh" in message
    assert "node 'w3'" in message
    assert "line 26" in message


def test_there_is_no_lab_driver(tmp_path: Path) -> None:
    """The lab's nodes have real BMCs (ipmi, redfish, ssh); no `lab` driver exists, so the
    inventory must not accept one that would only fail later, in driver_for."""
    error = load_error(tmp_path, MINIMAL.replace("{driver: kind}", "{driver: lab}"))
    assert error.field == "nodes[0].power.driver"
    assert "'lab' is not an installed power driver; installed: ipmi, kind, redfish, ssh" in str(
        error
    )


def test_power_extra_of_a_built_in_driver_is_checked_when_the_inventory_loads(
    tmp_path: Path,
) -> None:
    text = RACKED.replace("password_env: BMC_PW}", "password_env: BMC_PW, extra: {reset_off: x}}")
    error = load_error(tmp_path, text)
    message = str(error)
    assert error.field == "nodes[1].power.extra.reset_off"
    assert "unknown option 'reset_off' for driver ipmi" in message
    assert "valid keys: timeout_s, poll_s, keepalive_s" in message
    assert "node 'w1'" in message


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("{timeout_s: 0}", "0 is not valid; must be a positive number of seconds"),
        ("{timeout_s: true}", "True is not valid; must be a positive number of seconds"),
        ("{keepalive_s: 2.5}", "2.5 is not valid; must be a positive whole number"),
        ("{poll_s: fast}", "'fast' is not valid; must be a positive number of seconds"),
    ],
)
def test_power_extra_values_are_checked(tmp_path: Path, extra: str, needle: str) -> None:
    text = RACKED.replace("password_env: BMC_PW}", f"password_env: BMC_PW, extra: {extra}}}")
    error = load_error(tmp_path, text)
    assert error.field.startswith("nodes[1].power.extra.")
    assert needle in str(error)


def test_power_extra_of_ssh_takes_the_commands(tmp_path: Path) -> None:
    text = RACKED.replace(
        "power: {driver: ssh}", "power: {driver: ssh, extra: {command_off: ' poweroff '}}"
    )
    inventory = load_inventory(write(tmp_path, text))
    assert inventory.node("w3").power.driver_options() == {"command_off": "poweroff"}
    error = load_error(
        tmp_path, RACKED.replace("power: {driver: ssh}", "power: {driver: ssh, extra: {x: 1}}")
    )
    assert "valid keys: timeout_s, poll_s, probe_timeout_s, command_off" in str(error)


def test_power_extra_of_every_driver_is_checked_by_its_options_model(tmp_path: Path) -> None:
    """kind is a plugin like any other: its options model checks extra when the file loads."""
    text = MINIMAL.replace("{driver: kind}", "{driver: kind, extra: {anything: 1}}")
    error = load_error(tmp_path, text)
    assert error.field == "nodes[0].power.extra.anything"
    assert "unknown option 'anything' for driver kind" in str(error)
    assert "valid keys: docker, stop_timeout_s, timeout_s, poll_s" in str(error)
    text = MINIMAL.replace("{driver: kind}", "{driver: kind, extra: {stop_timeout_s: 5}}")
    inventory = load_inventory(write(tmp_path, text))
    assert inventory.node("w1").power.driver_options() == {"stop_timeout_s": 5}


def test_unknown_top_level_key_suggests_and_lists_valid_keys(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL.replace("nodes:", "nodse:"))
    message = str(error)
    assert error.field == "nodse"
    assert "unknown key 'nodse' (did you mean 'nodes'?)" in message
    assert "valid keys: name, timings, cluster, racks, nodes, workloads, budgets, safety" in message
    assert "line 3" in message


def test_unknown_nested_key_lists_that_models_keys(tmp_path: Path) -> None:
    error = load_error(tmp_path, RACKED.replace("user: core,", "usr: core,"))
    assert error.field == "nodes[3].ssh.usr"
    assert "did you mean 'user'" in str(error)
    assert "valid keys: host, port, user, key_file, known_hosts, strict_host_key" in str(error)


def test_duplicate_node_names(tmp_path: Path) -> None:
    error = load_error(tmp_path, RACKED.replace("name: w2", "name: w1"))
    assert error.field == "nodes[2].name"
    assert "duplicate node name 'w1' (also nodes[1])" in str(error)


def test_unknown_rack_reference(tmp_path: Path) -> None:
    error = load_error(tmp_path, RACKED.replace("rack: r2", "rack: r3"))
    assert error.field == "nodes[2].rack"
    assert "unknown rack 'r3'; must be one of: r1, r2" in str(error)


def test_duplicate_rack(tmp_path: Path) -> None:
    error = load_error(tmp_path, RACKED.replace("name: r2", "name: r1"))
    assert error.field == "racks[1].name"
    assert "duplicate rack 'r1'" in str(error)


def test_bad_role(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL.replace("role: worker", "role: master"))
    assert error.field == "nodes[0].role"
    assert "'master' is not valid; must be one of: control-plane, worker" in str(error)


def test_missing_required_key(tmp_path: Path) -> None:
    error = load_error(tmp_path, MINIMAL.replace("    role: worker\n", ""))
    assert error.field == "nodes[0].role"
    assert "is required but missing" in str(error)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="inventory file not found") as info:
        load_inventory(path)
    assert info.value.source == str(path)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_inventory(tmp_path)


def test_invalid_yaml_gives_line_and_column(tmp_path: Path) -> None:
    error = load_error(tmp_path, "cluster:\n  kubeconfig: k\nnodes: [\n  {name: w1\n")
    assert "invalid YAML at line" in str(error)


def test_invalid_yaml_line_number_is_right(tmp_path: Path) -> None:
    error = load_error(tmp_path, "cluster:\n  kubeconfig: k\n nodes: x\n")
    assert "invalid YAML at line 3" in str(error)


def test_duplicate_yaml_keys_are_refused(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "power: {driver: kind}", "power: {driver: kind}\n    role: control-plane"
    )
    error = load_error(tmp_path, text)
    assert "duplicate key 'role' (first at line 5)" in str(error)
    assert "line 7" in str(error)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "inventory is empty; expected a mapping with keys: name, timings, cluster"),
        ("- a\n- b\n", "the top level is a list; expected a mapping"),
        ("cluster: {kubeconfig: k}\nnodes: []\n", "nodes: must not be empty"),
        ("cluster: {kubeconfig: k}\nnodes: w1\n", "nodes: 'w1' is not valid; expected a list"),
    ],
)
def test_shape_errors(tmp_path: Path, text: str, needle: str) -> None:
    assert needle in str(load_error(tmp_path, text))


@pytest.mark.parametrize(
    ("old", "new", "field", "needle"),
    [
        ('"10.0.0.1:623"', '"10.0.0.1:99999"', "nodes[1].power.endpoint", "invalid port"),
        (
            "username: admin, password_env",
            "password_env",
            "nodes[1].power.username",
            "is required for driver ipmi",
        ),
        (", password_env: BMC_PW}", "}", "nodes[1].power.password_env", "needs a password"),
        ("https://10.0.0.2", "10.0.0.2", "nodes[2].power.endpoint", "is not a Redfish URL"),
        (
            "https://10.0.0.2",
            "https://root:pw@10.0.0.2",
            "nodes[2].power.endpoint",
            "must not contain credentials",
        ),
        (
            "password_env: BMC_PW}",
            "password_env: BMC_PW, auth: basic}",
            "nodes[1].power.auth",
            "does not apply to driver ipmi (it reads: cipher_suite, endpoint, interface, "
            "password, privilege, username",
        ),
        (
            "password_file: secrets/w2",
            "password_file: s\n      interface: rmcpplus",
            "nodes[2].power.interface",
            "does not apply to driver redfish",
        ),
        (
            "password_file: secrets/w2",
            "password_file: s\n      auth: token",
            "nodes[2].power.auth",
            "must be one of: basic, session",
        ),
        (
            "password_file: secrets/w2",
            "password_file: s\n      verify_tls: missing-ca.pem",
            "nodes[2].power.verify_tls",
            "does not exist",
        ),
        (
            "password_file: secrets/w2",
            "password_file: s\n      verify_tls: 'false'",
            "nodes[2].power.verify_tls",
            "write true or false without quotes",
        ),
        ("password_env: BMC_PW", "password_env: BMC-PW", "nodes[1].power.password_env", "valid"),
        (
            "power: {driver: ssh}\n    ssh: {host: 10.0.1.3, user: core, key_file: keys/id}",
            "power: {driver: ssh}",
            "nodes[3].ssh",
            "is required for power driver ssh",
        ),
        (
            "ssh: {host: 10.0.1.3,",
            "ssh: {host: 10.0.1.3, port: 70000,",
            "nodes[3].ssh.port",
            "70000 is not valid: input should be less than or equal to 65535",
        ),
        ("name: w2", "name: W_2", "nodes[2].name", "not a valid Kubernetes node name"),
    ],
)
def test_power_and_ssh_errors(tmp_path: Path, old: str, new: str, field: str, needle: str) -> None:
    assert old in RACKED
    error = load_error(tmp_path, RACKED.replace(old, new))
    assert error.field == field
    assert needle in str(error)


@pytest.mark.parametrize(
    ("extra", "field", "needle"),
    [
        (
            "workloads: [{namespace: a, kind: Pod, name: x}]",
            "workloads[0].kind",
            "must be one of: Deployment, StatefulSet, DaemonSet",
        ),
        (
            "workloads: [{namespace: a, kind: Deployment}]",
            "workloads[0]",
            "give exactly one of name or selector",
        ),
        (
            "workloads: [{namespace: a, kind: Deployment, name: x, health: {}}]",
            "workloads[0].health",
            "give exactly one of http (a URL) or tcp",
        ),
        (
            "workloads: [{namespace: a, kind: Deployment, name: x, health: {tcp: 'db'}}]",
            "workloads[0].health.tcp",
            "has no port",
        ),
        (
            "workloads: [{namespace: A_B, kind: Deployment, name: x}]",
            "workloads[0].namespace",
            "not a valid namespace",
        ),
        (
            "workloads: [{namespace: a, kind: Deployment, name: x, min_available: -1}]",
            "workloads[0].min_available",
            "greater than or equal to 0",
        ),
        ("budgets: {profile: lab}", "budgets.profile", "must be one of: fast, upstream"),
        ("timings: slow", "timings", "'slow' is not valid; must be one of: fast, upstream"),
        (
            "budgets: {overrides: {node-not-redy: 5}}",
            "budgets.overrides.node-not-redy",
            "did you mean 'node-not-ready'",
        ),
        (
            "budgets: {overrides: {drain: soon}}",
            "budgets.overrides.drain",
            "'soon' is not a valid duration",
        ),
        (
            "safety: {rack_fraction_policy: ignore}",
            "safety.rack_fraction_policy",
            "must be one of: refuse, warn",
        ),
        ("safety: {max_rack_fraction: 1.5}", "safety.max_rack_fraction", "less than or equal to 1"),
        ("safety: {max_nodes_down: 0}", "safety.max_nodes_down", "greater than or equal to 1"),
    ],
)
def test_other_section_errors(tmp_path: Path, extra: str, field: str, needle: str) -> None:
    error = load_error(tmp_path, MINIMAL + extra + "\n")
    assert error.field == field
    assert needle in str(error)


def test_several_problems_in_one_message(tmp_path: Path) -> None:
    text = MINIMAL + "safety: {max_rack_fraction: 2, rack_fraction_policy: ignore}\n"
    error = load_error(tmp_path, text)
    message = str(error)
    assert message.count("\n") == 1
    assert "also safety.rack_fraction_policy: 'ignore' is not valid" in message


def test_budget_overrides_are_canonical_seconds(tmp_path: Path) -> None:
    text = MINIMAL + "timings: fast\nbudgets:\n  overrides: {node-not-ready: 12, drain: 2m}\n"
    inventory = load_inventory(write(tmp_path, text))
    assert inventory.budgets.overrides == {"node_not_ready": 12.0, "drain": 120.0}
    budgets = inventory.timing_budgets()
    assert budgets.node_not_ready == 12.0
    assert budgets.pod_eviction == 25.0  # fast profile chosen through "timings"


def test_budget_override_twice_in_two_spellings(tmp_path: Path) -> None:
    text = MINIMAL + "budgets:\n  overrides: {node-not-ready: 12, node_not_ready: 13}\n"
    assert "overrides 'node-not-ready' twice" in str(load_error(tmp_path, text))


# -- secrets ----------------------------------------------------------------------------------


def test_secret_from_env_is_lazy_and_hidden(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    inventory = load_inventory(write(tmp_path, RACKED))  # BMC_PW is not set: loading is fine
    secret = inventory.node("w1").power.secret
    assert secret is not None
    monkeypatch.setenv("BMC_PW", SECRET_VALUE)
    assert secret.reveal() == SECRET_VALUE
    assert str(secret) == "***"
    assert repr(secret) == "***"
    assert f"{secret}" == "***"
    assert format(secret, ">10") == "***"
    assert SECRET_VALUE not in repr(inventory)
    assert SECRET_VALUE not in str(inventory.model_dump())
    assert secret.source == "env BMC_PW"
    with pytest.raises(TypeError):
        pickle.dumps(secret)


def test_secret_resolution_errors_name_node_and_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    inventory = load_inventory(write(tmp_path, RACKED))
    secret = inventory.node("w1").power.secret
    assert secret is not None
    monkeypatch.delenv("BMC_PW", raising=False)
    with pytest.raises(ConfigError, match="node w1: environment variable BMC_PW is not set"):
        secret.reveal()
    monkeypatch.setenv("BMC_PW", "")
    with pytest.raises(ConfigError, match="node w1: environment variable BMC_PW is empty"):
        secret.reveal()


def test_secret_from_file(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, RACKED))
    secret = inventory.node("w2").power.secret
    assert secret is not None
    path = tmp_path / "secrets" / "w2"
    with pytest.raises(ConfigError) as info:
        secret.reveal()
    assert str(info.value) == (
        f"node w2: cannot read password file {path}: No such file or directory"
    )
    path.parent.mkdir()
    path.write_text(SECRET_VALUE + "\n", encoding="utf-8")
    assert secret.reveal() == SECRET_VALUE  # trailing newline dropped
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"node w2: password file .* is empty"):
        secret.reveal()


def test_inline_password_warns_naming_the_node_never_the_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    text = RACKED.replace("password_file: secrets/w2", f"password: {SECRET_VALUE}")
    path = write(tmp_path, text)
    with pytest.warns(InlinePasswordWarning) as record:
        inventory = load_inventory(path)
    assert len(record) == 1
    warning = record[0]
    assert "node w2" in str(warning.message)
    assert SECRET_VALUE not in str(warning.message)
    assert warning.filename == str(path)
    assert warning.lineno == 23
    power = inventory.node("w2").power
    assert power.secret is not None
    assert power.secret.reveal() == SECRET_VALUE
    assert power.secret.source == "inline"
    for text_form in (repr(inventory), str(inventory), repr(power), str(power.model_dump())):
        assert SECRET_VALUE not in text_form
    logging.getLogger("test").info("power %s secret %s", power, power.secret)
    assert SECRET_VALUE not in caplog.text
    assert "***" in caplog.text


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a wrongly typed secret
        ("password_file: secrets/w2", "password: [" + SECRET_VALUE + "]"),
        # a typo in the key: the value must not be echoed
        ("password_file: secrets/w2", "pasword: " + SECRET_VALUE),
        # two sources at once
        ("password_file: secrets/w2", "password_env: X\n      password: " + SECRET_VALUE),
    ],
)
def test_errors_near_a_secret_never_show_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, old: str, new: str
) -> None:
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InlinePasswordWarning)
        error = load_error(tmp_path, RACKED.replace(old, new))
    assert SECRET_VALUE not in str(error)
    assert SECRET_VALUE not in repr(error)
    assert SECRET_VALUE not in caplog.text
    assert error.field.startswith("nodes[2].power.")


def test_secret_needs_exactly_one_source() -> None:
    with pytest.raises(ValueError):
        Secret()
    with pytest.raises(ValueError):
        Secret(env="A", value="b")


def test_models_are_frozen(tmp_path: Path) -> None:
    inventory = load_inventory(write(tmp_path, MINIMAL))
    with pytest.raises(Exception, match="frozen"):
        inventory.name = "x"


def test_parse_inventory_from_a_string() -> None:
    inventory = parse_inventory(MINIMAL, source="memory.yaml", base_dir=Path("/srv"))
    assert isinstance(inventory, Inventory)
    assert inventory.cluster.kubeconfig == Path("/srv/kube.conf")
    assert inventory.source is None


def test_api_endpoint_of_a_control_plane_node(tmp_path: Path) -> None:
    text = RACKED.replace(
        "    power: {driver: kind}\n",
        "    power: {driver: kind}\n    api_endpoint: https://10.0.0.9:6443\n",
        1,
    )
    inventory = load_inventory(write(tmp_path, text))
    assert inventory.node("cp1").api_endpoint == "https://10.0.0.9:6443"
    assert inventory.node("w1").api_endpoint is None


def test_api_endpoint_is_for_control_plane_nodes_and_must_be_https(tmp_path: Path) -> None:
    worker = MINIMAL + "    api_endpoint: https://10.0.0.9:6443\n"
    error = load_error(tmp_path, worker)
    assert "nodes[0].api_endpoint" in str(error) and "only for control-plane" in str(error)
    plain = RACKED.replace(
        "    power: {driver: kind}\n",
        "    power: {driver: kind}\n    api_endpoint: http://10.0.0.9:6443\n",
        1,
    )
    error = load_error(tmp_path, plain)
    assert "api_endpoint" in str(error) and "https://host:port" in str(error)
