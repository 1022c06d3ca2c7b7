"""The lab's Prometheus files, its exporter's metrics and the inventory sections `lab up`
writes. Prometheus's own ``promtool`` checks the configuration and the rules."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from harness.inventory import parse_inventory
from harness.lab.inventory_out import inventory_doc
from harness.lab.prometheus import (
    LabExporter,
    lab_metrics,
    lab_prometheus,
    lab_rules,
    render_metrics,
)
from harness.lab.spec import LabSpec


def lab_spec(tmp_path: Path, **kw: object) -> LabSpec:
    spec = LabSpec(state_dir=str(tmp_path / "lab"), base_port=24000, **kw)  # type: ignore[arg-type]
    creds = spec.root / "creds"
    creds.mkdir(parents=True)
    (creds / "bmc-ca.crt").write_text("not read by the inventory loader\n")
    return spec


def test_the_inventory_points_at_the_lab_prometheus(tmp_path: Path) -> None:
    spec = lab_spec(tmp_path, workloads=True, prometheus="/usr/bin/prometheus")
    text = yaml.safe_dump(inventory_doc(spec), sort_keys=False)
    inv = parse_inventory(text, source="lab.yaml")
    assert inv.prometheus is not None and inv.prometheus.url == "http://127.0.0.1:24121"
    assert [s.name for s in inv.slos] == [
        "api-available",
        "api-error-ratio",
        "web-available",
        "quorum-available",
    ]
    api = inv.slos[0]
    assert (api.comparison, api.threshold) == (">=", 2.0)  # two of three API servers
    assert inv.slos[2].for_ == 40.0  # the fast profile's service-outage budget
    assert [a.name for a in inv.alerts] == ["LabAPIQuorumLost", "LabServiceDown"]
    assert [c.slo for c in inv.stop_conditions] == ["api-available"]


def test_no_prometheus_no_sections_and_one_control_plane_no_stop_condition(
    tmp_path: Path,
) -> None:
    spec = lab_spec(tmp_path)
    assert "prometheus" not in inventory_doc(spec)
    single = lab_spec(tmp_path / "one", control_planes=1, prometheus="/usr/bin/prometheus")
    doc = inventory_doc(single)
    assert "stop_conditions" not in doc
    assert doc["slos"][0]["threshold"] == 1


def test_the_service_outage_budget_sets_the_alert_delay(tmp_path: Path) -> None:
    fast = {r["alert"]: r for r in lab_rules(lab_spec(tmp_path / "f"))}
    upstream = {r["alert"]: r for r in lab_rules(lab_spec(tmp_path / "u", timings="upstream"))}
    assert fast["LabServiceDown"]["for"] == "40s"
    assert upstream["LabServiceDown"]["for"] == "75s"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool comes with prometheus")
def test_promtool_accepts_the_configuration_and_rules(tmp_path: Path) -> None:
    spec = lab_spec(tmp_path, workloads=True, prometheus="/usr/bin/prometheus")
    pki = spec.root / "pki"
    pki.mkdir()
    for name in ("ca.crt", "admin.crt", "admin.key"):
        (pki / name).write_text("x")
    server = lab_prometheus(spec, tmp_path)
    server.write_files()
    config = yaml.safe_load(server.config_path.read_text())
    api = config["scrape_configs"][0]
    assert api["scheme"] == "https" and api["scrape_interval"] == "5s"
    assert [c["labels"]["node"] for c in api["static_configs"]] == ["cp-1", "cp-2", "cp-3"]
    out = subprocess.run(
        ["promtool", "check", "rules", str(server.rules_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 rules found" in out.stdout
    out = subprocess.run(
        ["promtool", "check", "config", "--syntax-only", str(server.config_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_exporter_serves_power_and_service_probes(tmp_path: Path) -> None:
    spec = lab_spec(tmp_path, workloads=True)
    nodes = spec.nodes()
    off = {nodes[4].name}
    ready = {"web": 2, "quorum": 0, "registry": 1}
    exporter = LabExporter(
        0,
        lambda: lab_metrics(nodes, lambda n: n not in off, ready.__getitem__, list(ready)),
    )
    exporter.start()
    try:
        assert exporter._server is not None
        port = exporter._server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        exporter.stop()
    assert "# TYPE powercut_lab_node_power_on gauge" in text
    name = nodes[4].name
    assert (
        f'powercut_lab_node_power_on{{node="{name}",rack="{nodes[4].rack}",role="worker"}} 0'
        in text
    )
    assert 'powercut_service_up{critical="true",service="web"} 1' in text
    assert 'powercut_service_up{critical="true",service="quorum"} 0' in text
    assert 'powercut_service_up{critical="false",service="registry"} 1' in text
    assert 'powercut_service_ready_endpoints{service="web"} 2' in text


def test_label_values_are_escaped() -> None:
    text = render_metrics({"m": ("help", [({"a": 'x"y\\z'}, 1.5)])})
    assert 'm{a="x\\"y\\\\z"} 1.5' in text
