"""Steady state counts a workload's live pods: ended pods (a graceful node shutdown leaves
them as Failed objects) are neither missing nor extra."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from harness.kube.observer import PodState
from harness.scenario.expectations.steady_state import problems
from harness.scenario.targets.workloads import Workload

WEB = Workload(
    namespace="shop",
    kind="Deployment",
    name="web",
    desired=2,
    template_labels={"app": "web"},
    rwo=False,
    critical=True,
    min_available=1,
    health=None,
)


def _pod(name: str, phase: str, ready: bool) -> PodState:
    return PodState("shop", name, f"uid-{name}", "w1", phase, ready, False, WEB.key, 30)


class _Observer:
    def __init__(self, pods: list[PodState]) -> None:
        self._pods = pods

    def pods(self, namespace: str, workload: str) -> list[PodState]:
        return [p for p in self._pods if p.namespace == namespace and p.workload == workload]

    def volume_attachments(self) -> list[Any]:
        return []


def _problems(pods: list[PodState]) -> list[str]:
    inventory: Any = SimpleNamespace(nodes=[])
    observer: Any = _Observer(pods)
    return problems(inventory, observer, [WEB])


def test_failed_pods_left_by_a_graceful_shutdown_do_not_count() -> None:
    running = [_pod("web-a", "Running", True), _pod("web-b", "Running", True)]
    assert _problems([*running, _pod("web-old", "Failed", False)]) == []
    assert _problems([*running, _pod("web-done", "Succeeded", False)]) == []


def test_a_missing_or_extra_live_pod_still_counts() -> None:
    one = [_pod("web-a", "Running", True), _pod("web-old", "Failed", False)]
    assert _problems(one) == ["Deployment shop/web: 1 Ready of 2 wanted, 1 pod(s) in all"]
    three = [_pod(f"web-{i}", "Running", i < 2) for i in range(3)]
    assert _problems(three) == ["Deployment shop/web: 2 Ready of 2 wanted, 3 pod(s) in all"]
