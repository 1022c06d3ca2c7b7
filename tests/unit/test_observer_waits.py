"""Waits on observed state: woken by the timeline, terminal states end at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from harness.errors import WaitTimeout
from harness.kube import waits
from harness.kube.observer import Observer
from harness.kube.timeline import WaitFailed
from tests.fakes.api import JSON, FakeApiServer, node, pod, set_ready


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.add("nodes", node("w1"))
        server.add("nodes", node("w2"))
        yield server


@pytest.fixture
def obs(api: FakeApiServer) -> Iterator[Observer]:
    observer = Observer(api.client(), backoff_s=(0.02, 0.2)).start()
    yield observer
    observer.stop()


def later(delay_s: float, fn: Callable[[], object]) -> threading.Timer:
    timer = threading.Timer(delay_s, fn)
    timer.start()
    return timer


def soon(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


def test_state_that_already_holds_returns_at_once(obs: Observer) -> None:
    t0 = time.monotonic()
    assert waits.wait_node_ready(obs, "w1", deadline=soon()).name == "w1"
    assert time.monotonic() - t0 < 0.5


def test_node_waits_are_woken_by_watch_events(api: FakeApiServer, obs: Observer) -> None:
    later(0.05, lambda: api.update("nodes", "", "w1", lambda o: set_ready(o, "Unknown")))
    assert waits.wait_node_not_ready(obs, "w1", deadline=soon()).ready == "Unknown"

    taint = {
        "key": "node.kubernetes.io/out-of-service",
        "value": "nodeshutdown",
        "effect": "NoExecute",
    }
    later(0.05, lambda: api.update("nodes", "", "w1", lambda o: o["spec"]["taints"].append(taint)))
    got = waits.wait_node_taint(
        obs, "w1", "node.kubernetes.io/out-of-service:NoExecute", deadline=soon()
    )
    assert got.taints[0].value == "nodeshutdown"

    later(
        0.05, lambda: api.update("nodes", "", "w1", lambda o: o["spec"].update(unschedulable=True))
    )
    waits.wait_node_schedulable(obs, "w1", schedulable=False, deadline=soon())
    later(0.05, lambda: api.remove("nodes", "", "w1"))
    waits.wait_node_gone(obs, "w1", deadline=soon())
    t = waits.wait_node_transition(obs.timeline, "w1", "not-ready", after=0.0, deadline=soon())
    assert t.detail["status"] == "Unknown"


def test_timeout_says_what_was_expected_and_last_seen(obs: Observer) -> None:
    with pytest.raises(WaitTimeout) as err:
        waits.wait_node_not_ready(obs, "w2", deadline=soon(0.2))
    assert err.value.expected == "node w2 NotReady (Ready=False or Unknown)"
    assert err.value.last_seen.startswith("node w2: Ready=True")
    assert 0.15 < err.value.waited_s < 2


def test_pod_ready_and_terminal_phase(api: FakeApiServer, obs: Observer) -> None:
    api.add("pods", pod("web-0", node_name="w1", ready=False))
    later(0.05, lambda: api.update("pods", "default", "web-0", lambda o: set_ready(o, True)))
    assert waits.wait_pod_ready(obs, "default", "web-0", deadline=soon()).node == "w1"

    with pytest.raises(WaitTimeout, match="on a node other than w1"):
        waits.wait_pod_ready(obs, "default", "web-0", not_on="w1", deadline=soon(0.1))

    api.add("pods", pod("job-x", node_name="w2", phase="Pending"))
    later(
        0.05,
        lambda: api.update(
            "pods", "default", "job-x", lambda o: o["status"].update(phase="Failed")
        ),
    )
    t0 = time.monotonic()
    with pytest.raises(WaitFailed) as err:
        waits.wait_pod_ready(obs, "default", "job-x", deadline=soon(30))
    assert time.monotonic() - t0 < 5  # not the 30 s deadline
    assert "Failed" in err.value.seen


def test_pod_gone_and_node_evacuated(api: FakeApiServer, obs: Observer) -> None:
    api.add("pods", pod("a", node_name="w1", owner=("ReplicaSet", "x")))
    api.add("pods", pod("b", node_name="w1", owner=("StatefulSet", "db")))
    api.add("pods", pod("agent", node_name="w1", owner=("DaemonSet", "agent")))
    deadline = soon()
    waits.wait_state(
        obs,
        lambda: True if len(obs.pods(on_node="w1")) == 3 else None,
        deadline=deadline,
        description="3 pods seen",
        last_seen=str,
    )
    with pytest.raises(WaitTimeout) as err:
        waits.wait_node_evacuated(obs, "w1", deadline=soon(0.1))
    assert "2 pod(s) still running on w1" in err.value.last_seen

    def terminate(o: JSON) -> None:
        o["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"

    later(0.05, lambda: api.update("pods", "default", "a", terminate))
    later(0.1, lambda: api.update("pods", "default", "b", terminate))
    left = waits.wait_node_evacuated(obs, "w1", deadline=soon())
    assert sorted(p.name for p in left) == ["a", "b"]  # the DaemonSet pod does not count
    uid = obs.pod("default", "b").uid  # type: ignore[union-attr]
    later(0.05, lambda: api.remove("pods", "default", "b"))
    waits.wait_pod_gone(obs, "default", "b", uid=uid, deadline=soon())


def test_workload_ready_off_a_node(api: FakeApiServer, obs: Observer) -> None:
    api.add("pods", pod("db-0", node_name="w1", ready=True, owner=("StatefulSet", "db")))
    api.add("pods", pod("db-1", node_name="w2", ready=False, owner=("StatefulSet", "db")))
    with pytest.raises(WaitTimeout) as err:
        waits.wait_workload_ready(
            obs, "default", "StatefulSet/db", count=2, not_on={"w1"}, deadline=soon(0.1)
        )
    assert "0 of 2 ready" in err.value.last_seen and "db-1@w2" in err.value.last_seen
    later(0.05, lambda: api.update("pods", "default", "db-1", lambda o: set_ready(o, True)))
    pods = waits.wait_workload_ready(obs, "default", "StatefulSet/db", count=2, deadline=soon())
    assert [p.name for p in pods] == ["db-0", "db-1"]


def test_volume_pvc_and_endpoint_waits(api: FakeApiServer, obs: Observer) -> None:
    api.add(
        "volumeattachments",
        {
            "metadata": {"name": "va-1"},
            "spec": {"nodeName": "w1", "source": {"persistentVolumeName": "pv-1"}},
            "status": {"attached": True},
        },
    )
    later(
        0.05,
        lambda: api.add(
            "volumeattachments",
            {
                "metadata": {"name": "va-2"},
                "spec": {"nodeName": "w2", "source": {"persistentVolumeName": "pv-1"}},
                "status": {"attached": True},
            },
        ),
    )
    got = waits.wait_volume_attached(obs, "pv-1", not_on="w1", deadline=soon())
    assert got.name == "va-2"
    later(
        0.05,
        lambda: api.update(
            "volumeattachments", "", "va-1", lambda o: o["status"].update(attached=False)
        ),
    )
    waits.wait_volume_detached(obs, "pv-1", "w1", deadline=soon())

    api.add(
        "persistentvolumeclaims",
        {"metadata": {"name": "d", "namespace": "ns"}, "status": {"phase": "Pending"}},
    )
    later(
        0.05,
        lambda: api.update(
            "persistentvolumeclaims", "ns", "d", lambda o: o["status"].update(phase="Lost")
        ),
    )
    with pytest.raises(WaitFailed, match="Lost"):
        waits.wait_pvc_bound(obs, "ns", "d", deadline=soon(30))

    later(
        0.05,
        lambda: api.add(
            "endpointslices",
            {
                "metadata": {
                    "name": "web-x",
                    "namespace": "ns",
                    "labels": {"kubernetes.io/service-name": "web"},
                },
                "endpoints": [{"conditions": {"ready": True}}, {"conditions": {"ready": True}}],
            },
        ),
    )
    assert waits.wait_endpoints_ready(obs, "ns", "web", min_ready=2, deadline=soon()) == 2


def test_a_stopped_observer_ends_waits_at_once(obs: Observer) -> None:
    obs.stop()
    with pytest.raises(WaitFailed, match="observer stopped"):
        waits.wait_node_not_ready(obs, "w1", deadline=soon(30))
