"""The cluster's own model on the lab (fast timings): read from the flags the lab publishes
(kube-system/kubeadm-config), the nodes' Leases and the pods' tolerations; a derived budget
file; an impossible budget refused before anything is touched; a scenario's phases judged
against it in the report's record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.budgets import PROFILES
from harness.report.history import from_allure_results
from tests.lab.conftest import LabHandle, powercut

pytestmark = pytest.mark.lab


def _model(lab: LabHandle) -> dict[str, object]:
    out = powercut("budgets", "model", "-i", str(lab.inventory_path), "--json")
    doc: dict[str, object] = json.loads(out.stdout)
    return doc


def test_the_model_reads_the_labs_published_flags_leases_and_tolerations(lab: LabHandle) -> None:
    doc = _model(lab)
    settings = doc["settings"]
    assert isinstance(settings, dict)
    grace = settings["node-monitor-grace-period"]
    assert grace["value"] == 12 and not grace["assumed"]
    assert "kubeadm-config" in grace["source"]
    assert settings["node-monitor-period"]["value"] == 1
    lease = settings["nodeLeaseDurationSeconds"]
    assert lease["value"] == 8 and "Leases in kube-node-lease" in lease["source"]
    workloads = {w["ref"]: w for w in doc["workloads"]}  # type: ignore[attr-defined]
    web = workloads["lab/web"]
    assert web["unreachable_s"] == 10 and "spec.tolerations" in web["source"]
    assert web["pdb"] and web["pdb"].startswith("lab/web")
    assert workloads["lab/node-agent"]["unreachable_s"] is None  # never evicted
    quorum = workloads["lab/quorum"]
    assert quorum["kind"] == "StatefulSet" and quorum["pod_management_policy"]
    bounds = doc["bounds"]
    assert isinstance(bounds, dict)
    assert bounds["node_not_ready"]["low_s"] == 10 and bounds["node_not_ready"]["high_s"] == 15
    assert bounds["pod_eviction"]["low_s"] == 10


def test_derived_budgets_are_commented_and_hold_against_the_model(
    lab: LabHandle, tmp_path: Path
) -> None:
    out = tmp_path / "budgets.yaml"
    powercut("budgets", "derive", "-i", str(lab.inventory_path), "-o", str(out), "--margin", "50%")
    text = out.read_text()
    assert "# dominated by node-monitor-grace-period: " in text
    assert "kubeadm-config" in text
    doc = yaml.safe_load(text)
    derived = PROFILES[doc["profile"]].with_overrides(doc["overrides"])
    assert derived.node_not_ready == 23  # ceil(15 * 1.5)
    assert derived.pod_eviction == 20  # ceil((10 + 3) * 1.5)


def test_an_impossible_budget_is_refused_before_anything_is_touched(
    lab: LabHandle, tmp_path: Path
) -> None:
    inv = yaml.safe_load(lab.inventory_path.read_text())
    inv.setdefault("budgets", {})["overrides"] = {"pod-eviction": 5}
    bad = tmp_path / "impossible.yaml"
    bad.write_text(yaml.safe_dump(inv))
    for dry in (["--dry-run"], []):
        proc = powercut(
            "run", "-i", str(bad), "--out", str(tmp_path / "out"), "--no-html", *dry, check=False
        )
        assert proc.returncode == 2, proc.stderr
        assert "lab/web's pods tolerate unreachable for 10 s, so pod-eviction 5 s cannot hold" in (
            proc.stderr
        )
        assert not (tmp_path / "out").exists()
    nodes = lab.client.list("/api/v1/nodes")[0]
    assert all(
        any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
        for n in nodes
    )


def test_a_scenarios_phases_are_judged_against_the_model(lab: LabHandle, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = powercut(
        "run",
        "-i",
        str(lab.inventory_path),
        "--out",
        str(out),
        "--no-html",
        "--",
        "-k",
        "taint_moves_a_statefulset",
        check=False,
        timeout=900,
    )
    results = out / "allure-results"
    assert (results / "powercut-model.json").is_file(), proc.stdout + proc.stderr
    record = from_allure_results(
        results,
        run_id="r",
        target="lab",
        started="",
        finished="",
        powercut_version="",
        inventory="",
    )
    phases = {k: p for s in record.scenarios for k, p in s.phases.items()}
    assert phases, proc.stdout + proc.stderr
    modelled = {k: p for k, p in phases.items() if p.model_s is not None}
    not_ready = [p for k, p in modelled.items() if k.endswith(" NotReady")]
    assert not_ready and "node-monitor-grace-period" in not_ready[0].model_setting
    deviations = {k: (p.value_s, p.model_s) for k, p in modelled.items() if p.deviation}
    assert deviations == {}, deviations
