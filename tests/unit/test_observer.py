"""The observer against a real-HTTP fake API server: list+watch, resume, 410 re-list/diff."""

from __future__ import annotations

import itertools
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from harness.errors import WaitTimeout
from harness.kube.client import ApiError, Credentials, KubeClient
from harness.kube.observer import LIVE_MARGIN_S, OBSERVER, Observer, gaps, workload_of
from harness.kube.timeline import Predicate, Timeline, Transition, match
from tests.fakes.api import JSON, FakeApiServer, node, pod, set_ready, volume_attachment
from tests.fakes.clock import FakeClock

FAST = (0.02, 0.2)  # retry backoff for tests


@pytest.fixture
def observe(api: FakeApiServer) -> Iterator[Callable[..., Observer]]:
    started: list[Observer] = []

    def start(**kw: object) -> Observer:
        kw.setdefault("backoff_s", FAST)
        obs = Observer(api.client(), **kw)  # type: ignore[arg-type]
        obs.start()
        started.append(obs)
        return obs

    yield start
    for obs in started:
        obs.stop()


def wait(tl: Timeline, pred: Predicate, what: str = "transition", timeout: float = 5) -> Transition:
    return tl.wait_for(pred, tl.clock.monotonic() + timeout, what)


def rs_pod(name: str, node_name: str, *, ready: bool = True, ns: str = "default") -> JSON:
    return pod(
        name,
        namespace=ns,
        node_name=node_name,
        ready=ready,
        owner=("ReplicaSet", "web-5d8f"),
        labels={"pod-template-hash": "5d8f", "app": "web"},
    )


va = volume_attachment


def observer_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("powercut-observer")]


# -- initial sync, projections -------------------------------------------------------------


def test_workload_of_folds_replicasets_and_marks_mirror_pods() -> None:
    assert workload_of(rs_pod("web-5d8f-x", "w1")["metadata"]) == "Deployment/web"
    assert workload_of(pod("db-0", owner=("StatefulSet", "db"))["metadata"]) == "StatefulSet/db"
    rs = pod("r", owner=("ReplicaSet", "bare"))["metadata"]
    assert workload_of(rs) == "ReplicaSet/bare"
    mirror = pod("etcd-w1", annotations={"kubernetes.io/config.mirror": "x"})["metadata"]
    assert workload_of(mirror, "w1") == "Node/w1"
    assert workload_of(pod("bare")["metadata"]) == ""


def test_start_returns_after_the_initial_list_with_observed_state(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    api.add("nodes", node("w1", zone="rack-a"))
    api.add("nodes", node("w2", zone="rack-b", ready="False"))
    api.add("pods", rs_pod("web-5d8f-a", "w1"))
    api.add("pods", pod("db-0", node_name="w2", owner=("StatefulSet", "db")))
    api.add("pods", pod("ds-x", node_name="w1", owner=("DaemonSet", "agent")))
    obs = observe()
    tl = obs.timeline
    # everything is there as soon as start() returns
    assert {t.name for t in tl.all(OBSERVER, transition="synced")} == {
        "nodes",
        "pods",
        "events",
        "volumeattachments",
        "persistentvolumeclaims",
        "endpointslices",
    }
    w1 = tl.first("Node", "w1", "observed")
    assert w1 is not None and w1.detail["ready"] == "True" and w1.detail["zone"] == "rack-a"
    web = tl.first("Pod", "web-5d8f-a", "observed")
    assert web is not None
    assert web.detail["workload"] == "Deployment/web" and web.detail["node"] == "w1"
    assert web.detail["ready"] is True
    assert [n.name for n in obs.nodes()] == ["w1", "w2"]
    assert obs.node("w2") is not None and obs.node("w2").ready == "False"  # type: ignore[union-attr]
    assert [p.name for p in obs.pods(on_node="w1")] == ["ds-x", "web-5d8f-a"]
    assert obs.pods(on_node="w1")[0].is_daemonset
    assert [p.name for p in obs.pods(workload="StatefulSet/db")] == ["db-0"]
    # only state transitions for the initial list: no "created"
    assert tl.first(transition="created") is None


def test_an_observed_pods_detail_reads_as_the_dict_it_stands_for(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    """The initial list's pod details are read from the pods' slim states (no dict per pod),
    and behave as the dict of the same keys and values: equal, same keys in the same order,
    `get`, `in`, `dict()`, the JSON the report writes, and unknown keys missing."""
    api.add("pods", rs_pod("web-5d8f-a", "w1", ready=False))
    obs = observe(resources=("pods",))
    web = obs.timeline.first("Pod", "web-5d8f-a", "observed")
    assert web is not None
    state = obs.pod("default", "web-5d8f-a")
    assert state is not None
    expected = {
        "uid": state.uid,
        "node": "w1",
        "phase": state.phase,
        "ready": False,
        "terminating": False,
        "workload": "Deployment/web",
    }
    assert web.detail == expected and expected == web.detail
    assert list(web.detail) == list(expected) and len(web.detail) == 6
    assert dict(web.detail) == expected and repr(web.detail) == repr(expected)
    assert web.detail.get("node") == "w1" and web.detail.get("nope", "x") == "x"
    assert "workload" in web.detail and "nope" not in web.detail
    with pytest.raises(KeyError):
        web.detail["nope"]
    assert web.to_json()["detail"] == expected
    assert sys.getsizeof(web.detail) < sys.getsizeof(expected) / 4


def test_node_transitions(api: FakeApiServer, observe: Callable[..., Observer]) -> None:
    api.add("nodes", node("w1"))
    obs = observe(resources=["nodes"])
    tl = obs.timeline
    before = time.monotonic()
    api.update("nodes", "", "w1", lambda o: set_ready(o, "Unknown"))
    down = wait(tl, match("Node", "w1", "not-ready"))
    assert before < down.mono < time.monotonic()  # stamped when the event was read
    assert down.detail["status"] == "Unknown" and down.detail["previous"] == "True"
    assert "relist" not in down.detail

    taint = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    api.update("nodes", "", "w1", lambda o: o["spec"]["taints"].append(taint))
    added = wait(tl, match("Node", "w1", "taint-added"))
    assert added.detail["taint"] == "node.kubernetes.io/unreachable:NoExecute"
    assert obs.node("w1").has_taint("node.kubernetes.io/unreachable:NoExecute")  # type: ignore[union-attr]

    api.update("nodes", "", "w1", lambda o: o["spec"].update(unschedulable=True))
    wait(tl, match("Node", "w1", "cordoned"))
    api.update("nodes", "", "w1", lambda o: o["spec"].update(taints=[], unschedulable=False))
    wait(tl, match("Node", "w1", "taint-removed"))
    wait(tl, match("Node", "w1", "uncordoned"))
    api.update("nodes", "", "w1", lambda o: set_ready(o, "True"))
    wait(tl, match("Node", "w1", "ready", after=down))

    api.add("nodes", node("w3"))
    created = wait(tl, match("Node", "w3", "created"))
    ready = wait(tl, match("Node", "w3", "ready"))
    assert created.mono == ready.mono
    api.remove("nodes", "", "w3")
    wait(tl, match("Node", "w3", "deleted"))
    assert obs.node("w3") is None


def test_pod_lifecycle_transitions(api: FakeApiServer, observe: Callable[..., Observer]) -> None:
    obs = observe(resources=["pods"])
    tl = obs.timeline
    api.add("pods", pod("db-0", namespace="ns", owner=("StatefulSet", "db"), phase="Pending"))
    created = wait(tl, match("Pod", "db-0", "created"))
    assert created.namespace == "ns" and created.detail["node"] == ""
    api.update("pods", "ns", "db-0", lambda o: o["spec"].update(nodeName="w2"))
    sched = wait(tl, match("Pod", "db-0", "scheduled"))
    assert sched.detail["node"] == "w2" and sched.detail["workload"] == "StatefulSet/db"

    def run(o: JSON) -> None:
        o["status"]["phase"] = "Running"
        set_ready(o, True)

    api.update("pods", "ns", "db-0", run)
    ready = wait(tl, match("Pod", "db-0", "ready"))
    assert ready.detail["node"] == "w2"
    assert tl.first("Pod", "db-0", "phase", where=lambda t: t.detail["phase"] == "Running")
    uid = created.detail["uid"]

    def terminate(o: JSON) -> None:
        o["metadata"].update(
            deletionTimestamp="2024-01-01T00:00:00Z", deletionGracePeriodSeconds=30
        )

    api.update("pods", "ns", "db-0", terminate)
    term = wait(tl, match("Pod", "db-0", "terminating"))
    assert term.detail["grace_s"] == 30 and term.detail["uid"] == uid
    assert obs.pod("ns", "db-0").terminating  # type: ignore[union-attr]
    api.remove("pods", "ns", "db-0")
    gone = wait(tl, match("Pod", "db-0", "deleted"))
    assert gone.detail["uid"] == uid and gone.detail["node"] == "w2"
    # the StatefulSet re-creates the same name with a new uid
    api.add("pods", pod("db-0", namespace="ns", node_name="w3", owner=("StatefulSet", "db")))
    again = wait(tl, match("Pod", "db-0", "created", after=gone))
    assert again.detail["uid"] != uid and again.detail["node"] == "w3"
    api.update("pods", "ns", "db-0", lambda o: o["status"].update(phase="Failed"))
    failed = wait(tl, match("Pod", "db-0", "phase", after=again))
    assert failed.detail == {
        "uid": again.detail["uid"],
        "node": "w3",
        "workload": "StatefulSet/db",
        "phase": "Failed",
        "previous": "Running",
    }


def test_volume_attachment_transitions(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    obs = observe(resources=["volumeattachments"])
    tl = obs.timeline
    api.add("volumeattachments", va("csi-1", "w1", "pv-a"))
    created = wait(tl, match("VolumeAttachment", "csi-1", "created"))
    assert created.detail["node"] == "w1" and created.detail["pv"] == "pv-a"
    assert created.detail["attached"] is False
    api.update("volumeattachments", "", "csi-1", lambda o: o["status"].update(attached=True))
    wait(tl, match("VolumeAttachment", "csi-1", "attached"))
    assert obs.volume_attachments(pv="pv-a")[0].attached

    def fail(o: JSON) -> None:
        o["status"]["attachError"] = {"message": "rpc error: node unreachable"}

    api.update("volumeattachments", "", "csi-1", fail)
    err = wait(tl, match("VolumeAttachment", "csi-1", "attach-error"))
    assert err.detail["message"] == "rpc error: node unreachable"
    api.update("volumeattachments", "", "csi-1", lambda o: o["status"].update(attached=False))
    wait(tl, match("VolumeAttachment", "csi-1", "detached"))
    api.remove("volumeattachments", "", "csi-1")
    gone = wait(tl, match("VolumeAttachment", "csi-1", "deleted"))
    assert gone.detail["pv"] == "pv-a"
    assert obs.volume_attachments() == []


def _event(name: str, pod_name: str, reason: str, message: str, count: int = 1) -> JSON:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "namespace": "ns", "name": pod_name, "uid": "u-1"},
        "reason": reason,
        "message": message,
        "count": count,
        "type": "Warning",
    }


def test_multi_attach_events_become_pod_transitions(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    multi = 'Multi-Attach error for volume "pvc-123" Volume is already exclusively attached'
    api.add("events", _event("old", "web-0", "FailedAttachVolume", multi))  # history
    obs = observe(resources=["events"])
    tl = obs.timeline
    api.add("events", _event("e1", "web-1", "Pulled", "pulled image"))  # not interesting
    api.add("events", _event("e2", "web-1", "FailedAttachVolume", multi))
    hit = wait(tl, match("Pod", "web-1", "multi-attach"))
    assert hit.namespace == "ns"
    assert hit.detail["volume"] == "pvc-123" and hit.detail["count"] == 1
    api.update("events", "ns", "e2", lambda o: o.update(count=2))
    again = wait(tl, match("Pod", "web-1", "multi-attach", after=hit))
    assert again.detail["count"] == 2
    api.add("events", _event("e3", "web-1", "FailedScheduling", "0/3 nodes are available"))
    other = wait(tl, match("Pod", "web-1", "event"))
    assert other.detail["reason"] == "FailedScheduling"
    assert tl.first("Pod", "web-0") is None  # events from before the start are history
    assert tl.first(where=lambda t: "Pulled" in str(t.detail)) is None


def _slice(name: str, service: str, ready: list[bool | None]) -> JSON:
    endpoints = []
    for i, r in enumerate(ready):
        cond = {} if r is None else {"ready": r}
        endpoints.append({"addresses": [f"10.0.0.{i}"], "conditions": cond})
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
    }


def test_endpoint_counts_per_service(api: FakeApiServer, observe: Callable[..., Observer]) -> None:
    api.add("endpointslices", _slice("web-a", "web", [True, None]))
    obs = observe(resources=["endpointslices"])
    tl = obs.timeline
    seen = tl.first("Service", "web", "observed")
    assert seen is not None and seen.detail == {"ready": 2, "total": 2}
    api.add("endpointslices", _slice("web-b", "web", [False]))
    grew = wait(tl, match("Service", "web", "endpoints"))
    assert grew.detail == {"ready": 2, "total": 3, "previous_ready": 2, "previous_total": 2}
    api.update(
        "endpointslices",
        "ns",
        "web-a",
        lambda o: o["endpoints"][0].update(conditions={"ready": False}),
    )
    drop = wait(tl, match("Service", "web", "endpoints", after=grew))
    assert drop.detail["ready"] == 1
    assert obs.endpoints("ns", "web").ready == 1
    api.remove("endpointslices", "ns", "web-a")
    api.remove("endpointslices", "ns", "web-b")
    wait(tl, match("Service", "web", "endpoints", where=lambda t: t.detail["total"] == 0))
    assert obs.endpoints("ns", "web") == ("ns", "web", 0, 0)


def test_pvc_phase_changes(api: FakeApiServer, observe: Callable[..., Observer]) -> None:
    obs = observe(resources=["persistentvolumeclaims"])
    tl = obs.timeline
    api.add(
        "persistentvolumeclaims",
        {"metadata": {"name": "data", "namespace": "ns"}, "status": {"phase": "Pending"}},
    )
    wait(tl, match("PersistentVolumeClaim", "data", "created"))

    def bind(o: JSON) -> None:
        o["status"]["phase"] = "Bound"
        o["spec"] = {"volumeName": "pv-9"}

    api.update("persistentvolumeclaims", "ns", "data", bind)
    bound = wait(tl, match("PersistentVolumeClaim", "data", "phase"))
    assert bound.detail["phase"] == "Bound" and bound.detail["previous"] == "Pending"
    assert bound.detail["volume"] == "pv-9"
    assert obs.pvc("ns", "data").phase == "Bound"  # type: ignore[union-attr]


# -- never dropping a transition -----------------------------------------------------------


def _gap_changes(api: FakeApiServer) -> None:
    """What happens while the observer cannot watch."""
    api.update("nodes", "", "w1", lambda o: set_ready(o, "Unknown"))
    api.remove("pods", "default", "web-5d8f-a")
    api.add("pods", rs_pod("web-5d8f-b", "w2", ready=True))


def _assert_gap_seen(tl: Timeline) -> None:
    down = wait(tl, match("Node", "w1", "not-ready"))
    assert down.detail["relist"] is True and down.detail["uncertain_s"] >= 0
    gone = wait(tl, match("Pod", "web-5d8f-a", "deleted"))
    assert gone.detail["relist"] is True
    wait(tl, match("Pod", "web-5d8f-b", "created"))
    ready = wait(tl, match("Pod", "web-5d8f-b", "ready"))
    assert ready.detail["node"] == "w2" and ready.detail["relist"] is True
    relisted = wait(tl, match(OBSERVER, "pods", "relisted"))
    assert "410" in relisted.detail["reason"]
    assert relisted.detail["changes"] == 5  # deleted; created, scheduled, phase, ready


def _setup_gap(api: FakeApiServer) -> None:
    api.add("nodes", node("w1"))
    api.add("nodes", node("w2"))
    api.add("pods", rs_pod("web-5d8f-a", "w1"))


@pytest.mark.parametrize("gone_mode", ["http", "event"])
def test_changes_while_the_watch_was_gone_are_recovered_by_relist(
    api: FakeApiServer, observe: Callable[..., Observer], gone_mode: str
) -> None:
    _setup_gap(api)
    api.gone_mode = gone_mode  # type: ignore[assignment]
    obs = observe(resources=["nodes", "pods"])
    tl = obs.timeline
    api.wait_for_watches(2)
    api.watch_failure = 503  # the API server is down for watches...
    api.break_watches()
    wait(tl, match(OBSERVER, "pods", "watch-broken"))
    _gap_changes(api)  # ...while things happen...
    api.compact()  # ...and the history to resume from is gone
    api.watch_failure = None
    _assert_gap_seen(tl)
    assert [p.name for p in obs.pods()] == ["web-5d8f-b"]
    assert obs.node("w1").ready == "Unknown"  # type: ignore[union-attr]


def test_in_stream_410_relists_and_diffs(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    _setup_gap(api)
    obs = observe(resources=["nodes", "pods"])
    tl = obs.timeline
    api.wait_for_watches(2)
    # The open streams end with an ERROR 410 event and never carry these changes.
    api.expire_watches(during=lambda: _gap_changes(api))
    _assert_gap_seen(tl)


def test_broken_stream_resumes_from_the_last_resource_version(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    api.add("nodes", node("w1"))
    obs = observe(resources=["nodes"])
    tl = obs.timeline
    api.wait_for_watches(1)
    api.watch_failure = 503
    api.break_watches()
    wait(tl, match(OBSERVER, "nodes", "watch-broken"))
    # a blip a re-list could not see: NotReady and back while disconnected
    api.update("nodes", "", "w1", lambda o: set_ready(o, "False"))
    api.update("nodes", "", "w1", lambda o: set_ready(o, "True"))
    api.watch_failure = None
    down = wait(tl, match("Node", "w1", "not-ready"))
    up = wait(tl, match("Node", "w1", "ready", after=down.mono - 1e-9))
    assert "relist" not in down.detail and "relist" not in up.detail
    assert tl.first(OBSERVER, transition="relisted") is None


def test_a_relist_announces_the_gap_in_which_a_blip_left_no_trace(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    # Every API server restarted: the history to resume from is gone, and a change that
    # was undone meanwhile is in no list. The observer cannot see it; it must say so.
    # The observer runs on a manual fake clock: its stamps, its backoff and the gap's
    # bounds are the test's own figures, exact.
    clock = FakeClock(manual=True)
    api.add("nodes", node("w1"))
    obs = observe(resources=["nodes"], timeline=Timeline(clock))
    tl = obs.timeline
    api.wait_for_watches(1)
    clock.advance(LIVE_MARGIN_S + 0.5)  # the watch is live and idle: none of this is a gap
    api.watch_failure = 503
    broke = clock.monotonic()
    api.break_watches()
    wait(tl, match(OBSERVER, "nodes", "watch-broken"))
    clock.block_until_waiting(1)  # backing off for FAST[0] before it tries again
    clock.advance(FAST[0] / 2)
    blip = clock.monotonic()
    api.update("nodes", "", "w1", lambda o: set_ready(o, "False"))
    api.update("nodes", "", "w1", lambda o: set_ready(o, "True"))
    api.compact()
    api.watch_failure = None
    clock.advance(FAST[0] / 2)  # the retry: 410 Gone on every try, then a re-list
    relisted = wait(tl, match(OBSERVER, "nodes", "relisted"))
    assert relisted.mono == broke + FAST[0]
    assert tl.first("Node", "w1", "not-ready") is None  # the blip left no trace...
    [gap] = gaps(tl)  # ...but a gap is announced around it
    assert gap.resource == "nodes" and gap.until_mono == relisted.mono
    # from the break less the margin a live stream may lag by, to the re-list
    assert gap.since_mono == broke - LIVE_MARGIN_S < blip < gap.until_mono
    assert "410" in gap.reason
    assert gaps(tl, resources=["pods"]) == []
    assert gaps(tl, between=(tl.start_mono, gap.since_mono - 0.001)) == []
    assert gaps(tl, between=(blip, blip)) == [gap]


def test_bookmarks_are_not_transitions_but_advance_the_resource_version(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    api.bookmark_interval_s = 0.05
    api.add("nodes", node("w1"))
    obs = observe(resources=["nodes"])
    for i in range(3):
        api.add("pods", pod(f"p{i}"))  # moves the global resourceVersion, not nodes
    target = str(api.rv)
    # a bookmark that moves the resource version wakes the timeline's state waits
    obs.timeline.wait_until(
        lambda: obs.resource_versions()["nodes"] == target or None,
        obs.timeline.clock.monotonic() + 30,
        f"the nodes watch at resourceVersion {target}",
        last_seen=lambda: str(obs.resource_versions()),
    )
    assert all(t.transition != "BOOKMARK" for t in obs.timeline)
    assert [t.transition for t in obs.timeline.all("Node")] == ["observed"]


def test_initial_list_is_paginated(api: FakeApiServer, observe: Callable[..., Observer]) -> None:
    for i in range(7):
        api.add("pods", pod(f"p{i}", node_name="w1"))
    obs = observe(resources=["pods"], page_size=3)
    assert len(obs.pods()) == 7
    lists = [r for r in api.requests if r.path == "/api/v1/pods" and "watch" not in r.query]
    assert [r.query.get("limit") for r in lists] == ["3", "3", "3"]
    assert [bool(r.query.get("continue")) for r in lists] == [False, True, True]


def test_namespaces_get_their_own_watchers(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    for ns in ("a", "b", "c"):
        api.add("pods", pod("p", namespace=ns))
    obs = observe(namespaces=["a", "b"], resources=["pods", "nodes"])
    assert sorted(p.namespace for p in obs.pods()) == ["a", "b"]
    api.wait_for_watches(2, "pods")
    assert sorted(observer_threads()) == [
        "powercut-observer-nodes",
        "powercut-observer-pods@a",
        "powercut-observer-pods@b",
    ]
    api.add("pods", pod("q", namespace="c"))
    api.add("pods", pod("q", namespace="b"))
    hit = wait(obs.timeline, match("Pod", "q", "created"))
    assert hit.namespace == "b"
    assert obs.timeline.first("Pod", "q", namespace="c") is None


def test_every_watch_has_its_own_connection_and_stop_is_prompt(
    api: FakeApiServer,
) -> None:
    obs = Observer(api.client(), backoff_s=FAST).start()
    try:
        api.wait_for_watches(6)  # six concurrent streams: six connections
        assert len(observer_threads()) == 6
    finally:
        obs.stop()
    # Prompt: each stream was cancelled, not left to run out its watch timeout (300 s; the
    # fake API server holds a watch open until then), or a thread would still be alive.
    assert obs.watch_timeout_s == 300
    assert observer_threads() == []
    assert obs.failure() == "observer stopped"


def test_start_times_out_when_the_api_server_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once we leave: connection refused
    client = KubeClient(Credentials(server=f"http://127.0.0.1:{port}"), timeout_s=1)
    obs = Observer(client, resources=["nodes"], backoff_s=FAST, sync_timeout_s=0.3)
    with pytest.raises(WaitTimeout) as err:
        obs.start()
    assert "initial list of nodes" in err.value.expected
    assert "Unreachable" in err.value.last_seen
    assert observer_threads() == []


def test_start_fails_at_once_on_a_permanent_error(api: FakeApiServer) -> None:
    api.list_failure = 403
    obs = Observer(api.client(), resources=["nodes"], backoff_s=FAST, sync_timeout_s=600)
    with pytest.raises(ApiError) as err:  # at once: waiting out the 600 s is a WaitTimeout
        obs.start()
    assert err.value.status == 403
    lists = [r for r in api.requests if r.path == "/api/v1/nodes" and "watch" not in r.query]
    assert len(lists) == 1  # asked once: not retried
    assert observer_threads() == []


def test_unknown_resource_is_refused(api: FakeApiServer) -> None:
    with pytest.raises(ValueError, match="valid: nodes, pods"):
        Observer(api.client(), resources=["deployments"])


def test_relist_sees_a_pod_replaced_under_the_same_name(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    api.add("pods", pod("db-0", node_name="w1", ready=True, owner=("StatefulSet", "db")))
    obs = observe(resources=["pods"])
    old_uid = obs.pod("default", "db-0").uid  # type: ignore[union-attr]

    def replace() -> None:  # force-deleted on the dead node, re-created on another one
        api.remove("pods", "default", "db-0")
        api.add("pods", pod("db-0", node_name="w2", ready=True, owner=("StatefulSet", "db")))

    api.wait_for_watches(1)
    api.expire_watches(during=replace)
    ready = wait(obs.timeline, match("Pod", "db-0", "ready"))
    assert ready.detail["node"] == "w2" and ready.detail["uid"] != old_uid
    gone = obs.timeline.first("Pod", "db-0", "deleted")
    assert gone is not None and gone.detail["uid"] == old_uid and gone.detail["relist"]
    assert obs.pod("default", "db-0").node == "w2"  # type: ignore[union-attr]


# -- a 410 from one API server: the others may still hold the history ---------------------


def _cordon(value: bool) -> Callable[[JSON], None]:
    def change(obj: JSON) -> None:
        obj.setdefault("spec", {})["unschedulable"] = value

    return change


def _cut_watches(api: FakeApiServer, tl: Timeline) -> None:
    """Break the open watches and refuse new ones until the caller says."""
    api.watch_failure = 503
    api.break_watches()
    wait(tl, match(OBSERVER, "nodes", "watch-broken"))


def test_a_410_is_retried_on_the_next_api_server_which_still_holds_the_history(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    api.add("nodes", node("w1"))
    api.cache_starts = [0, 0, 0]  # three API servers behind a round-robin balancer
    obs = observe(resources=["nodes"])
    tl = obs.timeline
    api.wait_for_watches(1)
    _cut_watches(api, tl)
    api.update("nodes", "", "w1", _cordon(True))  # a blip no re-list could see
    api.update("nodes", "", "w1", _cordon(False))
    # the first two API servers restarted after it; the third one did not
    api.cache_starts = [api.rv, api.rv, 0]
    api.next_server = itertools.count(0)  # the next connection goes to the first one
    api.watch_failure = None
    on = wait(tl, match("Node", "w1", "cordoned"))
    off = wait(tl, match("Node", "w1", "uncordoned", after=on.mono - 1e-9))
    assert "relist" not in on.detail and "relist" not in off.detail
    refused = tl.all(kind=OBSERVER, transition="watch-gone")
    assert [t.detail["attempt"] for t in refused] == [1, 2]
    assert [t.detail["cache_start"] for t in refused] == [api.rv, api.rv]
    assert tl.first(OBSERVER, transition="relisted", after=tl.start_mono) is None
    assert gaps(tl) == []


def test_when_every_api_server_refuses_it_lists_where_their_caches_start(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    # Every API server restarted: the blip before their caches started is lost (and
    # announced); what came after is replayed one change at a time, not folded into a list.
    api.add("nodes", node("w1"))
    api.add("nodes", node("w2"))
    api.cache_starts = [0, 0, 0]
    obs = observe(resources=["nodes"], page_size=1)  # the exact list spans two pages
    tl = obs.timeline
    api.wait_for_watches(1)
    resumed_from = int(obs.resource_versions()["nodes"])
    _cut_watches(api, tl)
    api.update("nodes", "", "w1", _cordon(True))
    api.update("nodes", "", "w1", _cordon(False))
    starts = [api.rv - 1, api.rv, api.rv]  # the caches started, one a change earlier
    api.cache_starts = starts
    api.update("nodes", "", "w2", _cordon(True))  # after every cache started
    api.update("nodes", "", "w2", _cordon(False))
    api.watch_failure = None
    relisted = wait(tl, match(OBSERVER, "nodes", "relisted"))
    assert relisted.detail["exact"] is True
    assert relisted.detail["resource_version"] == str(max(starts))
    assert relisted.detail["since_resource_version"] == str(resumed_from)
    assert relisted.detail["changes"] == 0  # w1 at the newest start: as it was
    assert len(tl.all(kind=OBSERVER, transition="watch-gone")) == 1 + obs.gone_retries
    on = wait(tl, match("Node", "w2", "cordoned"))
    off = wait(tl, match("Node", "w2", "uncordoned", after=on.mono - 1e-9))
    assert "relist" not in on.detail and "relist" not in off.detail
    assert tl.first("Node", "w1", "cordoned") is None  # before every cache: lost...
    [gap] = gaps(tl)  # ...and announced
    assert gap.until_mono == relisted.mono


def test_a_compacted_cache_start_falls_back_to_listing_now(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    api.add("nodes", node("w1"))
    api.cache_starts = [0, 0]
    obs = observe(resources=["nodes"], gone_retries=1)
    tl = obs.timeline
    api.wait_for_watches(1)
    _cut_watches(api, tl)
    api.cache_starts = [api.rv, api.rv]
    api.update("nodes", "", "w1", _cordon(True))
    api.compact()  # etcd no longer has the revision the caches started at
    api.watch_failure = None
    relisted = wait(tl, match(OBSERVER, "nodes", "relisted"))
    assert relisted.detail["exact"] is False
    assert relisted.detail["resource_version"] == str(api.rv)
    on = wait(tl, match("Node", "w1", "cordoned"))
    assert on.detail["relist"] is True
    assert len(tl.all(kind=OBSERVER, transition="watch-gone")) == 2


def test_without_retries_a_410_relists_at_once(
    api: FakeApiServer, observe: Callable[..., Observer]
) -> None:
    api.add("nodes", node("w1"))
    obs = observe(resources=["nodes"], gone_retries=0)
    tl = obs.timeline
    api.wait_for_watches(1)
    api.expire_watches(during=lambda: api.update("nodes", "", "w1", _cordon(True)))
    wait(tl, match(OBSERVER, "nodes", "relisted"))
    assert len(tl.all(kind=OBSERVER, transition="watch-gone")) == 1


def test_gone_retries_must_not_be_negative(api: FakeApiServer) -> None:
    with pytest.raises(ValueError, match="gone_retries must be 0 or more"):
        Observer(api.client(), gone_retries=-1)
