"""The storage-network cut on the lab, through the node's real SSH server (paramiko, the
SSH driver's own command): the node's pods with volumes lose their I/O (unready, still
running), its other pods and the node itself stay Ready; the heal armed on the node heals
by itself; a run killed with SIGKILL leaves the cut to ``powercut recover``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from harness.failures import FailureKind, bring_back, inflict
from harness.inventory import load_inventory
from harness.kube.names import Act, Stage
from harness.session import Session
from tests.killed import inflict_then_sigkill, recover
from tests.lab.conftest import POWERCUT, LabHandle, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.disruptive, pytest.mark.needs_bmc]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    return {**os.environ, "POWERCUT_STATE_DIR": str(tmp_path / "state")}


def _ready(obj: dict[str, Any]) -> bool:
    conds = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def _pods_on(lab: LabHandle, node: str) -> list[dict[str, Any]]:
    items, _ = lab.client.list("/api/v1/pods", fieldSelector=f"spec.nodeName={node}")
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def _has_claim(pod: dict[str, Any]) -> bool:
    return any("persistentVolumeClaim" in v for v in pod["spec"].get("volumes") or [])


def _cut_in_lab(lab: LabHandle) -> list[str]:
    return list(json.loads((lab.state_dir / "state.json").read_text()).get("storage_cut", []))


def _victim(lab: LabHandle) -> str:
    """A worker with a Ready pod with a volume and a Ready pod without one."""
    for spec in lab.inventory.nodes_by_role("worker"):
        pods = [p for p in _pods_on(lab, spec.name) if _ready(p)]
        if any(_has_claim(p) for p in pods) and any(not _has_claim(p) for p in pods):
            return spec.name
    raise AssertionError("no worker runs both a pod with a volume and one without")


def _all_ready(lab: LabHandle, node: str) -> bool:
    return _ready(lab.client.get(f"/api/v1/nodes/{node}")) and all(
        _ready(p) for p in _pods_on(lab, node)
    )


@pytest.fixture
def victim(lab: LabHandle) -> Any:
    wait_for("every pod Ready", lambda: _victim(lab), 120)
    node = _victim(lab)
    yield node
    wait_for(f"{node} and its pods Ready again", lambda: _all_ready(lab, node), 90)


def test_the_cut_fails_the_volume_pods_io_and_leaves_the_node_and_other_pods_ready(
    lab: LabHandle, victim: str
) -> None:
    with Session(lab.inventory) as session:
        done = inflict(session, [victim], FailureKind.STORAGE_CUT, undo_after_s=300)
        t_cut = time.monotonic()
        assert _cut_in_lab(lab) == [victim]
        sent = [t for t in session.timeline if t.transition == Act.STORAGE_CUT.at(Stage.SENT)]
        assert [(t.name, t.detail["protocol"]) for t in sent] == [(victim, "ssh")]
        with_claims = [p["metadata"]["name"] for p in _pods_on(lab, victim) if _has_claim(p)]
        wait_for(
            "the pods with volumes unready",
            lambda: all(
                not _ready(p) for p in _pods_on(lab, victim) if p["metadata"]["name"] in with_claims
            ),
            30,
        )
        print(f"\nvolume pods unready {time.monotonic() - t_cut:.1f}s after the cut")
        unready = [p for p in _pods_on(lab, victim) if not _ready(p)]
        reasons = {
            c.get("reason")
            for p in unready
            for c in p["status"]["conditions"]
            if c["type"] == "Ready"
        }
        assert reasons == {"VolumeIOFailed"}
        # Past the node-monitor grace period (fast timings: 12 s): the kubelet still
        # reports, so the node stays Ready; the pods without volumes too.
        time.sleep(15)
        assert _ready(lab.client.get(f"/api/v1/nodes/{victim}"))
        others = [p for p in _pods_on(lab, victim) if not _has_claim(p)]
        assert others and all(_ready(p) for p in others)
        assert all(p["metadata"]["name"] in with_claims for p in unready)
        back = bring_back(session, [victim], FailureKind.STORAGE_CUT)
        assert _cut_in_lab(lab) == []
        assert done.acks[victim].mono >= done.sent[victim].mono
        assert back.acks[victim].transition == Act.STORAGE_HEAL.at(Stage.ACKNOWLEDGED)


def test_the_heal_armed_on_the_node_heals_it_by_itself(lab: LabHandle, victim: str) -> None:
    with Session(lab.inventory) as session:
        inflict(session, [victim], FailureKind.STORAGE_CUT, undo_after_s=3)
        assert _cut_in_lab(lab) == [victim]
        wait_for("the armed heal", lambda: _cut_in_lab(lab) == [], 15)


def test_sigkill_leaves_the_cut_to_recover(
    lab: LabHandle, victim: str, env: dict[str, str]
) -> None:
    inflict_then_sigkill(lab.inventory_path, victim, "STORAGE_CUT", env)
    assert _cut_in_lab(lab) == [victim], "SIGKILL leaves no chance to heal: the node stays cut"
    assert "heal_storage" in recover(POWERCUT, lab.inventory_path, env)
    assert _cut_in_lab(lab) == []
    # the lock is free again
    with Session(load_inventory(lab.inventory_path)):
        pass
