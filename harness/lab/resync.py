"""What a kubelet does when its node boots: look at every pod bound to the node again.

A starting kwok process (one per node, ``--manage-single-node``) has a new lease identity,
so it first takes the node's lease over from its predecessor; until its *cached* copy of the
lease shows it as the holder, its pod controller skips the node's pods as read-only. It
then re-lists them once. When the cache lags behind that re-list (a loaded machine), the
pods are skipped for good: nothing else touches a NotReady DaemonSet pod, so it stays
NotReady, and a Terminating pod stays Terminating, while the node reads Ready. Seen in CI:
the node-agent pod of a worker power-cycled three times in a row never ran again.

:class:`Resync` closes that gap the way a kubelet's periodic sync would: after a node powers
on and reads Ready, every pod on it still waiting for its node (Pending, Running but not
Ready, or Terminating) gets its annotation ``lab.powercut.io/resync`` bumped, an update
kwok sees and acts on with a warm cache. Pods the node settled on its own are left alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from harness.kube.client import KubeClient, NotFound
from harness.kube.names import ANNOTATION_LAB_RESYNC
from harness.kube.timeline import SYSTEM_CLOCK, Clock
from harness.lab.spec import VOLUME_GATE

log = logging.getLogger("powercut.lab.resync")

ANNOTATION = ANNOTATION_LAB_RESYNC

JSON = dict[str, Any]


def _ready(obj: JSON) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def waiting_for_node(pod: JSON) -> bool:
    """A pod that a live kwok node would act on: finalise (Terminating), start (Pending)
    or mark Ready again (Running, not Ready). Finished pods are left alone."""
    md = pod.get("metadata") or {}
    if md.get("deletionTimestamp"):
        return True
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Pending":
        # A pod gated on its volumes waits for the attacher, not for its node.
        return (md.get("annotations") or {}).get(VOLUME_GATE) != "waiting"
    return phase == "Running" and not _ready(pod)


class Resync:
    """One thread per power-on: wait for the node to read Ready, give its agent ``grace_s``
    to settle the pods itself, then nudge those it did not, every ``every_s``, until none
    waits or ``timeout_s`` has passed since the power-on. Paced by ``clock`` (a test's fake
    one steps it)."""

    def __init__(
        self,
        client: KubeClient,
        is_on: Callable[[str], bool],
        *,
        grace_s: float = 3.0,
        every_s: float = 3.0,
        timeout_s: float = 90.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.client = client
        self.is_on = is_on
        self.grace_s = grace_s
        self.every_s = every_s
        self.timeout_s = timeout_s
        self.clock = clock
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.nudged: dict[str, int] = {}  # node -> pods nudged so far (for the log and tests)

    def powered_on(self, node: str) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]
        t = threading.Thread(target=self._run, args=(node,), name=f"resync-{node}", daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)

    def _run(self, node: str) -> None:
        client = self.client.clone(maxsize=1)
        try:
            self._resync(client, node)
        except Exception:  # a failed nudge must never take the supervisor down
            log.exception("resync of %s", node)
        finally:
            client.close()

    def _resync(self, client: KubeClient, node: str) -> None:
        deadline = self.clock.monotonic() + self.timeout_s
        ready_at: float | None = None
        while not self.clock.wait_event(self._stop, 0.5 if ready_at is None else self.every_s):
            now = self.clock.monotonic()
            if now >= deadline or not self.is_on(node):
                return
            if ready_at is None:
                if _ready(client.get(f"/api/v1/nodes/{node}")):
                    ready_at = now
                continue
            if now - ready_at < self.grace_s:
                continue
            pods, _ = client.list("/api/v1/pods", fieldSelector=f"spec.nodeName={node}")
            waiting = [p for p in pods if waiting_for_node(p)]
            if not waiting:
                return
            for pod in waiting:
                md = pod["metadata"]
                log.info("nudging pod %s/%s on %s", md["namespace"], md["name"], node)
                try:
                    client.patch(
                        f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}",
                        {"metadata": {"annotations": {ANNOTATION: f"{self.clock.time():.3f}"}}},
                    )
                except NotFound:  # finalised meanwhile
                    continue
                self.nudged[node] = self.nudged.get(node, 0) + 1
