"""The session's Kubernetes disruptions: cordon, drain, delete a Node, re-run a Job, and
restart pods by label selector or evict one pod (which owe no undo: their controllers put
them back; an eviction is kept in the journal as a note).

Each is journaled with its undo before it acts (uncordon, re-create the Node or the Job
from the manifest kept in the journal) and recorded on the timeline by
:mod:`harness.kube.actions`. The ones safe only on a node that is powered off are in
:mod:`harness.session.fencing`.
"""

from __future__ import annotations

import time
from typing import Any

from harness.journal import UndoSpec
from harness.kube import actions
from harness.kube.client import JSON
from harness.kube.names import KUBERNETES_TAINT_PREFIX
from harness.session.core import SessionCore
from harness.session.executor import ClusterExecutor


def node_manifest(node: JSON) -> JSON:
    """A Node as it can be created again: no status, identity or server-set fields."""
    md = node.get("metadata") or {}
    keep = {k: md[k] for k in ("name", "labels", "annotations") if k in md}
    spec = dict(node.get("spec") or {})
    spec["taints"] = [
        t
        for t in spec.get("taints") or []
        if not str(t.get("key", "")).startswith(KUBERNETES_TAINT_PREFIX)
    ]
    spec.pop("unschedulable", None)
    return {"apiVersion": "v1", "kind": "Node", "metadata": keep, "spec": spec}


class KubernetesActions(SessionCore):
    """Operator actions on Nodes and Jobs, journaled with their undos."""

    def restart_pods(
        self, namespace: str, selector: str, *, grace_period_s: int | None = None
    ) -> list[str]:
        """Delete the pods ``selector`` matches in ``namespace`` so their controllers create
        them again (nothing to undo); recorded on the timeline. Their names."""
        if self.dry_run:
            self.plan.append(f"restart the pods {selector} in {namespace} (delete them)")
            return []
        return actions.restart_pods(
            self.client, namespace, selector, grace_period_s=grace_period_s, timeline=self.timeline
        )

    def evict(self, namespace: str, name: str, *, timeout_s: float, why: str) -> int:
        """Evict one pod through the Eviction API, as a descheduler does: its
        PodDisruptionBudget is respected (a 429 is retried until ``timeout_s``, then
        :class:`~harness.errors.WaitTimeout`). Kept in the journal as a note saying ``why``,
        owing nothing (its controller replaces the pod); recorded on the timeline. Returns
        the eviction requests sent."""
        if self.dry_run:
            self.plan.append(f"evict pod {namespace}/{name} ({why}); nothing to undo")
            return 0
        self.check_stop()
        attempts = actions.evict_pod(
            self.client,
            namespace,
            name,
            deadline=time.monotonic() + timeout_s,
            timeline=self.timeline,
        )
        if self.journal is not None:
            self.journal.note(
                "evict",
                f"pod/{namespace}/{name}",
                f"evicted through the Eviction API after {attempts} request(s): {why}; "
                "nothing to undo (its controller replaces it)",
            )
        return attempts

    def cordon(self, node: str) -> None:
        if self.dry_run:
            self.plan.append(f"cordon {node}; undo: uncordon")
            return
        self._journaled(
            "cordon",
            f"node/{node}",
            UndoSpec.uncordon(node),
            lambda: actions.cordon(self.client, node, timeline=self.timeline),
        )

    def uncordon(self, node: str) -> None:
        if self.dry_run:
            self.plan.append(f"uncordon {node}")
            return
        actions.uncordon(self.client, node, timeline=self.timeline)
        self._undone("cordon", f"node/{node}")
        self._undone("drain", f"node/{node}")

    def drain(self, node: str, *, timeout_s: float, **kw: Any) -> actions.DrainResult:
        if self.dry_run:
            self.plan.append(f"drain {node} (Eviction API, PDBs respected); undo: uncordon")
            return actions.DrainResult(node=node, evicted=())
        out: list[actions.DrainResult] = []
        self._journaled(
            "drain",
            f"node/{node}",
            UndoSpec.uncordon(node),
            lambda: out.append(
                actions.drain(
                    self.client,
                    node,
                    deadline=time.monotonic() + timeout_s,
                    timeline=self.timeline,
                    **kw,
                )
            ),
        )
        return out[0]

    def delete_node(self, node: str, *, clear_finalizers: bool = False) -> None:
        if self.dry_run:
            self.plan.append(f"delete Node {node}; undo: re-create it from its manifest")
            return
        manifest = node_manifest(self.client.get(f"/api/v1/nodes/{node}"))
        self._journaled(
            "delete_node",
            f"node/{node}",
            UndoSpec.restore_node(node, manifest),
            lambda: actions.delete_node(
                self.client, node, clear_finalizers=clear_finalizers, timeline=self.timeline
            ),
        )

    def rerun_job(self, namespace: str, name: str, *, timeout_s: float) -> JSON:
        """Re-run a Job: store its manifest (generated fields removed) in the journal as the
        undo, delete it (propagation Background: its pods go too), wait until it is gone and
        create it again from that manifest. Returns the new Job. Once it exists again
        nothing is owed; if the harness dies in between, ``recover`` creates it."""
        target = f"job/{namespace}/{name}"
        if self.dry_run:
            self.plan.append(
                f"re-run Job {namespace}/{name}: delete it (Background) and create it from its "
                "manifest; undo: create it from the manifest if it is missing"
            )
            return {}
        job = self.client.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
        manifest = actions.job_for_rerun(job)
        out: list[JSON] = []
        self._journaled(
            "rerun_job",
            target,
            UndoSpec.restore_job(namespace, name, manifest),
            lambda: out.append(
                actions.rerun_job(
                    self.client,
                    namespace,
                    name,
                    deadline=time.monotonic() + timeout_s,
                    timeline=self.timeline,
                )
            ),
        )
        self._undone("rerun_job", target, note="created again from its manifest")
        return out[0]

    def restore_node(self, node: str) -> None:
        """Re-create a deleted Node (a real kubelet re-registers by itself; kwok does not)."""
        entry = self._entries.get(("delete_node", f"node/{node}"))
        if entry is None or self.journal is None:
            return
        spec = self.journal.get(entry).undo
        ClusterExecutor(self.inventory, self.client).restore_node(node, dict(spec.args["manifest"]))
        self._undone("delete_node", f"node/{node}")
