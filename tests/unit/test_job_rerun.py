"""Re-running a Job (the repopulation runbook): journaled with the manifest as its undo
before the delete, settled once the Job exists again, and a Job that completes or fails
is judged on the new Job, not on the one deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.checks import CheckFailed
from harness.inventory import Inventory, load_inventory
from harness.journal import Journal
from harness.kube.client import KubeClient
from harness.scenario.acts import jobs
from harness.scenario.errors import NothingToMeasure
from harness.scenario.report import Measurements
from harness.session import ClusterExecutor, Session, journal_path_for
from tests.fakes.api import FakeApiServer
from tests.fakes.power import FakeBmcs, add_nodes, write_inventory

JOBS = "/apis/batch/v1/namespaces/lab/jobs"


@pytest.fixture
def inventory(tmp_path: Path, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> Inventory:
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    FakeBmcs().install(monkeypatch)
    add_nodes(api)
    return load_inventory(write_inventory(tmp_path, api.url))


def _job(client: KubeClient) -> str:
    made = client.create(
        JOBS,
        {
            "metadata": {"name": "seed", "labels": {"app": "seed"}},
            "spec": {"template": {"metadata": {"labels": {"app": "seed"}}, "spec": {}}},
        },
    )
    return str(made["metadata"]["uid"])


def _complete(api: FakeApiServer, kind: str = "Complete") -> None:
    api.update(
        "jobs",
        "lab",
        "seed",
        lambda o: o.update(status={"conditions": [{"type": kind, "status": "True"}]}),
    )


def test_a_rerun_is_journaled_and_settled_once_the_job_exists_again(
    inventory: Inventory, api: FakeApiServer
) -> None:
    client = api.client()
    old = _job(client)
    with Session(inventory, client=client) as s:
        r = jobs.rerun(s, "lab", "seed", 5.0)
        assert r.old_uid == old and r.new_uid not in ("", old)
        assert r.created.mono >= r.sent.mono
    (entry,) = Journal.read(journal_path_for(inventory))
    assert (entry.action, entry.target, entry.undo.action) == (
        "rerun_job",
        "job/lab/seed",
        "restore_job",
    )
    assert not entry.owes_undo
    manifest = entry.undo.args["manifest"]
    assert "uid" not in manifest["metadata"] and "selector" not in manifest["spec"]


def test_the_undo_creates_the_job_from_its_manifest_only_when_it_is_missing(
    inventory: Inventory, api: FakeApiServer
) -> None:
    client = api.client()
    _job(client)
    manifest = {"metadata": {"name": "seed"}, "spec": {"template": {"spec": {}}}}
    executor = ClusterExecutor(inventory, client)
    assert executor.restore_job("lab", "seed", manifest) == "Job lab/seed exists already"
    client.delete(f"{JOBS}/seed")
    assert executor.restore_job("lab", "seed", manifest) is None
    assert api.get("jobs", "lab", "seed") is not None


def test_no_such_job_is_nothing_to_measure(inventory: Inventory, api: FakeApiServer) -> None:
    with (
        Session(inventory, client=api.client()) as s,
        pytest.raises(NothingToMeasure, match="no Job seed in namespace lab"),
    ):
        jobs.rerun(s, "lab", "seed", 5.0)


def test_completion_is_read_on_the_new_job_and_a_failed_one_fails_at_once(
    inventory: Inventory, api: FakeApiServer
) -> None:
    client = api.client()
    _job(client)
    _complete(api)  # the old Job had completed: that must not count for the new one
    with Session(inventory, client=client) as s:
        r = jobs.rerun(s, "lab", "seed", 5.0)
        ms = Measurements()
        _complete(api)
        jobs.completes(s.timeline, client, r, 5.0, ms)
        assert [m["phase"] for m in ms.items] == [
            "Job lab/seed re-created",
            "Job lab/seed complete",
        ]
        _complete(api, "Failed")
        with pytest.raises(CheckFailed, match=r"job-complete: .*Job failed"):
            jobs.completes(s.timeline, client, r, 60.0, Measurements())
