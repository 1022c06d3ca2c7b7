"""The lab's kubelet-style resync after power-on, against a real-HTTP fake API server.

The race it papers over (a restarted kwok skipping its node's pods) cannot be provoked on
demand in a real lab; these tests pin down what the resync touches, when, and when it stops.
"""

from __future__ import annotations

import time

from harness.lab.resync import ANNOTATION, Resync, waiting_for_node
from tests.fakes.api import JSON, FakeApiServer, eventually, node, pod, set_ready


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


def test_nudges_only_the_waiting_pods_of_the_node_once_it_reads_ready(
    api: FakeApiServer,
) -> None:
    api.add("nodes", node("w1", ready="Unknown"))
    api.add("pods", pod("stuck", namespace="lab", node_name="w1", ready=False))
    api.add("pods", terminating(pod("leaving", namespace="lab", node_name="w1", ready=False)))
    api.add("pods", pod("fine", namespace="lab", node_name="w1", ready=True))
    api.add("pods", pod("done", namespace="lab", node_name="w1", phase="Succeeded"))
    api.add("pods", pod("elsewhere", namespace="lab", node_name="w2", ready=False))
    resync = Resync(api.client(), lambda n: True, grace_s=0.1, every_s=0.1, timeout_s=10)
    try:
        resync.powered_on("w1")
        time.sleep(0.8)  # the node still reads Unknown: its agent has not started yet
        assert not annotated(api, "stuck")
        api.update("nodes", "", "w1", lambda n: set_ready(n, "True"))
        assert eventually(lambda: annotated(api, "stuck") and annotated(api, "leaving"))
        assert not annotated(api, "fine")
        assert not annotated(api, "done")
        assert not annotated(api, "elsewhere")
        # Still waiting: nudged again. Settled (Ready, finalised): the thread ends.
        assert eventually(lambda: resync.nudged["w1"] >= 4)
        api.update("pods", "lab", "stuck", lambda p: set_ready(p, True))
        api.remove("pods", "lab", "leaving")
        assert eventually(lambda: not any(t.is_alive() for t in resync._threads))
        settled = resync.nudged["w1"]
        time.sleep(0.3)
        assert resync.nudged["w1"] == settled
    finally:
        resync.stop()


def test_gives_up_when_the_node_goes_off_again(api: FakeApiServer) -> None:
    api.add("nodes", node("w1", ready="Unknown"))
    api.add("pods", pod("stuck", namespace="lab", node_name="w1", ready=False))
    power = {"w1": True}
    resync = Resync(api.client(), power.__getitem__, grace_s=0.1, every_s=0.1, timeout_s=10)
    try:
        resync.powered_on("w1")
        time.sleep(0.3)
        power["w1"] = False
        api.update("nodes", "", "w1", lambda n: set_ready(n, "True"))
        assert eventually(lambda: not any(t.is_alive() for t in resync._threads))
        assert not annotated(api, "stuck")
    finally:
        resync.stop()
