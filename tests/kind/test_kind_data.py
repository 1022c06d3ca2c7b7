"""The data check on real volumes: tokens survive a power cycle of the node holding them,
and a volume that does not survive (an emptyDir) fails the check, named."""

from __future__ import annotations

import pytest

from harness.checks.base import CheckFailed
from harness.checks.data import verify_tokens, write_tokens
from harness.kindlab import images
from tests.kind.conftest import KindCluster, wait_for

pytestmark = [pytest.mark.kind, pytest.mark.disruptive, pytest.mark.serial, pytest.mark.slow]


def test_tokens_survive_a_power_cycle(cluster: KindCluster) -> None:
    c = cluster.client
    tokens = write_tokens(c, "shop", "app in (quorum, singleton)")
    assert {t.claim for t in tokens} == {
        "data-quorum-0",
        "data-quorum-1",
        "data-quorum-2",
        "singleton-data",
    }
    [single], _ = c.list("/api/v1/namespaces/shop/pods", labelSelector="app=singleton")
    node = single["spec"]["nodeName"]
    cluster.driver(node).off()
    wait_for(f"{node} not Ready", lambda: cluster.ready(node) != "True", 60)
    cluster.driver(node).on()
    m = verify_tokens(c, tokens, timeout_s=240)
    assert set(m.detail["held_by"]) == {t.label for t in tokens}


def test_a_lost_volume_fails_the_check_naming_it(cluster: KindCluster) -> None:
    c = cluster.client
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "scratch", "namespace": "shop"},
        "spec": {
            "replicas": 1,
            "serviceName": "scratch",
            "selector": {"matchLabels": {"app": "scratch"}},
            "template": {
                "metadata": {"labels": {"app": "scratch"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "probe",
                            "image": images.image_names()["probe"],
                            "imagePullPolicy": "Never",
                            "readinessProbe": {
                                "httpGet": {"path": "/readyz", "port": 8080},
                                "periodSeconds": 1,
                            },
                            "volumeMounts": [{"name": "data", "mountPath": "/data/data"}],
                        }
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                },
            },
        },
    }
    path = "/apis/apps/v1/namespaces/shop/statefulsets/scratch"
    c.apply(path, sts)
    try:
        wait_for(
            "scratch-0 ready",
            lambda: c.get(path)["status"].get("readyReplicas") == 1,
            120,
        )
        tokens = write_tokens(c, "shop", "app=scratch")
        c.delete("/api/v1/namespaces/shop/pods/scratch-0")
        with pytest.raises(CheckFailed) as err:
            verify_tokens(c, tokens, timeout_s=120)
        assert "volume data of pod shop/scratch-0: token lost" in str(err.value)
    finally:
        c.delete(path)
