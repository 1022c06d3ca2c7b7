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
