"""What an operator does when a cycle's cluster does not settle by itself, on the nodes that
are Ready: force-delete the workloads' pods stuck Terminating (their kubelet should have
finalised them), restart those Running but never Ready again (their controller re-creates
them), and evict one pod of a workload whose Ready pods span fewer racks than at the start
of the cycle. Each action is recorded on the timeline and in the cycle's ``remediation``
(which makes the cycle ``missed``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from harness.kube import actions
from harness.kube.client import KubeClient, NotFound, TooManyRequests
from harness.kube.names import Event
from harness.kube.observer import Observer, PodState
from harness.kube.timeline import Timeline
from harness.longevity.engine import Say
from harness.longevity.measure import WorkloadTarget
from harness.longevity.observe import rack_of

__all__ = ["Remedy"]

#: What keeps the cluster from its steady state: (category, text).
Problems = Callable[[], list[tuple[str, str]]]


class Remedy:
    """The operator's help toward the steady state (see the module docstring)."""

    def __init__(self, client: KubeClient, racks: Mapping[str, str], say: Say) -> None:
        self.client = client
        self.racks = racks
        self.say = say

    def remediate(
        self,
        tl: Timeline,
        observer: Observer,
        workloads: list[WorkloadTarget],
        nodes: Sequence[str],
        remediation: dict[str, list[str]],
        problems: Problems,
        prefix: str = "",
    ) -> None:
        """Help ``workloads`` on ``nodes`` along (see the module docstring); each action
        is appended to ``remediation`` under ``prefix`` + its kind. ``problems``: what still
        keeps the cluster from its steady state, read once the stuck pods are dealt with
        (a workload it names as not ``spread`` gets one pod evicted)."""
        protected = {(w.namespace, w.workload) for w in workloads if w.protected}
        known = {(w.namespace, w.workload) for w in workloads}
        for node in nodes:
            n = observer.node(node)
            if n is None or not n.is_ready:
                continue
            stuck = [
                p
                for p in observer.pods(on_node=node)
                if p.terminating and (p.namespace, p.workload) in protected
            ]
            for ns in sorted({p.namespace for p in stuck}):
                deleted = actions.force_delete_pods(
                    self.client, node, namespace=ns, only_terminating=True, timeline=tl
                )
                remediation.setdefault(f"{prefix}force_deleted", []).extend(deleted)
                if deleted:
                    self.say(f"cleanup: force-deleted pods stuck Terminating on {node}: {deleted}")
            for p in observer.pods(on_node=node):
                if (p.namespace, p.workload) not in known or p.ready or p.terminating:
                    continue
                if p.phase != "Running":
                    continue
                try:
                    self.client.delete(
                        f"/api/v1/namespaces/{p.namespace}/pods/{p.name}",
                        body={"preconditions": {"uid": p.uid}},
                    )
                except NotFound:
                    continue
                tl.action(p.name, Event.RESTARTED, namespace=p.namespace, node=node)
                remediation.setdefault(f"{prefix}restarted", []).append(f"{p.namespace}/{p.name}")
                self.say(f"cleanup: restarted {p.namespace}/{p.name}, not Ready on {node}")
        found = problems()
        for w in workloads:
            if not any(c == "spread" and text.startswith(f"{w.key}:") for c, text in found):
                continue
            pod = self._most_crowded(observer, w)
            if pod is None:
                continue
            try:
                self.client.create(
                    f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction",
                    {
                        "apiVersion": "policy/v1",
                        "kind": "Eviction",
                        "metadata": {"name": pod.name, "namespace": pod.namespace},
                    },
                )
            except TooManyRequests:
                remediation.setdefault(f"{prefix}respread_refused", []).append(
                    f"{pod.namespace}/{pod.name}"
                )
                continue
            except NotFound:
                continue
            tl.action(pod.name, Event.RESPREAD_EVICTION, namespace=pod.namespace, node=pod.node)
            remediation.setdefault(f"{prefix}respread", []).append(f"{pod.namespace}/{pod.name}")
            self.say(f"cleanup: evicted {pod.namespace}/{pod.name} so {w.key} spreads again")

    def _most_crowded(self, observer: Observer, w: WorkloadTarget) -> PodState | None:
        avail = [
            p
            for p in observer.pods(namespace=w.namespace, workload=w.workload)
            if p.ready and not p.terminating
        ]
        by_rack: dict[str, list[PodState]] = {}
        for p in avail:
            by_rack.setdefault(rack_of(self.racks, observer, p.node), []).append(p)
        if not by_rack:
            return None
        crowded = max(by_rack.values(), key=len)
        return crowded[0] if len(crowded) > 1 else None
