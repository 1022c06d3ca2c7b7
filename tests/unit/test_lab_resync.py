"""The lab's kubelet-style resync after power-on, against a real-HTTP fake API server.

The race it papers over (a restarted kwok skipping its node's pods) cannot be provoked on
demand in a real lab; these tests pin down what the resync touches, when, and when it stops.
"""

from __future__ import annotations

from harness.lab.resync import ANNOTATION, Resync, waiting_for_node
from tests.fakes.api import JSON, FakeApiServer, node, pod, set_ready
from tests.fakes.clock import FakeClock


def annotated(api: FakeApiServer, name: str) -> bool:
    obj = api.get("pods", "lab", name)
    assert obj is not None
    return ANNOTATION in ((obj["metadata"].get("annotations")) or {})


def terminating(p: JSON) -> JSON:
    p["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:00Z"
    p["metadata"]["finalizers"] = ["test/keep"]  # the fake finalises a patched pod without
    return p


def test_waiting_for_node_is_pending_not_ready_or_terminating() -> None:
    assert waiting_for_node(pod("a", node_name="w1", ready=False))
    assert waiting_for_node(pod("a", node_name="w1", phase="Pending"))
    assert waiting_for_node(terminating(pod("a", node_name="w1", ready=True)))
    assert not waiting_for_node(pod("a", node_name="w1", ready=True))
    assert not waiting_for_node(pod("a", node_name="w1", phase="Succeeded"))
    assert not waiting_for_node(pod("a", node_name="w1", phase="Failed"))


def step(clock: FakeClock, seconds: float) -> None:
    """Move the resync's clock on and return once its thread has acted on it (and waits on
    the clock again, or has ended)."""
    clock.advance(seconds)
    clock.settle()


def test_nudges_only_the_waiting_pods_of_the_node_once_it_reads_ready(
    api: FakeApiServer,
) -> None:
    api.add("nodes", node("w1", ready="Unknown"))
    api.add("pods", pod("stuck", namespace="lab", node_name="w1", ready=False))
    api.add("pods", terminating(pod("leaving", namespace="lab", node_name="w1", ready=False)))
    api.add("pods", pod("fine", namespace="lab", node_name="w1", ready=True))
    api.add("pods", pod("done", namespace="lab", node_name="w1", phase="Succeeded"))
    api.add("pods", pod("elsewhere", namespace="lab", node_name="w2", ready=False))
    clock = FakeClock(start=0.0, manual=True)
    resync = Resync(
        api.client(), lambda n: True, grace_s=2.0, every_s=1.0, timeout_s=60, clock=clock
    )
    try:
        resync.powered_on("w1")
        (thread,) = resync._threads
        clock.track(thread)
        clock.settle()
        for _ in range(3):  # the node still reads Unknown: its agent has not started yet
            step(clock, 0.5)
            assert not annotated(api, "stuck")
        api.update("nodes", "", "w1", lambda n: set_ready(n, "True"))
        step(clock, 0.5)  # Ready seen at 2.0 s: the agent has grace_s to settle its pods
        step(clock, 1.0)
        assert resync.nudged == {} and not annotated(api, "stuck")
        step(clock, 1.0)  # grace_s over: the waiting pods are nudged
        assert annotated(api, "stuck") and annotated(api, "leaving")
        assert not annotated(api, "fine")
        assert not annotated(api, "done")
        assert not annotated(api, "elsewhere")
        assert resync.nudged == {"w1": 2}
        step(clock, 1.0)  # still waiting: nudged again
        assert resync.nudged == {"w1": 4}
        # Settled (Ready, finalised): the thread ends, nothing more is nudged.
        api.update("pods", "lab", "stuck", lambda p: set_ready(p, True))
        api.remove("pods", "lab", "leaving")
        step(clock, 1.0)
        assert not thread.is_alive()
        assert resync.nudged == {"w1": 4}
    finally:
        resync.stop()


def test_gives_up_when_the_node_goes_off_again(api: FakeApiServer) -> None:
    api.add("nodes", node("w1", ready="Unknown"))
    api.add("pods", pod("stuck", namespace="lab", node_name="w1", ready=False))
    power = {"w1": True}
    clock = FakeClock(start=0.0, manual=True)
    resync = Resync(
        api.client(), power.__getitem__, grace_s=0.1, every_s=0.1, timeout_s=10, clock=clock
    )
    try:
        resync.powered_on("w1")
        (thread,) = resync._threads
        clock.track(thread)
        clock.settle()
        step(clock, 0.5)
        power["w1"] = False
        api.update("nodes", "", "w1", lambda n: set_ready(n, "True"))
        step(clock, 0.5)
        assert not thread.is_alive()
        assert not annotated(api, "stuck")
    finally:
        resync.stop()


def test_gives_up_at_its_deadline_with_pods_still_waiting(api: FakeApiServer) -> None:
    api.add("nodes", node("w1", ready="True"))
    api.add("pods", pod("stuck", namespace="lab", node_name="w1", ready=False))
    clock = FakeClock(start=0.0, manual=True)
    resync = Resync(
        api.client(), lambda n: True, grace_s=0.0, every_s=1.0, timeout_s=4.0, clock=clock
    )
    try:
        resync.powered_on("w1")
        (thread,) = resync._threads
        clock.track(thread)
        clock.settle()
        step(clock, 0.5)  # Ready
        for _ in range(3):
            step(clock, 1.0)  # nudged at 1.5, 2.5 and 3.5 s
        assert resync.nudged == {"w1": 3} and thread.is_alive()
        step(clock, 1.0)  # 4.5 s: past timeout_s since the power-on
        assert not thread.is_alive()
        assert resync.nudged == {"w1": 3}
    finally:
        resync.stop()
