"""The watch loop of one resource: list (paginated), watch from the list's resourceVersion,
resume after a broken stream, retry a 410 Gone and re-list when every try is refused (a gap),
publishing each handler's transitions on the timeline.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic

import orjson

from harness.errors import PermanentError, TemporaryError
from harness.kube import fields
from harness.kube.client import ApiError, Gone, KubeClient, WatchEvent
from harness.kube.names import Change
from harness.kube.observer.gcpause import _gc_paused
from harness.kube.observer.handlers import _Handler, _key, _meta, _pairs
from harness.kube.observer.states import Emit, Key, Pair, S
from harness.kube.timeline import Transition

if TYPE_CHECKING:
    from harness.kube.observer.core import Observer

log = logging.getLogger(__name__)

#: Between retries of a watch refused for good (403, ...) once synced; a broken watch
#: reconnects sooner (``Observer.backoff_s``).
PERMANENT_RETRY_S = 5.0

#: Watches retried from the same resourceVersion, each on a new connection, after a 410
#: Gone and before re-listing: behind a balancer each goes to the next API server, and one
#: that did not restart still holds the history (a fresh connection is all that changes;
#: the API servers' own addresses, in the cluster's ``default/kubernetes`` EndpointSlice,
#: are often not reachable from outside the cluster, so they are not tried).
GONE_RETRIES = 5

#: How long before a live watch stream broke a change may still have been on its way: a
#: gap announced after that stream starts this much before it broke.
LIVE_MARGIN_S = 1.0


class _Watcher(Generic[S]):
    def __init__(self, obs: Observer, handler: _Handler[S], namespace: str | None) -> None:
        self.obs = obs
        self.handler = handler
        self.namespace = namespace
        ns = f"/namespaces/{namespace}" if namespace else ""
        self.path = f"{handler.api}{ns}/{handler.resource}"
        self.label = handler.resource + (f"@{namespace}" if namespace else "")
        # Decode only the fields the projection reads (harness.kube.fields), or everything.
        self._decode_page: fields.Decode = orjson.loads
        self._decode_line: fields.Decode = orjson.loads
        if obs.slim_decode:
            self._decode_page = fields.list_decoder(handler.schema, self.label)
            self._decode_line = fields.watch_decoder(handler.schema, self.label)
        self.cache: dict[Key, S] = {}
        self.rv = ""
        self.synced = threading.Event()
        self.error: BaseException | None = None
        self.last_problem = ""
        self._last_ok = obs.timeline.clock.monotonic()
        # Until when the watch is known to have seen everything: the last event it
        # delivered, or the end of the last stream the API server had accepted less
        # LIVE_MARGIN_S (a live stream delivers within milliseconds, but a change committed
        # through another API server just before this one's stream broke may not have come
        # yet), whichever is later. A re-list's gap starts here.
        self._live_until = self._last_ok
        self._accepted = False
        self._cancel: Callable[[], None] | None = None
        self._cancel_lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._run, name=f"powercut-observer-{self.label}", daemon=True
        )

    # -- thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        # Events are stamped by the timeline's clock, like every other transition on it.
        client = self.obs._client.clone(maxsize=2, clock=self.obs.timeline.clock)
        try:
            self._loop(client)
        except Exception as exc:  # noqa: BLE001 -- a dead watcher must be reported, not silent
            if self.obs._stop.is_set():
                return  # stopping: a stream cut under our feet is expected, not a failure
            self.error = exc
            self.last_problem = f"{type(exc).__name__}: {exc}"
            log.error("observer %s failed: %s", self.label, self.last_problem)
            self.obs._note(self.label, Change.FAILED, error=self.last_problem[:300])
        finally:
            self.synced.set()
            client.close()

    def _set_cancel(self, cancel: Callable[[], None]) -> None:
        self._accepted = True  # the API server accepted this watch: it is live
        with self._cancel_lock:
            self._cancel = cancel
        if self.obs._stop.is_set():
            cancel()

    def cancel(self) -> None:
        with self._cancel_lock:
            cancel = self._cancel
        if cancel is not None:
            cancel()

    def _loop(self, client: KubeClient) -> None:
        stop = self.obs._stop
        clock = self.obs.timeline.clock
        low, high = self.obs.backoff_s
        delay = low
        rv: str | None = None
        reason = "initial list"
        refused = _Refusals()  # the 410s since the watch last delivered anything
        since_rv = ""  # what the watch resumed from when the history ran out (a gap's start)
        while not stop.is_set():
            if rv is None:
                exact = refused.list_at()
                try:
                    fresh, list_rv = self._list_after_gone(client, exact)
                except TemporaryError as exc:
                    self._problem(Change.WATCH_BROKEN, exc)
                    clock.wait_event(stop, delay)
                    delay = min(delay * 2, high)
                    continue
                except PermanentError as exc:
                    if not self.synced.is_set():
                        self.error = exc
                        self.last_problem = f"{type(exc).__name__}: {exc}"
                        return
                    self._problem(Change.WATCH_ERROR, exc)
                    clock.wait_event(stop, max(high, PERMANENT_RETRY_S))
                    continue
                self._resync(
                    fresh,
                    list_rv,
                    reason,
                    clock.monotonic(),
                    clock.time(),
                    since_rv=since_rv,
                    exact=exact is not None and list_rv == exact,
                )
                del fresh
                rv = list_rv
                delay = low
                refused.relisted()
                self.synced.set()
            self._accepted = False  # set once the API server accepts the watch
            pause = 0.0  # the backoff, once the stream's end is stamped (finally)
            try:
                for ev in client.watch(
                    self.path,
                    resource_version=rv,
                    decode=self._decode_line,
                    timeout_s=self.obs.watch_timeout_s,
                    on_open=self._set_cancel,
                ):
                    if stop.is_set():
                        return
                    self._last_ok = ev.mono
                    delay = low
                    refused.clear()  # this API server had the history: a new round later
                    new_rv = str(_meta(ev.object).get("resourceVersion") or "")
                    if ev.type != "BOOKMARK":
                        self._on_event(ev)
                    if new_rv:
                        rv = self.rv = new_rv
                        if ev.type == "BOOKMARK":  # resource_versions() moved: wake waits
                            self.obs.timeline.touch()
                refused.clear()  # the stream ran to its end: the history was there
            except Gone as exc:
                self._accepted = False  # what it missed is exactly the question
                if stop.is_set():
                    return
                start = refused.add(exc.api_message)
                self.obs._note(
                    self.label,
                    Change.WATCH_GONE,
                    resource_version=rv,
                    attempt=refused.count,
                    cache_start=start,
                    error=exc.api_message[:200],
                )
                if refused.count <= self.obs.gone_retries:
                    # Another API server may still hold the history (only the one that
                    # answered restarted): the same watch on a new connection, which a
                    # balancer hands to the next API server.
                    client.close()
                    continue
                since_rv = rv or ""
                rv, reason = None, f"410 Gone: {exc.api_message}"[:200]
                client.close()
            except TemporaryError as exc:
                if stop.is_set():
                    return
                self._problem(Change.WATCH_BROKEN, exc)
                pause = delay
                delay = min(delay * 2, high)
            except PermanentError as exc:
                if stop.is_set():
                    return
                self._problem(Change.WATCH_ERROR, exc)
                pause = max(high, PERMANENT_RETRY_S)
            finally:
                if self._accepted:  # live until now, so nothing missed until shortly before
                    self._live_until = clock.monotonic() - LIVE_MARGIN_S
                with self._cancel_lock:
                    self._cancel = None
            if pause:  # not before: a gap starts where the stream broke, not after a backoff
                clock.wait_event(stop, pause)

    def _problem(self, what: str, exc: BaseException) -> None:
        self.last_problem = f"{type(exc).__name__}: {exc}"
        log.warning("observer %s: %s: %s", self.label, what, self.last_problem)
        self.obs._note(self.label, what, error=self.last_problem[:300])

    # -- state -----------------------------------------------------------------------------

    def _on_event(self, ev: WatchEvent) -> None:
        h = self.handler
        key = _key(ev.object)
        pairs: list[Pair[S]]
        with self.obs._lock:
            old = self.cache.get(key)
            new = h.project(ev.object)
            if ev.type == "DELETED":
                self.cache.pop(key, None)
                pairs = _pairs(old, new) if old is not None and new is not None else []
                last = new if new is not None else old
                if last is not None:
                    pairs.append((last, None))
            elif new is None:
                self.cache.pop(key, None)
                pairs = [(old, None)] if old is not None else []
            else:
                self.cache[key] = new
                pairs = _pairs(old, new) if new != old else []
            emits = h.changes(pairs) if pairs else []
        if emits:
            self._publish(emits, ev.mono, ev.wall, None)
        elif pairs:
            self.obs.timeline.touch()  # state changed without a transition: wake state waits

    def _list_after_gone(self, client: KubeClient, exact: str | None) -> tuple[dict[Key, S], str]:
        """The list a re-list starts from: the state at ``exact`` (read from etcd) when the
        410s said where the API servers' watch caches start, else the state now."""
        if exact is not None:
            try:
                return self._list(client, exact)
            except ApiError as exc:  # compacted, or not served there: list now
                if isinstance(exc, TemporaryError):
                    raise  # retried with backoff, still at the same resourceVersion
                log.info("observer %s: no list at %s (%s); listing now", self.label, exact, exc)
        return self._list(client)

    def _list(self, client: KubeClient, exact: str | None = None) -> tuple[dict[Key, S], str]:
        """List page by page, keeping only the projection of each object: the raw pages are
        dropped as soon as they are projected, and the collector is paused meanwhile (it is
        most of the cost of building many small objects, and it would find nothing). With
        ``prefetch`` the API server encodes the next page while this one is projected."""
        h = self.handler
        fresh: dict[Key, S] = {}
        rv = ""
        at: dict[str, str] = {}
        if exact is not None:
            at = {"resourceVersion": exact, "resourceVersionMatch": "Exact"}
        with _gc_paused():
            for page, page_rv in client.pages(
                self.path,
                page_size=self.obs.page_size,
                prefetch=self.obs.prefetch,
                decode=self._decode_page,
                **at,
            ):
                rv = page_rv
                for obj in page:
                    s = h.project(obj)
                    if s is not None:
                        fresh[_key(obj)] = s
                del page
        return fresh, rv

    def _resync(
        self,
        fresh: dict[Key, S],
        rv: str,
        reason: str,
        mono: float,
        wall: float,
        *,
        since_rv: str = "",
        exact: bool = False,
    ) -> None:
        h = self.handler
        initial = not self.synced.is_set()
        with self.obs._lock:
            old_cache, self.cache, self.rv = self.cache, fresh, rv
            if initial:
                emits = h.observed(list(fresh.values()))
            else:
                pairs: list[Pair[S]] = []
                for k, o in old_cache.items():
                    n = fresh.get(k)
                    if n is None:
                        pairs.append((o, None))
                    elif n != o:
                        pairs.extend(_pairs(o, n))
                pairs.extend((None, n) for k, n in fresh.items() if k not in old_cache)
                emits = h.changes(pairs) if pairs else []
        if initial:
            self._publish(emits, mono, wall, None)
            self.obs._note(
                self.label, Change.SYNCED, mono=mono, objects=len(fresh), resource_version=rv
            )
        else:
            uncertain = round(max(0.0, mono - self._last_ok), 3)
            self._publish(emits, mono, wall, {"relist": True, "uncertain_s": uncertain})
            self.obs._note(
                self.label,
                Change.RELISTED,
                mono=mono,
                reason=reason,
                changes=len(emits),
                uncertain_s=uncertain,
                resource=self.handler.resource,
                since_mono=round(max(self._last_ok, self._live_until), 6),
                since_resource_version=since_rv,
                resource_version=rv,
                exact=exact,
            )
        self._last_ok = self._live_until = mono

    def _publish(
        self, emits: list[Emit], mono: float, wall: float, extra: dict[str, Any] | None
    ) -> None:
        if not emits:
            return
        self.obs.timeline.extend(
            [
                Transition(
                    mono, wall, kind, ns, name, what, {**detail, **extra} if extra else detail
                )
                for kind, ns, name, what, detail in emits
            ]
        )


#: kube-apiserver's answer to a watch from before its watch cache's window: "too old
#: resource version: <asked> (<the oldest it can serve from>)" (k8s.io/apiserver
#: pkg/storage/cacher watch_cache.go, getAllEventsSinceLocked). Right after the cache
#: initialised, the second number is the resourceVersion it listed etcd at.
TOO_OLD_RE = re.compile(r"too old resource version: (\d+) \((\d+)\)")


class _Refusals:
    """The 410 Gone answers of one round of watch retries, and where to re-list from.

    Each answer from a kube-apiserver's watch cache names the oldest resourceVersion that
    cache can replay from. When every try was refused, the re-list reads the state at the
    newest of them (an exact list, which etcd serves while it keeps that revision): every
    cache that answered can replay what came after it, so the watch resumes there and the
    changes made since the caches started are delivered one by one, not folded into a
    list taken later. Without numbers (another server, or another message) it lists now.
    """

    def __init__(self) -> None:
        self.count = 0
        self.starts: list[int] = []

    def add(self, message: str) -> int | None:
        self.count += 1
        hit = TOO_OLD_RE.search(message)
        if hit is None:
            return None
        start = int(hit.group(2))
        self.starts.append(start)
        return start

    def list_at(self) -> str | None:
        """The resourceVersion the re-list should read at, or None for the state now."""
        return str(max(self.starts)) if self.count and self.starts else None

    def clear(self) -> None:
        self.count = 0
        self.starts = []

    def relisted(self) -> None:
        self.clear()
