"""The lab's attacher holds a gated pod back from Ready until its volume is attached to its
live node, as a kubelet keeps a pod in ContainerCreating (against a real-HTTP fake API)."""

from __future__ import annotations

from harness.lab.resync import waiting_for_node
from harness.lab.spec import CSI_DRIVER, VOLUME_GATE
from harness.lab.storage import StorageController, claims_of
from tests.fakes.api import JSON, Changes, FakeApiServer, node, pod
from tests.fakes.clock import STUCK_S


def gated(name: str, node_name: str, claim: str = "data") -> JSON:
    p = pod(
        name,
        namespace="lab",
        node_name=node_name,
        phase="Pending",
        annotations={VOLUME_GATE: "waiting"},
    )
    p["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
    return p


def va(name: str, pv: str, node_name: str, attached: bool) -> JSON:
    return {
        "metadata": {"name": name},
        "spec": {
            "attacher": CSI_DRIVER,
            "nodeName": node_name,
            "source": {"persistentVolumeName": pv},
        },
        "status": {"attached": attached},
    }


def test_claims_of_keeps_the_gate_and_drops_pods_without_claims() -> None:
    kept = claims_of(gated("r", "w1"))
    assert kept is not None
    assert kept["metadata"]["annotations"] == {VOLUME_GATE: "waiting"}
    assert claims_of(pod("plain", node_name="w1")) is None


def test_a_gated_pod_waits_for_its_volume_not_for_its_node() -> None:
    assert not waiting_for_node(gated("r", "w1"))
    assert waiting_for_node(pod("r", node_name="w1", phase="Pending"))


def test_released_only_when_attached_to_its_own_live_node(api: FakeApiServer) -> None:
    on = {"w1": True, "w2": True}
    for n in on:
        api.add("nodes", node(n))
    api.add(
        "persistentvolumes",
        {"metadata": {"name": "pv1"}, "spec": {"csi": {"driver": CSI_DRIVER, "volumeHandle": "h"}}},
    )
    api.add(
        "persistentvolumeclaims",
        {"metadata": {"name": "data", "namespace": "lab"}, "spec": {"volumeName": "pv1"}},
    )
    # The volume is still attached to the dead node w1 (a Multi-Attach situation).
    on["w1"] = False
    api.add("volumeattachments", va("va-w1", "pv1", "w1", attached=True))
    api.add("pods", gated("replacement", "w2"))
    sc = StorageController(api.client(), lambda n: on[n])
    changes = Changes()
    changes.attach(sc.vas)
    for inf in (sc.vas, sc.pods, sc.pvcs, sc.pvs, sc.nodes):
        inf.start()
    try:
        for inf in (sc.vas, sc.pods, sc.pvcs, sc.pvs, sc.nodes):
            assert inf.synced.wait(STUCK_S), inf.path
        assert len(sc.pods.snapshot()) == 1 and len(sc.vas.snapshot()) == 1
        assert sc.pods_to_release() == [], "attached elsewhere: the pod must stay unready"

        # Attached to its node, but that node is off: a dead kubelet mounts nothing.
        api.remove("volumeattachments", "", "va-w1")
        api.add("volumeattachments", va("va-w2", "pv1", "w2", attached=True))
        on["w2"] = False
        changes.wait_for(
            lambda: [v["metadata"]["name"] for v in sc.vas.snapshot()] == ["va-w2"],
            "va-w2 the only attachment",
        )
        assert sc.pods_to_release() == []

        on["w2"] = True
        assert sc.pods_to_release() == [("lab", "replacement")]
    finally:
        for inf in (sc.vas, sc.pods, sc.pvcs, sc.pvs, sc.nodes):
            inf.stop()


def test_a_node_cut_off_its_storage_fails_its_pods_io_and_heals(api: FakeApiServer) -> None:
    """A storage cut keeps the node on: its pods with claims are marked ``failed`` (the
    lab's kwok stage turns that into Ready=False), a gated pod there is not released, pods
    elsewhere are untouched; healed, they go back to ``attached``."""
    reachable = {"w1": True, "w2": True}
    for n in reachable:
        api.add("nodes", node(n))
    api.add(
        "persistentvolumeclaims",
        {"metadata": {"name": "data", "namespace": "lab"}, "spec": {"volumeName": "pv1"}},
    )
    api.add(
        "persistentvolumeclaims",
        {"metadata": {"name": "other", "namespace": "lab"}, "spec": {"volumeName": "pv2"}},
    )
    api.add("volumeattachments", va("va1", "pv1", "w1", attached=True))
    api.add("volumeattachments", va("va2", "pv2", "w2", attached=True))
    running = gated("app-0", "w1")
    running["metadata"]["annotations"][VOLUME_GATE] = "attached"
    api.add("pods", running)
    api.add("pods", gated("new-0", "w1", claim="data"))
    elsewhere = gated("app-1", "w2", claim="other")
    elsewhere["metadata"]["annotations"][VOLUME_GATE] = "attached"
    api.add("pods", elsewhere)
    api.add("pods", pod("plain", namespace="lab", node_name="w1"))  # no claim: untouched
    sc = StorageController(api.client(), lambda n: True, lambda n: reachable[n])
    for inf in (sc.vas, sc.pods, sc.pvcs, sc.pvs, sc.nodes):
        inf.start()
    try:
        for inf in (sc.vas, sc.pods, sc.pvcs, sc.pvs, sc.nodes):
            assert inf.synced.wait(STUCK_S), inf.path
        assert sc.io_changes() == []
        assert sc.pods_to_release() == [("lab", "new-0")]

        reachable["w1"] = False
        assert sorted(sc.io_changes()) == [("lab", "app-0", "failed"), ("lab", "new-0", "failed")]
        assert sc.pods_to_release() == [], "a node cut off its storage mounts nothing"

        changes = Changes()
        changes.attach(sc.pods)
        for name in ("app-0", "new-0"):
            api.update(
                "pods",
                "lab",
                name,
                lambda o: o["metadata"]["annotations"].update({VOLUME_GATE: "failed"}),
            )
        changes.wait_for(
            lambda: (
                sum(
                    (p["metadata"].get("annotations") or {}).get(VOLUME_GATE) == "failed"
                    for p in sc.pods.snapshot()
                )
                == 2
            ),
            "both pods of w1 marked failed",
        )
        assert sc.io_changes() == [], "marked once"

        reachable["w1"] = True
        assert sorted(sc.io_changes()) == [
            ("lab", "app-0", "attached"),
            ("lab", "new-0", "attached"),
        ]
    finally:
        for inf in (sc.vas, sc.pods, sc.pvcs, sc.pvs, sc.nodes):
            inf.stop()
