"""docs/lab.md must be what scripts/gen_lab_doc.py renders from the lab's own code."""

from __future__ import annotations

from pathlib import Path

from harness.lab.inventory_out import inventory_doc
from harness.lab.reference import _spec, render
from harness.lab.workloads import workload_objects

ROOT = Path(__file__).resolve().parents[2]


def test_lab_doc_is_up_to_date() -> None:
    current = (ROOT / "docs" / "lab.md").read_text(encoding="utf-8")
    assert current == render(), (
        "docs/lab.md is out of date with harness/lab: run `python scripts/gen_lab_doc.py` "
        "and commit the result"
    )


def test_the_lab_doc_names_every_node_workload_job_slo_and_alert_the_lab_has() -> None:
    text = render()
    inv = inventory_doc(_spec())
    for node in inv["nodes"]:
        assert f"| `{node['name']}` | {node['role']} | `{node['rack']}` |" in text
    for w in inv["workloads"]:
        assert f"{w['kind']} `{w['name']}`" in text
    for _, obj in workload_objects():
        if obj["kind"] in ("Job", "Service", "StatefulSet", "Deployment", "DaemonSet"):
            assert f"`{obj['metadata']['name']}`" in text, obj["metadata"]["name"]
    for slo in inv["slos"]:
        assert f"| `{slo['name']}` |" in text
    for alert in inv["alerts"]:
        assert f"| `{alert['name']}` |" in text
    assert f"`safety.max_nodes_down`: {inv['safety']['max_nodes_down']}" in text
