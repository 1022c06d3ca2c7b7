"""Fencing: what is safe only on a node that is shut down, done once its BMC says it is.

The out-of-service taint and force-deleting the pods of a node that is not Ready let
Kubernetes detach volumes and start the pods elsewhere: on a node that still runs them (a
partition, a hung kubelet) that would put a second writer next to the first. So the
session first reads power OFF through one of the node's BMCs (:meth:`Fencing.fence`), or
records the operator's explicit override in the journal and the timeline.
"""

from __future__ import annotations

from harness.errors import PowercutError
from harness.journal import UndoSpec
from harness.kube import actions
from harness.kube.actions import Fence, FencingRequired
from harness.kube.names import Event
from harness.power.base import PowerState
from harness.power.factory import available_protocols
from harness.session.core import SessionCore


class Fencing(SessionCore):
    """Fence a node through its BMCs, and the actions that need the fence."""

    def fence(self, node: str, *, override: str | None = None, what: str = "fence") -> Fence:
        """Confirm through the node's BMCs that it is powered OFF, before anything that is
        safe only on a node that is shut down (the out-of-service taint, force-deleting the
        pods of a node that is not Ready).

        Only a BMC (or a power plugin such as kind's) can confirm: SSH cannot tell a node
        that is off from one cut off from the network, which still runs its pods. When no
        BMC reads OFF, raises :class:`~harness.kube.actions.FencingRequired` naming what
        each BMC said, unless ``override`` gives the operator's reason: then the override
        is recorded in the journal (a note) and in the timeline, which the report shows.
        """
        spec = self.inventory.node(node)
        seen: list[str] = []
        for proto in available_protocols(spec):
            if proto == "ssh":
                continue
            try:
                state = self.driver(node, proto).state()
            except PowercutError as exc:
                seen.append(f"{proto} did not answer: {exc}")
                continue
            if state is PowerState.OFF:
                fence = Fence(node, off_by=proto)
                self.timeline.action(node, Event.FENCED, via=proto)
                return fence
            seen.append(f"{proto} reads power {state.value}")
        said = "; ".join(seen) or "it has no BMC (SSH cannot tell off from cut off)"
        if override is None or not override.strip():
            raise FencingRequired(node, what, f"no BMC confirmed power OFF ({said})")
        fence = Fence(node, override=override.strip())
        self.timeline.action(node, Event.FENCE_OVERRIDDEN, reason=fence.override, bmc=said)
        if self.journal is not None:
            self.journal.note("fence_override", f"node/{node}", f"{fence.override} (BMC: {said})")
        self.fence_overrides.append(f"{node}: {fence.override} (BMC: {said})")
        self._tell(f"WARNING: {node} is NOT fenced ({said}); overridden: {fence.override}")
        return fence

    def force_delete_pods(
        self,
        node: str,
        *,
        namespace: str | None = None,
        only_terminating: bool = False,
        fence_override: str | None = None,
    ) -> list[str]:
        """Force-delete the node's pods; on a node that is not Ready, only once its BMC
        confirmed power OFF (or with ``fence_override``, recorded and reported)."""
        if self.dry_run:
            self.plan.append(
                f"force-delete the pods of {node} (grace 0); if it is not Ready, only once "
                "its BMC confirms power OFF"
            )
            return []
        what = "force-delete the pods of"
        ready = actions.node_ready(self.client, node)
        fence = self.fence(node, override=fence_override, what=what) if ready is False else None
        return list(
            actions.force_delete_pods(
                self.client,
                node,
                namespace=namespace,
                only_terminating=only_terminating,
                fence=fence,
                timeline=self.timeline,
            )
        )

    def add_out_of_service_taint(self, node: str, *, fence_override: str | None = None) -> None:
        """The out-of-service taint, only once the node's BMC confirmed power OFF (or with
        ``fence_override``: the operator's reason, recorded in the journal and the report)."""
        if self.dry_run:
            self.plan.append(
                f"confirm {node} is powered OFF through its BMC, then taint it "
                f"{actions.OUT_OF_SERVICE_KEY}:NoExecute; undo: remove it"
            )
            return
        fence = self.fence(node, override=fence_override, what="set the out-of-service taint on")
        self._journaled(
            "out_of_service",
            f"node/{node}",
            UndoSpec.remove_taint(node, actions.OUT_OF_SERVICE_KEY, "NoExecute"),
            lambda: actions.add_out_of_service_taint(
                self.client, node, fence=fence, timeline=self.timeline
            ),
        )

    def remove_out_of_service_taint(self, node: str) -> None:
        if self.dry_run:
            self.plan.append(f"remove the out-of-service taint from {node}")
            return
        actions.remove_out_of_service_taint(self.client, node, timeline=self.timeline)
        self._undone("out_of_service", f"node/{node}")
