"""``Given the critical workloads are spread across racks again`` on the lab (issue #34, item
6): ``web`` left on 2 of 3 racks (as earlier failovers leave it: topology spread acts at
scheduling only) is spread over 3 again by evictions through the Eviction API, each kept in
the journal owing nothing, and the precondition after it then holds. Through `powercut run`
with a feature written as a user would."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.journal import Journal
from harness.session import journal_path_for
from tests.lab.conftest import LabHandle, powercut, wait_for

pytestmark = pytest.mark.lab

PODS = "/api/v1/namespaces/lab/pods"
FEATURE = """\
Feature: a rack's loss, from the spread it assumes
  Scenario: the critical workloads spread over racks again first
    Given the critical workloads are spread across racks again
    And every critical workload has Ready replicas in at least 3 racks
"""


def _ready(pod: dict[str, object]) -> bool:
    status = pod.get("status") or {}
    assert isinstance(status, dict)
    md = pod.get("metadata") or {}
    assert isinstance(md, dict)
    return not md.get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _web_racks(lab: LabHandle) -> dict[str, list[str]]:
    """web's Ready pods by rack."""
    racks = {n.name: n.rack or "" for n in lab.inventory.nodes}
    out: dict[str, list[str]] = {}
    for p in lab.client.list(PODS, labelSelector="app=web")[0]:
        if _ready(p):
            out.setdefault(racks[p["spec"]["nodeName"]], []).append(p["metadata"]["name"])
    return out


def _schedulable(lab: LabHandle, nodes: list[str]) -> bool:
    for name in nodes:
        n = lab.client.get(f"/api/v1/nodes/{name}")
        taints = [t.get("key") for t in n["spec"].get("taints") or []]
        if n["spec"].get("unschedulable") or "node.kubernetes.io/unschedulable" in taints:
            return False
    return True


@contextlib.contextmanager
def _cordoned(lab: LabHandle, nodes: list[str]) -> Iterator[None]:
    try:
        for name in nodes:
            lab.client.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}})
        yield
    finally:
        for name in nodes:
            lab.client.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": None}})


def _leave_web_on_two_racks(lab: LabHandle) -> str:
    """Cordon one rack holding a web pod, delete that pod: its replacement goes to the other
    two racks; uncordon. Returns the rack web left."""
    wait_for("web Ready on 3 racks", lambda: len(_web_racks(lab)) == 3, 120)
    by_rack = _web_racks(lab)
    rack = sorted(by_rack)[-1]
    nodes = [n.name for n in lab.inventory.nodes if n.rack == rack]
    with _cordoned(lab, nodes):
        (victim,) = by_rack[rack]
        lab.client.delete(f"{PODS}/{victim}")
        wait_for(
            "web's 3 Ready pods on the 2 other racks",
            lambda: sum(map(len, (r := _web_racks(lab)).values())) == 3 and rack not in r,
            120,
        )
    wait_for(f"rack {rack} schedulable again", lambda: _schedulable(lab, nodes), 60)
    return rack


def test_web_left_on_two_racks_is_spread_over_three_again_by_journaled_evictions(
    lab: LabHandle, tmp_path: Path
) -> None:
    left = _leave_web_on_two_racks(lab)
    assert len(_web_racks(lab)) == 2
    features = tmp_path / "features"
    features.mkdir()
    (features / "respread.feature").write_text(FEATURE)
    journal = journal_path_for(lab.inventory)
    before = len(Journal.read_notes(journal)) if journal.exists() else 0
    out = tmp_path / "out"
    proc = powercut(
        "run",
        "-i",
        str(lab.inventory_path),
        "--features",
        str(features),
        "--no-builtin",
        "--fail-on-skip",
        "--no-html",
        "--out",
        str(out),
        check=False,
        timeout=600,
    )
    log = (out / "run.log").read_text() if (out / "run.log").exists() else ""
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{log[-4000:]}"
    assert "1 scenario: 1 passed" in proc.stdout, proc.stdout
    racks = _web_racks(lab)
    assert len(racks) == 3 and left in racks, racks
    notes = Journal.read_notes(journal)[before:]
    evicted = [n for n in notes if n.action == "evict"]
    assert evicted and all(n.target.startswith("pod/lab/") for n in evicted), notes
    assert any(n.target.startswith("pod/lab/web-") for n in evicted), evicted
    assert all("nothing to undo" in n.detail for n in evicted)
    assert [e for e in Journal.read(journal) if e.owes_undo] == []
