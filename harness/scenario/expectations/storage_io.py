"""The expectations of a storage-network cut: the node's pods with volumes lose their I/O
(their readiness fails while they keep running), and the node itself keeps its kubelet and
its API connection (it never goes NotReady while cut).

Both measure from the cut (``outage.acks``: each node's cut acknowledged), wait on the
timeline and record what they measured; the cut itself is
:mod:`harness.scenario.acts.disruptions`'s (the ``storage`` failure kind).
"""

from __future__ import annotations

from collections.abc import Callable

import allure

from harness.checks import CheckFailed
from harness.checks.base import Measurement
from harness.checks.replay import node_at
from harness.errors import WaitTimeout
from harness.kube.names import Change
from harness.kube.observer import NODE
from harness.kube.timeline import Timeline, Transition
from harness.scenario import lost_pods as L
from harness.scenario.errors import NothingToMeasure
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage


def io_lost(tl: Timeline, outage: Outage, seconds: float, ms: Measurements) -> None:
    """Every pod with a ReadWriteOnce volume on the cut nodes turns unready within
    ``seconds`` of its node's cut: its I/O hangs, so its readiness fails, while the pod is
    neither deleted nor evicted (the node still reports). Nothing to measure without such
    a pod."""
    pods = [p for p in outage.lost if p.pvs]
    if not pods:
        raise NothingToMeasure(
            "no pod with a ReadWriteOnce volume ran on the nodes cut off their storage "
            f"({', '.join(outage.nodes)}): no I/O to lose"
        )
    timed = L.wait_pod_transitions(
        tl,
        pods,
        {Change.NOT_READY},
        refs={p.uid: outage.acks[p.node] for p in pods},
        limit_s=seconds,
        what="the pods with volumes on the cut nodes unready (their I/O lost)",
        check="pods-io-lost",
    )
    for p, m in zip(pods, timed, strict=True):
        with allure.step(f"{p.ref} unready {m.duration_s:.1f}s after its storage was cut"):
            ms.check(f"{p.ref} I/O lost", m)


def _went_not_ready(node: str, since: float) -> Callable[[Transition], bool]:
    def pred(t: Transition) -> bool:
        return (
            t.kind == NODE
            and t.name == node
            and t.mono >= since
            and t.transition == Change.NOT_READY
        )

    return pred


def node_kept_ready(tl: Timeline, outage: Outage, seconds: float, ms: Measurements) -> None:
    """Each cut node keeps its kubelet and its API connection: no NotReady for ``seconds``
    from its cut (waited out: a cut that took the kubelet's traffic too would show within
    the node-not-ready budget), and Ready at the end. What only the storage path lost must
    not look like a node failure to Kubernetes."""
    problems = []
    for node in outage.nodes:
        cut = outage.acks[node].mono
        try:
            down = tl.wait_for(
                _went_not_ready(node, cut),
                cut + seconds,
                f"{node} to stay Ready for {seconds:g}s of its storage cut",
            )
        except WaitTimeout:
            down = None
        if down is not None:
            problems.append(f"{node} went NotReady {down.mono - cut:.1f}s after its cut")
            continue
        snap = node_at(tl, node, cut + seconds)
        if snap is None or snap.ready != "True":
            problems.append(f"{node} reads Ready={snap.ready if snap else 'unseen'}")
            continue
        ms.check(
            f"{node} Ready throughout its storage cut",
            Measurement("node-kept-ready", cut, seconds, seconds, {"node": node}),
        )
    if problems:
        raise CheckFailed(
            f"node-kept-ready: each node cut off its storage keeps its kubelet and API "
            f"connection (Ready for {seconds:g}s)",
            "; ".join(problems),
            seconds,
        )
