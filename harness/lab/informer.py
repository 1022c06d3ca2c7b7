"""A minimal list+watch cache for the lab's own controllers (attacher, health endpoints)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from harness.errors import PowercutError
from harness.kube.client import JSON, Gone, KubeClient

log = logging.getLogger(__name__)


def key_of(obj: JSON) -> str:
    md = obj.get("metadata") or {}
    ns = md.get("namespace")
    return f"{ns}/{md.get('name')}" if ns else str(md.get("name"))


class Informer:
    """Keeps ``objects`` in sync with the API; calls ``on_change`` after each change.

    ``project``: what to keep of each object (``None``: nothing, the object is not cached);
    ``on_change`` still sees whole objects. At scale the lab keeps only what its controllers
    read: a whole pod is about 6 KB of JSON and several times that as Python objects.
    """

    def __init__(
        self,
        client: KubeClient,
        path: str,
        on_change: Callable[[str, JSON], None] | None = None,
        *,
        project: Callable[[JSON], JSON | None] | None = None,
        **params: Any,
    ) -> None:
        self.client = client
        self.path = path
        self.params = params
        self.on_change = on_change
        self.project = project
        self.objects: dict[str, JSON] = {}
        self.lock = threading.RLock()
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"informer {path}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def snapshot(self) -> list[JSON]:
        with self.lock:
            return list(self.objects.values())

    def _keep(self, obj: JSON) -> JSON | None:
        return obj if self.project is None else self.project(obj)

    def _relist(self) -> str:
        fresh: dict[str, JSON] = {}
        rv = ""
        for page, page_rv in self.client.pages(self.path, prefetch=True, **self.params):
            rv = page_rv
            for o in page:
                kept = self._keep(o)
                if kept is not None:
                    fresh[key_of(o)] = kept
                self._notify("SYNC", o)
        with self.lock:
            gone = [k for k in self.objects if k not in fresh]
            self.objects = fresh
        self.synced.set()
        for k in gone:
            self._notify("DELETED", {"metadata": {"name": k.split("/")[-1]}})
        return rv

    def _notify(self, kind: str, obj: JSON) -> None:
        if self.on_change is not None:
            try:
                self.on_change(kind, obj)
            except Exception:  # a controller bug must not stop the cache
                log.exception("lab controller for %s failed", self.path)

    def _run(self) -> None:
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    rv = self._relist()
                for ev in self.client.watch(
                    self.path, resource_version=rv, timeout_s=60, **self.params
                ):
                    if self._stop.is_set():
                        return
                    obj = ev.object
                    rv = str((obj.get("metadata") or {}).get("resourceVersion", rv))
                    if ev.type == "BOOKMARK":
                        continue
                    kept = None if ev.type == "DELETED" else self._keep(obj)
                    with self.lock:
                        if kept is None:
                            self.objects.pop(key_of(obj), None)
                        else:
                            self.objects[key_of(obj)] = kept
                    self._notify(ev.type, obj)
            except Gone:
                rv = ""
            except PowercutError as exc:
                # API server away (a control-plane node is off): retry, then re-list.
                log.debug("watch %s: %s", self.path, exc)
                rv = ""
                self._stop.wait(1.0)
            except Exception:
                log.exception("watch %s failed", self.path)
                rv = ""
                with contextlib.suppress(Exception):
                    self._stop.wait(1.0)
