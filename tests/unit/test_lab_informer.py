"""The lab's informer keeps projections (the attacher's view of pods), against a real-HTTP
fake API server."""

from __future__ import annotations

from harness.kube.client import JSON
from harness.lab.informer import Informer
from harness.lab.storage import claims_of
from tests.fakes.api import Changes, FakeApiServer, pod


def with_claim(p: JSON, claim: str) -> JSON:
    p["spec"]["volumes"] = [
        {"name": "cfg", "configMap": {"name": "x"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
    ]
    p["spec"]["containers"] = [{"name": "c", "image": "busybox", "env": [{"name": "A"}]}]
    return p


def test_claims_of_keeps_node_and_claims_only() -> None:
    p = with_claim(pod("db-0", namespace="lab", node_name="w1"), "data-db-0")
    assert claims_of(p) == {
        "metadata": {"name": "db-0", "namespace": "lab"},
        "spec": {
            "nodeName": "w1",
            "volumes": [{"persistentVolumeClaim": {"claimName": "data-db-0"}}],
        },
    }
    assert claims_of(pod("web", namespace="lab", node_name="w1")) is None


def test_informer_caches_projections_and_hands_whole_objects_on(api: FakeApiServer) -> None:
    api.add("pods", with_claim(pod("db-0", namespace="lab", node_name="w1"), "data-db-0"))
    api.add("pods", pod("web", namespace="lab", node_name="w2"))
    changes = Changes()
    seen = changes.seen
    inf = Informer(api.client(), "/api/v1/pods", changes, project=claims_of)
    inf.start()
    try:
        assert inf.synced.wait(5)
        assert set(inf.objects) == {"lab/db-0"}
        assert "containers" not in inf.objects["lab/db-0"]["spec"]
        assert {o["metadata"]["name"] for k, o in seen if k == "SYNC"} == {"db-0", "web"}
        assert all("status" in o for _, o in seen)  # whole objects, not projections
        api.wait_for_watches(1, "pods")
        # a pod that starts to mount a claim is kept; one that is deleted is dropped
        api.update("pods", "lab", "web", lambda p: with_claim(p, "cache"))
        changes.wait_for(lambda: "lab/web" in inf.objects, "lab/web cached")
        api.remove("pods", "lab", "db-0")
        changes.wait_for(lambda: set(inf.objects) == {"lab/web"}, "lab/db-0 dropped")
        assert inf.snapshot() == [claims_of(api.get("pods", "lab", "web") or {})]
    finally:
        inf.stop()
