"""Actions against the fake API server: cordon, taints, drain (PDB 429), delete, force, Jobs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

from harness.errors import PermanentError, WaitTimeout
from harness.kube import actions
from harness.kube.actions import DrainProgress
from harness.kube.client import ApiError, KubeClient
from harness.kube.timeline import ACTION, FakeClock, Timeline
from tests.fakes.api import JSON, FakeApiServer, node, pod

OOS = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.add("nodes", node("w1"))
        server.add("nodes", node("w2"))
        yield server


@pytest.fixture
def client(api: FakeApiServer) -> Iterator[KubeClient]:
    c = api.client()
    yield c
    c.close()


def terminating(obj: JSON) -> JSON:
    obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return obj


def test_cordon_and_uncordon_are_recorded(api: FakeApiServer, client: KubeClient) -> None:
    tl = Timeline()
    actions.cordon(client, "w1", timeline=tl)
    assert api.get("nodes", "", "w1")["spec"]["unschedulable"] is True  # type: ignore[index]
    actions.uncordon(client, "w1", timeline=tl)
    assert "unschedulable" not in api.get("nodes", "", "w1")["spec"]  # type: ignore[index]
    assert [t.transition for t in tl.all(ACTION, "w1")] == [
        "cordon sent",
        "cordon done",
        "uncordon sent",
        "uncordon done",
    ]


def test_out_of_service_taint_is_added_once_and_removed(
    api: FakeApiServer, client: KubeClient
) -> None:
    other = {"key": "example.com/maintenance", "value": "", "effect": "NoSchedule"}
    api.update("nodes", "", "w1", lambda o: o["spec"]["taints"].append(other))
    tl = Timeline()
    fence = actions.Fence("w1", off_by="ipmi")
    assert actions.add_out_of_service_taint(client, "w1", fence=fence, timeline=tl) is True
    assert api.get("nodes", "", "w1")["spec"]["taints"] == [other, OOS]  # type: ignore[index]
    assert actions.add_out_of_service_taint(client, "w1", fence=fence) is False
    patches = [r for r in api.requests if r.method == "PATCH"]
    assert patches[0].body["metadata"]["resourceVersion"]  # optimistic concurrency
    assert actions.remove_out_of_service_taint(client, "w1") is True
    assert actions.remove_out_of_service_taint(client, "w1") is False
    assert api.get("nodes", "", "w1")["spec"]["taints"] == [other]  # type: ignore[index]
    done = tl.first(ACTION, "w1", "taint done")
    assert done is not None and done.detail == {"changed": True}


def test_taint_update_retries_on_conflict(api: FakeApiServer, client: KubeClient) -> None:
    api.conflicts_next = 2
    assert actions.add_taint(client, "w2", "k", "v", "NoSchedule") is True
    assert len([r for r in api.requests if r.method == "PATCH"]) == 3
    assert api.get("nodes", "", "w2")["spec"]["taints"] == [  # type: ignore[index]
        {"key": "k", "value": "v", "effect": "NoSchedule"}
    ]


def _drain_fixture(api: FakeApiServer) -> None:
    api.live_nodes = {"w1"}  # a live kubelet: evicted pods go away
    api.add("pods", pod("web-a", node_name="w1", owner=("ReplicaSet", "web-1")))
    api.add("pods", pod("db-0", node_name="w1", owner=("StatefulSet", "db")))
    api.add("pods", pod("agent", node_name="w1", owner=("DaemonSet", "agent")))
    api.add(
        "pods", pod("etcd-w1", node_name="w1", annotations={"kubernetes.io/config.mirror": "h"})
    )
    api.add("pods", terminating(pod("old", node_name="w1")))
    api.add("pods", pod("web-b", node_name="w2", owner=("ReplicaSet", "web-1")))


def test_drain_evicts_retries_pdb_429_and_skips_daemonset_and_mirror_pods(
    api: FakeApiServer, client: KubeClient
) -> None:
    _drain_fixture(api)
    refusals = {"web-a": 2}

    def pdb(ns: str, name: str) -> int | None:
        if refusals.get(name, 0) > 0:
            refusals[name] -= 1
            return 429
        return None

    api.eviction_hook = pdb
    clock = FakeClock()
    tl = Timeline(clock)
    seen: list[DrainProgress] = []
    # the already-Terminating pod finishes a little later: drain waits for it (by watch)
    # drain watches for the pod to go on real time (its clock paces only its retries)
    timer = threading.Timer(0.1, lambda: api.remove("pods", "default", "old"))  # noqa: TID251
    timer.start()
    try:
        result = actions.drain(
            client,
            "w1",
            deadline=clock.monotonic() + 60,
            progress=seen.append,
            timeline=tl,
            clock=clock,
        )
    finally:
        timer.cancel()
    assert result.evicted == ("default/db-0", "default/web-a")
    assert result.skipped == {"default/agent": "DaemonSet pod", "default/etcd-w1": "mirror pod"}
    assert result.attempts == 4
    outcomes = [(p.name, p.outcome, p.attempts) for p in seen]
    assert ("web-a", "blocked", 1) in outcomes and ("web-a", "blocked", 2) in outcomes
    assert ("web-a", "evicted", 3) in outcomes and ("db-0", "evicted", 1) in outcomes
    assert ("agent", "skipped-daemonset", 0) in outcomes
    assert ("etcd-w1", "skipped-mirror", 0) in outcomes
    assert ("old", "already-terminating", 0) in outcomes
    assert {p.name for p in seen if p.outcome == "deleted"} == {"db-0", "web-a", "old"}
    blocked = next(p for p in seen if p.outcome == "blocked")
    assert "disruption budget" in blocked.message
    assert clock.monotonic() >= 1000.0 + 0.5 + 1.0  # two backoffs, slept on the fake clock
    assert api.get("nodes", "", "w1")["spec"]["unschedulable"] is True  # type: ignore[index]
    assert api.get("pods", "default", "web-b") is not None and api.get("pods", "default", "agent")
    evictions = [r for r in api.requests if r.path.endswith("/eviction")]
    assert evictions[0].body["apiVersion"] == "policy/v1"
    assert {t.name for t in tl.all(ACTION, transition="evicted")} == {"db-0", "web-a"}
    assert tl.first(ACTION, "w1", "drain done").detail == {  # type: ignore[union-attr]
        "evicted": 2,
        "skipped": 2,
        "attempts": 4,
    }


def test_drain_gives_up_at_the_deadline_naming_the_blocked_pods(
    api: FakeApiServer, client: KubeClient
) -> None:
    api.add("pods", pod("web-a", node_name="w1"))
    api.eviction_hook = lambda ns, name: 429
    clock = FakeClock()
    tl = Timeline(clock)
    with pytest.raises(WaitTimeout) as err:
        actions.drain(client, "w1", deadline=clock.monotonic() + 30, timeline=tl, clock=clock)
    assert err.value.expected == "every pod of node w1 evicted"
    assert err.value.last_seen.startswith("default/web-a: ")
    assert "disruption budget" in err.value.last_seen
    assert err.value.waited_s == pytest.approx(30, abs=0.6)
    assert tl.first(ACTION, "w1", "drain failed") is not None


def test_drain_stops_at_once_on_a_permanent_error(api: FakeApiServer, client: KubeClient) -> None:
    api.add("pods", pod("web-a", node_name="w1"))
    api.eviction_hook = lambda ns, name: 403
    clock = FakeClock()
    with pytest.raises(ApiError) as err:
        actions.drain(client, "w1", deadline=clock.monotonic() + 300, clock=clock)
    assert err.value.status == 403
    assert clock.monotonic() == 1000.0


def test_delete_node(api: FakeApiServer, client: KubeClient) -> None:
    result = actions.delete_node(client, "w2", deadline=time.monotonic() + 5)
    assert result.gone and result.finalizers_cleared == ()
    delete = next(r for r in api.requests if r.method == "DELETE")
    assert delete.body["preconditions"]["uid"]
    again = actions.delete_node(client, "w2")
    assert again.already_absent and again.gone


def test_delete_node_clears_stuck_finalizers_and_says_so(
    api: FakeApiServer, client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    api.update(
        "nodes", "", "w1", lambda o: o["metadata"].update(finalizers=["example.com/cleanup"])
    )
    stuck = actions.delete_node(client, "w1")
    assert not stuck.gone and stuck.finalizers_cleared == ()
    assert api.get("nodes", "", "w1")["metadata"]["deletionTimestamp"]  # type: ignore[index]

    tl = Timeline()
    with caplog.at_level(logging.WARNING, logger="harness.kube.actions"):
        result = actions.delete_node(
            client,
            "w1",
            clear_finalizers=True,
            finalizer_grace_s=0.2,
            deadline=time.monotonic() + 5,
            timeline=tl,
        )
    assert result.gone and result.finalizers_cleared == ("example.com/cleanup",)
    assert api.get("nodes", "", "w1") is None
    assert "cleared stuck finalizers example.com/cleanup" in caplog.text
    cleared = tl.first(ACTION, "w1", "finalizers cleared")
    assert cleared is not None and cleared.detail == {"finalizers": ["example.com/cleanup"]}


def test_force_delete_pods_of_a_node(api: FakeApiServer, client: KubeClient) -> None:
    api.add("pods", terminating(pod("db-0", node_name="w1", owner=("StatefulSet", "db"))))
    api.add("pods", pod("web-a", node_name="w1"))
    api.add("pods", pod("agent", node_name="w1", owner=("DaemonSet", "agent")))
    api.add(
        "pods", pod("etcd-w1", node_name="w1", annotations={"kubernetes.io/config.mirror": "h"})
    )
    api.add("pods", pod("web-b", node_name="w2"))
    assert actions.force_delete_pods(client, "w1", only_terminating=True) == ["default/db-0"]
    assert api.get("pods", "default", "db-0") is None
    assert api.get("pods", "default", "web-a") is not None
    tl = Timeline()
    assert actions.force_delete_pods(client, "w1", timeline=tl) == ["default/web-a"]
    deletes = [r for r in api.requests if r.method == "DELETE"]
    assert all(r.body["gracePeriodSeconds"] == 0 for r in deletes)
    assert api.get("pods", "default", "agent") and api.get("pods", "default", "etcd-w1")
    assert api.get("pods", "default", "web-b") is not None
    assert tl.first(ACTION, "w1", "force-delete-pods done").detail == {"pods": 1}  # type: ignore[union-attr]


def test_restart_pods_by_selector(api: FakeApiServer, client: KubeClient) -> None:
    api.live_nodes = {"w1"}
    api.add("pods", pod("web-a", node_name="w1", labels={"app": "web"}))
    api.add("pods", pod("web-b", node_name="w1", labels={"app": "web"}))
    api.add("pods", pod("db-0", node_name="w1", labels={"app": "db"}))
    assert actions.restart_pods(client, "default", "app=web") == ["web-a", "web-b"]
    assert api.get("pods", "default", "web-a") is None
    assert api.get("pods", "default", "db-0") is not None


def test_job_for_rerun_strips_generated_fields() -> None:
    job: JSON = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "load",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "5",
            "creationTimestamp": "t",
            "generation": 1,
            "managedFields": [{}],
            "labels": {"app": "load", "controller-uid": "u", "job-name": "load"},
            "annotations": {"batch.kubernetes.io/job-tracking": ""},
        },
        "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
            "template": {
                "metadata": {"labels": {"app": "load", "batch.kubernetes.io/controller-uid": "u"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
        "status": {"succeeded": 1},
    }
    out = actions.job_for_rerun(job)
    assert out["metadata"] == {"name": "load", "namespace": "ns", "labels": {"app": "load"}}
    assert "selector" not in out["spec"] and "status" not in out
    assert out["spec"]["template"]["metadata"]["labels"] == {"app": "load"}
    assert job["metadata"]["uid"] == "u"  # the input is left alone
    manual = {**job, "spec": {**job["spec"], "manualSelector": True}}
    assert actions.job_for_rerun(manual)["spec"]["selector"] == job["spec"]["selector"]


def test_rerun_job_deletes_and_recreates(api: FakeApiServer, client: KubeClient) -> None:
    first = client.create(
        "/apis/batch/v1/namespaces/ns/jobs",
        {
            "metadata": {"name": "load", "labels": {"app": "load"}},
            "spec": {"template": {"metadata": {"labels": {"app": "load"}}, "spec": {}}},
        },
    )
    assert first["spec"]["selector"]  # generated by the "Job controller"
    tl = Timeline()
    new = actions.rerun_job(client, "ns", "load", deadline=time.monotonic() + 5, timeline=tl)
    assert new["metadata"]["uid"] != first["metadata"]["uid"]
    assert new["metadata"]["labels"]["controller-uid"] == new["metadata"]["uid"]
    assert new["metadata"]["labels"]["app"] == "load"
    delete = next(r for r in api.requests if r.method == "DELETE")
    assert delete.body["propagationPolicy"] == "Background"
    done = tl.first(ACTION, "load", "rerun-job done")
    assert (
        done is not None and done.namespace == "ns" and done.detail["uid"] == new["metadata"]["uid"]
    )


# -- fencing ---------------------------------------------------------------------------------


def test_the_out_of_service_taint_is_refused_without_a_fence_for_that_node(
    api: FakeApiServer, client: KubeClient
) -> None:
    with pytest.raises(actions.FencingRequired, match="no BMC confirmed the node's power OFF"):
        actions.add_out_of_service_taint(client, "w1", fence=None)
    with pytest.raises(actions.FencingRequired, match="the fence given is for w2"):
        actions.add_out_of_service_taint(client, "w1", fence=actions.Fence("w2", off_by="ipmi"))
    assert api.get("nodes", "", "w1")["spec"]["taints"] == []  # type: ignore[index]
    assert not [r for r in api.requests if r.method == "PATCH"]
    override = actions.Fence("w1", override="node pulled from the rack by hand")
    assert actions.add_out_of_service_taint(client, "w1", fence=override) is True


def test_a_fence_is_a_bmc_reading_or_an_override_with_a_reason() -> None:
    with pytest.raises(PermanentError, match="exactly one"):
        actions.Fence("w1")
    with pytest.raises(PermanentError, match="exactly one"):
        actions.Fence("w1", off_by="ipmi", override="both")
    with pytest.raises(PermanentError, match="needs a reason"):
        actions.Fence("w1", override=" ")
    assert str(actions.Fence("w1", off_by="redfish")) == (
        "w1 fenced: power OFF confirmed by redfish"
    )


def test_force_deleting_the_pods_of_a_node_that_is_not_ready_needs_a_fence(
    api: FakeApiServer, client: KubeClient
) -> None:
    api.update("nodes", "", "w1", lambda o: o["status"]["conditions"][0].update(status="Unknown"))
    api.add("pods", pod("db-0", node_name="w1", owner=("StatefulSet", "db")))
    with pytest.raises(actions.FencingRequired, match="refused to force-delete the pods of"):
        actions.force_delete_pods(client, "w1")
    assert api.get("pods", "default", "db-0") is not None
    fence = actions.Fence("w1", off_by="redfish")
    assert actions.force_delete_pods(client, "w1", fence=fence) == ["default/db-0"]
