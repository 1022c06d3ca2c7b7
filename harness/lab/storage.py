"""The lab's fake CSI attacher and the kubelet's part of volume bookkeeping.

A real cluster needs two things from the node side for attach/detach timing to be real:
an attacher that marks VolumeAttachments attached, and ``node.status.volumesInUse``, which the
kubelet keeps while a volume is mounted. Here the attacher attaches at once, and volumesInUse
is kept for nodes that are powered on and frozen at power-off, so a dead node keeps its
volumes "in use": the attach/detach controller then waits (6 min upstream) before a forced
detach, and a replacement pod elsewhere gets a real ``Multi-Attach error`` event.

It also plays the kubelet's volume manager for readiness: kwok would report a pod Ready
whatever its volumes do, but a real kubelet keeps a pod in ContainerCreating until its
volumes are attached to its node. Pods that carry the annotation ``VOLUME_GATE: waiting``
(the lab's stateful workloads put it in their templates, so a new pod starts gated) are held
back from Ready by the lab's kwok stages until this controller sees every claim's volume
attached to the pod's live node and sets the annotation to ``attached``. So a replacement
blocked by a Multi-Attach error stays unready, and its Service stays down, as on a real
cluster.

A node cut off its storage network (``storage_reachable`` false: the SSH server's storage
cut, :mod:`harness.power.storage_cut`) keeps its kubelet, but its volumes' I/O hangs: the
controller sets the annotation of every pod with claims there to ``failed``, which the
lab's kwok stages turn into Ready=False (VolumeIOFailed) while the pod keeps running, as a
kubelet's readiness probe would see; it mounts nothing new there. Healed, the pods go back
to ``attached`` (or ``waiting``) and Ready again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from harness.errors import PowercutError
from harness.kube.client import JSON, KubeClient
from harness.lab.informer import Informer
from harness.lab.spec import CSI_DRIVER, VOLUME_GATE

log = logging.getLogger(__name__)


def claims_of(pod: JSON) -> JSON | None:
    """What the attacher reads of a pod: its node and the claims it mounts (pods without
    claims are not kept)."""
    spec = pod.get("spec") or {}
    vols = [
        {"persistentVolumeClaim": {"claimName": v["persistentVolumeClaim"].get("claimName")}}
        for v in spec.get("volumes") or []
        if v.get("persistentVolumeClaim")
    ]
    if not vols:
        return None
    md = pod.get("metadata") or {}
    meta: JSON = {"name": md.get("name"), "namespace": md.get("namespace")}
    gate = (md.get("annotations") or {}).get(VOLUME_GATE)
    if gate:
        meta["annotations"] = {VOLUME_GATE: gate}
    return {"metadata": meta, "spec": {"nodeName": spec.get("nodeName"), "volumes": vols}}


@dataclass(frozen=True)
class Volumes:
    """Which volumes are attached where, and which volume each claim is bound to."""

    attached: set[tuple[str, str]]  # (PV, node) with an attached VolumeAttachment
    claim_pv: dict[str, str | None]  # "namespace/claim" -> its PV

    def pvs_of(self, pod: JSON) -> list[str | None]:
        """The PV of each claim the pod mounts (None while a claim is unbound)."""
        ns = pod["metadata"]["namespace"]
        return [
            self.claim_pv.get(f"{ns}/{claim}")
            for v in (pod.get("spec") or {}).get("volumes") or []
            if (claim := (v.get("persistentVolumeClaim") or {}).get("claimName"))
        ]


#: The annotation's values: held back until attached; attached; I/O failing.
WAITING, ATTACHED, FAILED = "waiting", "attached", "failed"


class StorageController:
    def __init__(
        self,
        client: KubeClient,
        is_on: Callable[[str], bool],
        storage_reachable: Callable[[str], bool] = lambda _node: True,
    ) -> None:
        self.client = client
        self.is_on = is_on
        self.storage_reachable = storage_reachable
        self._wake = threading.Event()
        self.vas = Informer(client, "/apis/storage.k8s.io/v1/volumeattachments", self._on_va)
        self.pods = Informer(client, "/api/v1/pods", project=claims_of)
        self.pvcs = Informer(client, "/api/v1/persistentvolumeclaims")
        self.pvs = Informer(client, "/api/v1/persistentvolumes")
        self.nodes = Informer(client, "/api/v1/nodes")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="volumes-in-use", daemon=True)

    def start(self) -> None:
        for inf in (self.vas, self.pods, self.pvcs, self.pvs, self.nodes):
            inf.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for inf in (self.vas, self.pods, self.pvcs, self.pvs, self.nodes):
            inf.stop()

    def _on_va(self, kind: str, va: JSON) -> None:
        if kind == "DELETED":
            return
        spec = va.get("spec") or {}
        if spec.get("attacher") != CSI_DRIVER or (va.get("metadata") or {}).get(
            "deletionTimestamp"
        ):
            return
        if (va.get("status") or {}).get("attached"):
            return
        name = va["metadata"]["name"]
        try:
            self.client.patch(
                f"/apis/storage.k8s.io/v1/volumeattachments/{name}/status",
                {"status": {"attached": True}},
            )
        except PowercutError as exc:
            log.warning("attach %s: %s", name, exc)

    def volumes(self) -> Volumes:
        """One look at the attachments and claims, shared by a pass's decisions."""
        attached: set[tuple[str, str]] = set()
        for va in self.vas.snapshot():
            st, sp = va.get("status") or {}, va.get("spec") or {}
            pv = (sp.get("source") or {}).get("persistentVolumeName")
            if st.get("attached") and pv:
                attached.add((pv, sp.get("nodeName", "")))
        claim_pv = {
            f"{c['metadata']['namespace']}/{c['metadata']['name']}": (c.get("spec") or {}).get(
                "volumeName"
            )
            for c in self.pvcs.snapshot()
        }
        return Volumes(attached, claim_pv)

    def pods_to_release(self, vols: Volumes | None = None) -> list[tuple[str, str]]:
        """(namespace, name) of gated pods whose every claim is attached to their live node."""
        vols = vols or self.volumes()
        out = []
        for pod in self.pods.snapshot():
            md, spec = pod["metadata"], pod.get("spec") or {}
            node = spec.get("nodeName")
            if (md.get("annotations") or {}).get(VOLUME_GATE) != WAITING or not node:
                continue
            if not self.is_on(node) or not self.storage_reachable(node):
                continue  # a dead kubelet mounts nothing, nor one that cannot reach storage
            pvs = vols.pvs_of(pod)
            if pvs and all(pv and (pv, node) in vols.attached for pv in pvs):
                out.append((md["namespace"], md["name"]))
        return out

    def io_changes(self, vols: Volumes | None = None) -> list[tuple[str, str, str]]:
        """(namespace, name, new annotation) of the pods with claims whose I/O state
        changed: ``failed`` on a node cut off its storage; back to ``attached`` (every
        claim attached to its node) or ``waiting`` once the node reaches it again."""
        vols = vols or self.volumes()
        out = []
        for pod in self.pods.snapshot():
            md, spec = pod["metadata"], pod.get("spec") or {}
            node = spec.get("nodeName")
            if not node:
                continue
            gate = (md.get("annotations") or {}).get(VOLUME_GATE)
            if not self.storage_reachable(node):
                if gate != FAILED:
                    out.append((md["namespace"], md["name"], FAILED))
            elif gate == FAILED:
                pvs = vols.pvs_of(pod)
                ok = pvs and all(pv and (pv, node) in vols.attached for pv in pvs)
                out.append((md["namespace"], md["name"], ATTACHED if ok else WAITING))
        return out

    def nudge(self) -> None:
        """Look again now (a node's storage was cut or healed)."""
        self._wake.set()

    def desired_in_use(self, vols: Volumes | None = None) -> dict[str, list[str]]:
        """node -> the CSI volumes its pods mount that are attached to it."""
        vols = vols or self.volumes()
        pv_handle: dict[str, str] = {}
        for obj in self.pvs.snapshot():
            csi = (obj.get("spec") or {}).get("csi") or {}
            if csi.get("driver") == CSI_DRIVER:
                pv_handle[obj["metadata"]["name"]] = (
                    f"kubernetes.io/csi/{CSI_DRIVER}^{csi['volumeHandle']}"
                )
        out: dict[str, set[str]] = {}
        for pod in self.pods.snapshot():
            node = (pod.get("spec") or {}).get("nodeName")
            if not node:
                continue
            for pv in vols.pvs_of(pod):
                if pv and pv in pv_handle and (pv, node) in vols.attached:
                    out.setdefault(node, set()).add(pv_handle[pv])
        return {n: sorted(v) for n, v in out.items()}

    def _annotate(self, ns: str, name: str, value: str) -> None:
        try:
            self.client.patch(
                f"/api/v1/namespaces/{ns}/pods/{name}",
                {"metadata": {"annotations": {VOLUME_GATE: value}}},
            )
            log.info("volumes of %s/%s: %s", ns, name, value)
        except PowercutError as exc:
            log.warning("volumes of %s/%s to %s: %s", ns, name, value, exc)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.5)
            self._wake.clear()
            if self._stop.is_set():
                return
            if not all(
                i.synced.is_set() for i in (self.vas, self.pods, self.pvcs, self.pvs, self.nodes)
            ):
                continue
            vols = self.volumes()
            for ns, name in self.pods_to_release(vols):
                self._annotate(ns, name, ATTACHED)
            for ns, name, value in self.io_changes(vols):
                self._annotate(ns, name, value)
            want = self.desired_in_use(vols)
            for node in self.nodes.snapshot():
                name = node["metadata"]["name"]
                if not self.is_on(name):
                    continue  # a dead kubelet reports nothing: volumesInUse stays frozen
                have = sorted((node.get("status") or {}).get("volumesInUse") or [])
                new = want.get(name, [])
                if have != new:
                    try:
                        self.client.patch(
                            f"/api/v1/nodes/{name}/status", {"status": {"volumesInUse": new}}
                        )
                    except PowercutError as exc:
                        log.warning("volumesInUse of %s: %s", name, exc)
