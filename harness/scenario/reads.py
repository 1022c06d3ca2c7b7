"""The raw API reads a scenario makes beside the observer's timeline: the pods a label
selector matches now, whether a Node object exists. Each is one request to the API server
(no watch, no cache); the disruptions (:mod:`~harness.scenario.acts.disruptions`) and the
expectations (:mod:`~harness.scenario.expectations.phases`) call them where the timeline cannot
answer.
"""

from __future__ import annotations

from collections.abc import Collection

from harness.kube.client import JSON, KubeClient

__all__ = ["matching_pods", "new_ready_pods", "node_exists", "pod_ready"]


def matching_pods(client: KubeClient, namespace: str, selector: str) -> list[JSON]:
    """The pods of ``namespace`` that the label ``selector`` matches now (one LIST)."""
    items, _ = client.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)
    return items


def pod_ready(pod: JSON) -> bool:
    """The pod's Ready condition is True."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def new_ready_pods(
    client: KubeClient, namespace: str, selector: str, *, not_uids: Collection[str]
) -> list[str]:
    """The names (sorted) of the pods ``selector`` matches now that are Ready, not being
    deleted, and none of ``not_uids`` (one LIST)."""
    return sorted(
        str(p["metadata"]["name"])
        for p in matching_pods(client, namespace, selector)
        if str(p["metadata"]["uid"]) not in not_uids
        and not p["metadata"].get("deletionTimestamp")
        and pod_ready(p)
    )


def node_exists(client: KubeClient, node: str) -> bool:
    """The Node object ``node`` exists now (one GET)."""
    return client.get_or_none(f"/api/v1/nodes/{node}") is not None
