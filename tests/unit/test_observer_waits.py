"""Waits on observed state: woken by the timeline, terminal states end at once.

The observer runs on a manual fake clock: a change made "during" a wait is made once the
test's thread waits (:func:`meanwhile`), a timeout comes when the clock is moved past the
deadline, and a wait that ends at once is seen to end without the clock moving.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from harness.errors import WaitTimeout
from harness.kube import waits
from harness.kube.observer import Observer
from harness.kube.timeline import Timeline, WaitFailed
from tests.fakes.api import JSON, FakeApiServer, node, pod, set_ready
from tests.fakes.clock import FakeClock


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.add("nodes", node("w1"))
        server.add("nodes", node("w2"))
        yield server


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(manual=True)


@pytest.fixture
def obs(api: FakeApiServer, clock: FakeClock) -> Iterator[Observer]:
    observer = Observer(api.client(), timeline=Timeline(clock), backoff_s=(0.02, 0.2)).start()
    yield observer
    observer.stop()


def meanwhile(clock: FakeClock, fn: Callable[[], object]) -> None:
    """Run ``fn`` on another thread once the test waits on the clock: a change that comes
    while the wait is on."""

    test = threading.current_thread()  # not a watcher backing off: the test's own wait

    def run() -> None:
        clock.block_until_waiting(thread=test)
        fn()

    threading.Thread(target=run, name="meanwhile", daemon=True).start()


def expire(clock: FakeClock, seconds: float) -> None:
    """Move the clock ``seconds`` on once the test waits: its deadline passes."""
    meanwhile(clock, lambda: clock.advance(seconds))


def soon(obs: Observer, seconds: float = 5.0) -> float:
    return obs.timeline.clock.monotonic() + seconds


def seen(obs: Observer, what: str, check: Callable[[], bool]) -> None:
    """Wait until the observer has seen what the test just made (no deadline reached: the
    clock does not move)."""
    waits.wait_state(
        obs,
        lambda: True if check() else None,
        deadline=soon(obs),
        description=what,
        last_seen=str,
    )


def test_state_that_already_holds_returns_at_once(obs: Observer, clock: FakeClock) -> None:
    start = clock.monotonic()
    # at once: nothing moves the clock, so a wait that waited would never end
    assert waits.wait_node_ready(obs, "w1", deadline=soon(obs)).name == "w1"
    assert clock.monotonic() == start


def test_node_waits_are_woken_by_watch_events(
    api: FakeApiServer, obs: Observer, clock: FakeClock
) -> None:
    meanwhile(clock, lambda: api.update("nodes", "", "w1", lambda o: set_ready(o, "Unknown")))
    assert waits.wait_node_not_ready(obs, "w1", deadline=soon(obs)).ready == "Unknown"

    taint = {
        "key": "node.kubernetes.io/out-of-service",
        "value": "nodeshutdown",
        "effect": "NoExecute",
    }
    meanwhile(
        clock, lambda: api.update("nodes", "", "w1", lambda o: o["spec"]["taints"].append(taint))
    )
    got = waits.wait_node_taint(
        obs, "w1", "node.kubernetes.io/out-of-service:NoExecute", deadline=soon(obs)
    )
    assert got.taints[0].value == "nodeshutdown"

    meanwhile(
        clock, lambda: api.update("nodes", "", "w1", lambda o: o["spec"].update(unschedulable=True))
    )
    waits.wait_node_schedulable(obs, "w1", schedulable=False, deadline=soon(obs))
    meanwhile(clock, lambda: api.remove("nodes", "", "w1"))
    waits.wait_node_gone(obs, "w1", deadline=soon(obs))
    t = waits.wait_node_transition(obs.timeline, "w1", "not-ready", after=0.0, deadline=soon(obs))
    assert t.detail["status"] == "Unknown"


def test_timeout_says_what_was_expected_and_last_seen(obs: Observer, clock: FakeClock) -> None:
    expire(clock, 0.2)
    with pytest.raises(WaitTimeout) as err:
        waits.wait_node_not_ready(obs, "w2", deadline=soon(obs, 0.2))
    assert err.value.expected == "node w2 NotReady (Ready=False or Unknown)"
    assert err.value.last_seen.startswith("node w2: Ready=True")
    assert err.value.waited_s == pytest.approx(0.2)


def test_pod_ready_and_terminal_phase(api: FakeApiServer, obs: Observer, clock: FakeClock) -> None:
    api.add("pods", pod("web-0", node_name="w1", ready=False))
    meanwhile(clock, lambda: api.update("pods", "default", "web-0", lambda o: set_ready(o, True)))
    assert waits.wait_pod_ready(obs, "default", "web-0", deadline=soon(obs)).node == "w1"

    expire(clock, 0.1)
    with pytest.raises(WaitTimeout, match="on a node other than w1"):
        waits.wait_pod_ready(obs, "default", "web-0", not_on="w1", deadline=soon(obs, 0.1))

    api.add("pods", pod("job-x", node_name="w2", phase="Pending"))
    meanwhile(
        clock,
        lambda: api.update(
            "pods", "default", "job-x", lambda o: o["status"].update(phase="Failed")
        ),
    )
    start = clock.monotonic()
    with pytest.raises(WaitFailed) as err:
        waits.wait_pod_ready(obs, "default", "job-x", deadline=soon(obs, 30))
    assert clock.monotonic() == start  # at the Failed phase, not at the 30 s deadline
    assert "Failed" in err.value.seen


def test_pod_gone_and_node_evacuated(api: FakeApiServer, obs: Observer, clock: FakeClock) -> None:
    api.add("pods", pod("a", node_name="w1", owner=("ReplicaSet", "x")))
    api.add("pods", pod("b", node_name="w1", owner=("StatefulSet", "db")))
    api.add("pods", pod("agent", node_name="w1", owner=("DaemonSet", "agent")))
    deadline = soon(obs)
    waits.wait_state(
        obs,
        lambda: True if len(obs.pods(on_node="w1")) == 3 else None,
        deadline=deadline,
        description="3 pods seen",
        last_seen=str,
    )
    expire(clock, 0.1)
    with pytest.raises(WaitTimeout) as err:
        waits.wait_node_evacuated(obs, "w1", deadline=soon(obs, 0.1))
    assert "2 pod(s) still running on w1" in err.value.last_seen

    def terminate(o: JSON) -> None:
        o["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"

    meanwhile(
        clock,
        lambda: (
            api.update("pods", "default", "a", terminate),
            api.update("pods", "default", "b", terminate),
        ),
    )
    left = waits.wait_node_evacuated(obs, "w1", deadline=soon(obs))
    assert sorted(p.name for p in left) == ["a", "b"]  # the DaemonSet pod does not count
    uid = obs.pod("default", "b").uid  # type: ignore[union-attr]
    meanwhile(clock, lambda: api.remove("pods", "default", "b"))
    waits.wait_pod_gone(obs, "default", "b", uid=uid, deadline=soon(obs))


def test_workload_ready_off_a_node(api: FakeApiServer, obs: Observer, clock: FakeClock) -> None:
    api.add("pods", pod("db-0", node_name="w1", ready=True, owner=("StatefulSet", "db")))
    api.add("pods", pod("db-1", node_name="w2", ready=False, owner=("StatefulSet", "db")))
    seen(obs, "db-0 and db-1", lambda: len(obs.pods(workload="StatefulSet/db")) == 2)
    expire(clock, 0.1)
    with pytest.raises(WaitTimeout) as err:
        waits.wait_workload_ready(
            obs, "default", "StatefulSet/db", count=2, not_on={"w1"}, deadline=soon(obs, 0.1)
        )
    assert "0 of 2 ready" in err.value.last_seen and "db-1@w2" in err.value.last_seen
    meanwhile(clock, lambda: api.update("pods", "default", "db-1", lambda o: set_ready(o, True)))
    pods = waits.wait_workload_ready(obs, "default", "StatefulSet/db", count=2, deadline=soon(obs))
    assert [p.name for p in pods] == ["db-0", "db-1"]


def test_volume_pvc_and_endpoint_waits(api: FakeApiServer, obs: Observer, clock: FakeClock) -> None:
    api.add(
        "volumeattachments",
        {
            "metadata": {"name": "va-1"},
            "spec": {"nodeName": "w1", "source": {"persistentVolumeName": "pv-1"}},
            "status": {"attached": True},
        },
    )
    meanwhile(
        clock,
        lambda: api.add(
            "volumeattachments",
            {
                "metadata": {"name": "va-2"},
                "spec": {"nodeName": "w2", "source": {"persistentVolumeName": "pv-1"}},
                "status": {"attached": True},
            },
        ),
    )
    got = waits.wait_volume_attached(obs, "pv-1", not_on="w1", deadline=soon(obs))
    assert got.name == "va-2"
    meanwhile(
        clock,
        lambda: api.update(
            "volumeattachments", "", "va-1", lambda o: o["status"].update(attached=False)
        ),
    )
    waits.wait_volume_detached(obs, "pv-1", "w1", deadline=soon(obs))

    api.add(
        "persistentvolumeclaims",
        {"metadata": {"name": "d", "namespace": "ns"}, "status": {"phase": "Pending"}},
    )
    meanwhile(
        clock,
        lambda: api.update(
            "persistentvolumeclaims", "ns", "d", lambda o: o["status"].update(phase="Lost")
        ),
    )
    with pytest.raises(WaitFailed, match="Lost"):
        waits.wait_pvc_bound(obs, "ns", "d", deadline=soon(obs, 30))

    meanwhile(
        clock,
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
    assert waits.wait_endpoints_ready(obs, "ns", "web", min_ready=2, deadline=soon(obs)) == 2


def test_a_stopped_observer_ends_waits_at_once(obs: Observer) -> None:
    obs.stop()
    with pytest.raises(WaitFailed, match="observer stopped"):
        waits.wait_node_not_ready(obs, "w1", deadline=soon(obs, 30))
