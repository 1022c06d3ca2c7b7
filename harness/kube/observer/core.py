"""The :class:`Observer`: one watcher thread per watched resource (per namespace when
namespaces are given), started and stopped together, and the queries over the state they
keep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from harness.errors import WaitTimeout
from harness.kube.client import KubeClient
from harness.kube.observer.handlers import (
    _EndpointSliceHandler,
    _EventHandler,
    _Handler,
    _NodeHandler,
    _PodHandler,
    _PvcHandler,
    _VolumeAttachmentHandler,
)
from harness.kube.observer.states import (
    EndpointsState,
    NodeState,
    PodState,
    PvcState,
    VolumeAttachmentState,
)
from harness.kube.observer.vocabulary import EVENT_REASONS, OBSERVER, RESOURCES
from harness.kube.observer.watch import GONE_RETRIES, _Watcher
from harness.kube.timeline import Timeline

# -- the observer --------------------------------------------------------------------------


class Observer:
    """Watches nodes, pods, events, VolumeAttachments, PVCs and EndpointSlices.

    ``Observer(client, namespaces=None)``: cluster-wide, or only the given namespaces for
    namespaced resources (nodes and VolumeAttachments are always cluster-wide). The
    observer never uses ``client``'s own connections: each watcher thread gets a
    ``client.clone()`` (same credentials and TLS context, its own connection pool).
    """

    def __init__(
        self,
        client: KubeClient,
        namespaces: Sequence[str] | None = None,
        *,
        timeline: Timeline | None = None,
        resources: Iterable[str] = RESOURCES,
        event_reasons: Iterable[str] = EVENT_REASONS,
        watch_timeout_s: int = 300,
        page_size: int = 500,
        prefetch: bool = True,
        slim_decode: bool = True,
        # Reconnects back off to 1 s at most: while the API servers are down the watch
        # must be back as soon as one answers, or the changes made through it meanwhile are
        # only seen as a re-list's net result (with a 5 s cap, 12 of 40 cordon flips in the
        # fault bench's every-API-server restarts; a watch retrying every 0.2 s lost none).
        backoff_s: tuple[float, float] = (0.2, 1.0),
        sync_timeout_s: float = 60.0,
        gone_retries: int = GONE_RETRIES,
    ) -> None:
        self._client = client
        self.namespaces = list(namespaces) if namespaces else None
        self.timeline = timeline if timeline is not None else Timeline()
        self.watch_timeout_s = watch_timeout_s
        self.page_size = page_size
        self.prefetch = prefetch
        self.slim_decode = slim_decode
        self.backoff_s = backoff_s
        self.sync_timeout_s = sync_timeout_s
        if gone_retries < 0:
            raise ValueError(f"gone_retries must be 0 or more, not {gone_retries}")
        self.gone_retries = gone_retries
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._started = False
        reasons = frozenset(event_reasons)
        factories: dict[str, Callable[[], _Handler[Any]]] = {
            "nodes": _NodeHandler,
            "pods": _PodHandler,
            "events": lambda: _EventHandler(reasons),
            "volumeattachments": _VolumeAttachmentHandler,
            "persistentvolumeclaims": _PvcHandler,
            "endpointslices": _EndpointSliceHandler,
        }
        self._watchers: dict[str, list[_Watcher[Any]]] = {}
        for resource in resources:
            if resource not in factories:
                valid = ", ".join(factories)
                raise ValueError(f"unknown resource {resource!r}; valid: {valid}")
            probe = factories[resource]()
            scopes: list[str | None] = (
                list(self.namespaces) if probe.namespaced and self.namespaces else [None]
            )
            self._watchers[resource] = [_Watcher(self, factories[resource](), ns) for ns in scopes]

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Observer:
        """Start every watcher; return once each has listed its resource once."""
        if self._started:
            raise RuntimeError("observer already started")
        self._started = True
        watchers = self._all_watchers()
        for w in watchers:
            w.thread.start()
        t0 = time.monotonic()
        deadline = t0 + self.sync_timeout_s
        for w in watchers:
            if not w.synced.wait(max(0.0, deadline - time.monotonic())):
                self.stop()
                raise WaitTimeout(
                    f"initial list of {w.label}",
                    w.last_problem or "no answer yet",
                    time.monotonic() - t0,
                )
            if w.error is not None:
                self.stop()
                raise w.error
        # No gc.freeze() here: frozen objects are never collected, so every stopped
        # observer would stay in memory for good. The state held is slim tuples; a full
        # collection over 30,000 of them costs about a millisecond.
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop every watcher thread and wait for them (idempotent)."""
        self._stop.set()
        watchers = self._all_watchers()
        for w in watchers:
            w.cancel()
        deadline = time.monotonic() + timeout_s
        for w in watchers:
            if w.thread.is_alive():
                w.thread.join(max(0.0, deadline - time.monotonic()))
        self.timeline.touch()

    def __enter__(self) -> Observer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._started and not self._stop.is_set()

    def failure(self) -> str | None:
        """Why observation is broken (a watcher died, or the observer was stopped), or None."""
        for w in self._all_watchers():
            if w.error is not None:
                return f"observer {w.label} failed: {w.last_problem}"
        if self._stop.is_set():
            return "observer stopped"
        return None

    def resource_versions(self) -> dict[str, str]:
        """The resourceVersion each watcher would resume from (for diagnostics)."""
        return {w.label: w.rv for w in self._all_watchers()}

    def _all_watchers(self) -> list[_Watcher[Any]]:
        return [w for ws in self._watchers.values() for w in ws]

    def _note(
        self, label: str, transition: str, *, mono: float | None = None, **detail: Any
    ) -> None:
        self.timeline.record(OBSERVER, label, transition, detail=detail, mono=mono)

    # -- current state ---------------------------------------------------------------------

    def _states(self, resource: str) -> list[Any]:
        if resource not in self._watchers:
            raise ValueError(f"resource {resource!r} is not observed")
        with self._lock:
            return [s for w in self._watchers[resource] for s in w.cache.values()]

    def nodes(self) -> list[NodeState]:
        return sorted(self._states("nodes"), key=lambda n: n.name)

    def node(self, name: str) -> NodeState | None:
        return next((n for n in self._states("nodes") if n.name == name), None)

    def pods(
        self,
        *,
        on_node: str | None = None,
        namespace: str | None = None,
        workload: str | None = None,
    ) -> list[PodState]:
        pods: list[PodState] = self._states("pods")
        return sorted(
            (
                p
                for p in pods
                if (on_node is None or p.node == on_node)
                and (namespace is None or p.namespace == namespace)
                and (workload is None or p.workload == workload)
            ),
            key=lambda p: (p.namespace, p.name),
        )

    def pod(self, namespace: str, name: str) -> PodState | None:
        return next(
            (p for p in self._states("pods") if p.namespace == namespace and p.name == name), None
        )

    def volume_attachments(
        self, *, pv: str | None = None, node: str | None = None
    ) -> list[VolumeAttachmentState]:
        vas: list[VolumeAttachmentState] = self._states("volumeattachments")
        return sorted(
            (v for v in vas if (pv is None or v.pv == pv) and (node is None or v.node == node)),
            key=lambda v: v.name,
        )

    def pvcs(self, namespace: str | None = None) -> list[PvcState]:
        pvcs: list[PvcState] = self._states("persistentvolumeclaims")
        return sorted(
            (p for p in pvcs if namespace is None or p.namespace == namespace),
            key=lambda p: (p.namespace, p.name),
        )

    def pvc(self, namespace: str, name: str) -> PvcState | None:
        return next((p for p in self.pvcs(namespace) if p.name == name), None)

    def endpoints(self, namespace: str, service: str) -> EndpointsState:
        """Ready/total endpoints of a Service now (0/0 when it has no EndpointSlice)."""
        if "endpointslices" not in self._watchers:
            raise ValueError("resource 'endpointslices' is not observed")
        with self._lock:
            for w in self._watchers["endpointslices"]:
                h = w.handler
                if isinstance(h, _EndpointSliceHandler) and (namespace, service) in h.services:
                    r, t = h.services[(namespace, service)]
                    return EndpointsState(namespace, service, r, t)
        return EndpointsState(namespace, service, 0, 0)
