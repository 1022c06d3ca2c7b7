"""A small fake Kubernetes API server for unit tests: real HTTP/1.1 on 127.0.0.1.

Enough of the API for the observer and the actions: list with pagination (limit/continue),
field and label selectors, watch from a resourceVersion (chunked, with BOOKMARKs on demand),
410 Gone on demand (HTTP status or in-stream ERROR event, as the real server does), broken
streams, create / get / merge-patch (resourceVersion precondition) / put / delete (grace
periods, finalizers, uid preconditions), the pod eviction subresource and a Job controller's
generated selector. Tests change state directly with ``add``/``update``/``remove``.

By default the fake keeps every change and request it saw, for the tests' assertions. A long
run (the simulated cluster of ``tests/integration/test_longevity_sim.py``, which the longevity
memory benchmark runs in the same process) bounds them: ``max_history`` changes kept to
resume watches from (older ones are compacted away, as a real API server does: a watch from
before them gets 410 Gone) and ``max_requests`` requests in ``requests``.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import socket
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import orjson

from harness.clock import SYSTEM_CLOCK, Clock
from harness.kube.client import Credentials, KubeClient

JSON = dict[str, Any]
Key = tuple[str, str]

KINDS: dict[str, tuple[str, str]] = {
    "nodes": ("v1", "Node"),
    "pods": ("v1", "Pod"),
    "events": ("v1", "Event"),
    "persistentvolumeclaims": ("v1", "PersistentVolumeClaim"),
    "persistentvolumes": ("v1", "PersistentVolume"),
    "volumeattachments": ("storage.k8s.io/v1", "VolumeAttachment"),
    "endpointslices": ("discovery.k8s.io/v1", "EndpointSlice"),
    "jobs": ("batch/v1", "Job"),
}
CLUSTER_SCOPED = frozenset({"nodes", "volumeattachments", "persistentvolumes"})
#: Event types each watch stream remembers having sent (the latest ones), for debugging.
SENT_KEPT = 1_000
#: Paginated lists whose next pages are kept; an older continue token gets 410 Gone.
SNAPSHOTS_KEPT = 64


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _path_value(obj: JSON, dotted: str) -> str:
    cur: Any = obj
    for part in dotted.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def field_match(obj: JSON, selector: str | None) -> bool:
    for term in filter(None, (selector or "").split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if _path_value(obj, k) == v:
                return False
        else:
            k, v = term.replace("==", "=").split("=", 1)
            if _path_value(obj, k) != v:
                return False
    return True


def label_match(obj: JSON, selector: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any = None


@dataclass(eq=False)
class _Stream:
    resource: str
    #: absolute position in the change log of the next change to look at
    pos: int = 0
    broken: bool = False
    expired: bool = False
    sent: deque[str] = field(default_factory=lambda: deque(maxlen=SENT_KEPT))


class FakeApiServer:
    """Start with ``with FakeApiServer() as api:``; ``api.client()`` gives a KubeClient.

    ``max_history``: how many of the latest changes are kept for watches to resume from
    (older ones no open stream still has to send are dropped, and resuming from before them
    gets 410 Gone, as after :meth:`compact`); ``max_requests``: how many of the latest
    requests ``requests`` keeps. ``None`` (the default): all of them.
    """

    def __init__(self, *, max_history: int | None = None, max_requests: int | None = None) -> None:
        self._cond = threading.Condition(threading.RLock())
        self.rv = 1000
        self.objects: dict[str, dict[Key, JSON]] = defaultdict(dict)
        self.max_history = max_history
        #: rv, resource, type, object of the changes kept; streams hold absolute positions:
        #: position p is ``log[p - log_base]``
        self.log: list[tuple[int, str, str, JSON]] = []
        self.log_base = 0
        #: watching from a resourceVersion older than this one gets 410 Gone
        self.compacted_rv = 0
        #: How a watch from a compacted resourceVersion is refused: "event" (200, then an
        #: ERROR event with a 410 Status, like kube-apiserver) or "http" (HTTP 410).
        self.gone_mode: Literal["event", "http"] = "event"
        #: Several API servers sharing this store behind a round-robin balancer: each new
        #: connection goes to the next one (``next_server`` counts them), and a watch through
        #: API server i from a resourceVersion older than ``cache_starts[i]`` (its watch cache
        #: started there, as after a restart) gets kube-apiserver's in-stream 410 "too old
        #: resource version: <asked> (<start>)". None: one API server with the whole history.
        self.cache_starts: list[int] | None = None
        self.next_server = itertools.count()
        #: every change ever made, for lists at an exact resourceVersion
        self.history: list[tuple[int, str, Key, JSON | None]] = []
        #: When set, every new watch request is answered with this HTTP status.
        self.watch_failure: int | None = None
        #: When set, every list request is answered with this HTTP status.
        self.list_failure: int | None = None
        #: Resources every request for is refused with 403 Forbidden (a role without them).
        self.forbidden: set[str] = set()
        #: node name -> its kubelet's configuration, served at nodes/<name>/proxy/configz
        #: (a node not here answers 503, as a kubelet that is down or has configz off)
        self.configz: dict[str, JSON] = {}
        #: (resource, verb) a SelfSubjectAccessReview answers not allowed (besides the
        #: forbidden resources); the reviews asked, in order
        self.denied: set[tuple[str, str]] = set()
        self.reviews: list[JSON] = []
        self.bookmark_interval_s: float | None = None
        #: (namespace, name) -> HTTP status to refuse an eviction with, or None to allow it.
        self.eviction_hook: Callable[[str, str], int | None] | None = None
        #: Nodes whose "kubelet" finishes graceful pod deletions at once.
        self.live_nodes: set[str] = set()
        #: Answer the next N PATCH requests with 409 Conflict.
        self.conflicts_next = 0
        self.requests: deque[Request] = deque(maxlen=max_requests)
        self.stopping = False
        self._streams: set[_Stream] = set()
        self._snapshots: dict[str, tuple[list[JSON], int]] = {}
        self._snap_ids = itertools.count(1)
        self._conns: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        fake = self

        class Handler(_Handler):
            api = fake

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(0.02,), name="fakeapi", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self.stopping = True
            self._cond.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        for conn in list(self._conns):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                continue
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, timeout_s: float = 5.0, clock: Clock = SYSTEM_CLOCK) -> KubeClient:
        return KubeClient(Credentials(server=self.url), timeout_s=timeout_s, clock=clock)

    # -- state, for tests ------------------------------------------------------------------

    def _commit(self, resource: str, type_: str, obj: JSON) -> JSON:
        with self._cond:
            self.rv += 1
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(self.rv)
            key = (str(meta.get("namespace") or ""), str(meta["name"]))
            if type_ == "DELETED":
                self.objects[resource].pop(key, None)
            else:
                self.objects[resource][key] = obj
            kept = None if type_ == "DELETED" else copy.deepcopy(obj)
            self.history.append((self.rv, resource, key, kept))
            api_version, kind = KINDS.get(resource, ("v1", resource))
            logged = copy.deepcopy(obj)
            logged.setdefault("apiVersion", api_version)
            logged.setdefault("kind", kind)
            self.log.append((self.rv, resource, type_, logged))
            self._trim()
            self._cond.notify_all()
            return copy.deepcopy(obj)

    def _trim(self) -> None:
        """Drop the changes no new watch may resume from (compacted, or older than the
        latest ``max_history``) that no open stream still has to send."""
        with self._cond:
            end = self.log_base + len(self.log)
            needed = min((s.pos for s in self._streams), default=end) - self.log_base
            reachable = bisect.bisect_right(self.log, self.compacted_rv, key=lambda e: e[0])
            if self.max_history is not None:
                reachable = max(reachable, len(self.log) - self.max_history)
            n = min(needed, reachable)
            if n <= 0:
                return
            # a watch from before the last dropped change would miss it: too old from now on
            self.compacted_rv = max(self.compacted_rv, self.log[n - 1][0])
            del self.log[:n]
            self.log_base += n

    def add(self, resource: str, obj: JSON) -> JSON:
        """Create an object (uid, creationTimestamp and resourceVersion filled in)."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_iso())
        if resource in CLUSTER_SCOPED:
            meta.pop("namespace", None)
        return self._commit(resource, "ADDED", obj)

    def update(
        self, resource: str, namespace: str, name: str, change: Callable[[JSON], object]
    ) -> JSON:
        """Change an object in place (``change`` mutates a copy) and announce it."""
        with self._cond:
            obj = copy.deepcopy(self.objects[resource][(namespace, name)])
            change(obj)
            return self._commit(resource, "MODIFIED", obj)

    def remove(self, resource: str, namespace: str, name: str) -> None:
        with self._cond:
            obj = copy.deepcopy(self.objects[resource][(namespace, name)])
            self._commit(resource, "DELETED", obj)

    def get(self, resource: str, namespace: str, name: str) -> JSON | None:
        with self._cond:
            obj = self.objects[resource].get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    # -- watch control, for tests ----------------------------------------------------------

    def active_watches(self, resource: str | None = None) -> int:
        with self._cond:
            return sum(1 for s in self._streams if resource is None or s.resource == resource)

    def wait_for_watches(
        self, count: int, resource: str | None = None, timeout_s: float = 5
    ) -> None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self.active_watches(resource) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{self.active_watches(resource)} of {count} watches open")
                self._cond.wait(left)

    def wait_for_requests(
        self, count: int, pred: Callable[[Request], bool], timeout_s: float = 30
    ) -> None:
        """Return once ``count`` of the requests kept match ``pred`` (a deadlock guard of
        ``timeout_s``, not a timing: requests are waited for, not polled)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while (n := sum(1 for r in self.requests if pred(r))) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{n} of {count} requests")
                self._cond.wait(left)

    def break_watches(self) -> None:
        """Cut every open watch stream (no terminating chunk: the client sees an error)."""
        with self._cond:
            for s in self._streams:
                s.broken = True
            self._cond.notify_all()

    def compact(self) -> None:
        """Make every resourceVersion older than the current one too old to watch from."""
        with self._cond:
            self.compacted_rv = self.rv
            self._trim()

    def expire_watches(self, during: Callable[[], object] | None = None) -> None:
        """End every open stream with an in-stream ERROR 410; changes made by ``during``
        are never delivered to those streams, and the history is compacted after them."""
        with self._cond:
            for s in self._streams:
                s.expired = True
            if during is not None:
                during()
            self.compacted_rv = self.rv
            self._trim()
            self._cond.notify_all()

    # -- API operations --------------------------------------------------------------------

    def _delete(self, resource: str, key: Key, grace: int | None) -> JSON:
        with self._cond:
            obj = copy.deepcopy(self.objects[resource][key])
            meta = obj["metadata"]
            if meta.get("finalizers"):
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = now_iso()
                    return self._commit(resource, "MODIFIED", obj)
                return obj
            node = (obj.get("spec") or {}).get("nodeName")
            if resource == "pods" and node and grace != 0:
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = now_iso()
                    meta["deletionGracePeriodSeconds"] = 30 if grace is None else grace
                    obj = self._commit(resource, "MODIFIED", obj)
                if node in self.live_nodes:
                    self._commit(resource, "DELETED", obj)
                return obj
            return self._commit(resource, "DELETED", obj)

    def _create(self, resource: str, namespace: str, body: JSON) -> tuple[int, JSON]:
        with self._cond:
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if resource not in CLUSTER_SCOPED:
                meta["namespace"] = namespace
            if not meta.get("name"):
                meta["name"] = str(meta.get("generateName", "obj-")) + uuid.uuid4().hex[:5]
            if (namespace if resource not in CLUSTER_SCOPED else "", meta["name"]) in self.objects[
                resource
            ]:
                return 409, _status(
                    409, "AlreadyExists", f"{resource} {meta['name']} already exists"
                )
            for k in ("uid", "resourceVersion", "creationTimestamp"):
                if k in meta:
                    return 422, _status(422, "Invalid", f"metadata.{k}: must not be set on create")
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_iso()
            if resource == "jobs":
                spec = obj.setdefault("spec", {})
                if spec.get("selector") and not spec.get("manualSelector"):
                    return 422, _status(
                        422, "Invalid", "spec.selector: `selector` will be auto-generated"
                    )
                generated = {
                    "batch.kubernetes.io/controller-uid": meta["uid"],
                    "controller-uid": meta["uid"],
                    "batch.kubernetes.io/job-name": meta["name"],
                    "job-name": meta["name"],
                }
                spec["selector"] = {
                    "matchLabels": {"batch.kubernetes.io/controller-uid": meta["uid"]}
                }
                tmeta = spec.setdefault("template", {}).setdefault("metadata", {})
                tmeta["labels"] = {**(tmeta.get("labels") or {}), **generated}
                meta["labels"] = {**(meta.get("labels") or {}), **generated}
                obj["status"] = {}
            return 201, self._commit(resource, "ADDED", obj)

    def _list(self, resource: str, namespace: str, q: dict[str, str]) -> tuple[int, JSON]:
        with self._cond:
            token = q.get("continue")
            if token and (q.get("resourceVersion") or q.get("resourceVersionMatch")):
                msg = "specifying resource version is not allowed when using continue"
                return 400, _status(400, "BadRequest", msg)
            exact: dict[Key, JSON] | None = None
            if q.get("resourceVersionMatch") == "Exact":
                at = int(q.get("resourceVersion") or 0)
                if at < self.compacted_rv:
                    msg = "The resourceVersion for the provided list is too old."
                    return 410, _status(410, "Expired", msg)
                exact = {}
                for rv_, res, key_, obj_ in self.history:
                    if rv_ > at:
                        break
                    if res != resource:
                        continue
                    if obj_ is None:
                        exact.pop(key_, None)
                    else:
                        exact[key_] = obj_
            if token:
                snap_id, offset_s = token.split(":")
                if snap_id not in self._snapshots:
                    return 410, _status(410, "Expired", "the continue parameter is too old")
                items, rv = self._snapshots[snap_id]
                offset = int(offset_s)
            else:
                source = self.objects[resource] if exact is None else exact
                items = [
                    copy.deepcopy(o)
                    for (ns, _), o in sorted(source.items())
                    if (not namespace or ns == namespace)
                    and field_match(o, q.get("fieldSelector"))
                    and label_match(o, q.get("labelSelector"))
                ]
                rv = self.rv if exact is None else int(q.get("resourceVersion") or 0)
                offset = 0
                snap_id = str(next(self._snap_ids))
            limit = int(q.get("limit") or 0) or len(items) or 1
            page = items[offset : offset + limit]
            meta: JSON = {"resourceVersion": str(rv)}
            if offset + limit < len(items):
                meta["continue"] = f"{snap_id}:{offset + limit}"
                # kept while pages are left to serve (the latest SNAPSHOTS_KEPT lists)
                self._snapshots[snap_id] = (items, rv)
                while len(self._snapshots) > SNAPSHOTS_KEPT:
                    del self._snapshots[next(iter(self._snapshots))]
            else:
                self._snapshots.pop(snap_id, None)
            api_version, kind = KINDS.get(resource, ("v1", resource))
            return 200, {
                "apiVersion": api_version,
                "kind": f"{kind}List",
                "metadata": meta,
                "items": page,
            }


def _status(code: int, reason: str, message: str) -> JSON:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure" if code >= 400 else "Success",
        "reason": reason,
        "message": message,
        "code": code,
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: FakeApiServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without this, Nagle + delayed ACK
        # add ~40 ms to every response
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.api._conns.add(self.connection)
        self.server_index = next(self.api.next_server)  # see FakeApiServer.cache_starts

    def finish(self) -> None:
        self.api._conns.discard(self.connection)
        try:
            super().finish()
        except OSError:
            return

    # -- plumbing --------------------------------------------------------------------------

    def _send(self, code: int, body: JSON) -> None:
        data = orjson.dumps(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_chunks(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _route(self) -> tuple[str, str, str, str, dict[str, str]] | None:
        parts = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        segs = [s for s in parts.path.split("/") if s]
        if segs[:1] == ["api"] and len(segs) >= 3:
            rest = segs[2:]
        elif segs[:1] == ["apis"] and len(segs) >= 4:
            rest = segs[3:]
        else:
            return None
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return resource, namespace, name, sub, q

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return orjson.loads(raw) if raw else None

    def _dispatch(self, method: str) -> None:
        route = self._route()
        body = self._body()
        if route is None:
            self._send(404, _status(404, "NotFound", f"no route {self.path}"))
            return
        resource, namespace, name, sub, q = route
        api = self.api
        with api._cond:
            api.requests.append(Request(method, urlsplit(self.path).path, q, body))
            api._cond.notify_all()
        key = ("" if resource in CLUSTER_SCOPED else namespace, name)
        if method == "POST" and resource in ("selfsubjectaccessreviews", "selfsubjectreviews"):
            self._review(resource, body or {})
            return
        if resource in api.forbidden:
            msg = f"{method} on {resource} refused (test)"
            self._send(403, _status(403, "Forbidden", msg))
            return
        if method == "GET" and not name:
            if q.get("watch") in ("1", "true"):
                self._watch(resource, namespace, q)
            elif api.list_failure is not None:
                code = api.list_failure
                self._send(code, _status(code, "Forbidden", "list refused (test)"))
            else:
                self._send(*api._list(resource, namespace, q))
            return
        if method == "POST" and not name:
            self._send(*api._create(resource, namespace, body or {}))
            return
        if method == "GET" and resource == "nodes" and sub == "proxy":
            # a kubelet's own endpoints through the API server: only configz is served
            config = api.configz.get(name)
            if config is None:
                self._send(503, _status(503, "ServiceUnavailable", f"no kubelet on {name}"))
            else:
                self._send(200, {"kubeletconfig": copy.deepcopy(config)})
            return
        with api._cond:
            current = api.objects[resource].get(key)
            if current is None:
                self._send(404, _status(404, "NotFound", f'{resource} "{name}" not found'))
                return
            if method == "GET":
                self._send(200, copy.deepcopy(current))
            elif method == "POST" and sub == "eviction":
                hooked = api.eviction_hook(namespace, name) if api.eviction_hook else None
                if hooked is not None:
                    msg = "Cannot evict pod as it would violate the pod's disruption budget."
                    self._send(hooked, _status(hooked, "TooManyRequests", msg))
                    return
                grace = ((body or {}).get("deleteOptions") or {}).get("gracePeriodSeconds")
                api._delete(resource, key, grace)
                self._send(201, _status(201, "", "evicted"))
            elif method == "PATCH":
                self._patch(resource, key, current, body)
            elif method == "PUT":
                want = ((body or {}).get("metadata") or {}).get("resourceVersion")
                if want and want != current["metadata"]["resourceVersion"]:
                    self._send(409, _status(409, "Conflict", "the object has been modified"))
                    return
                new = copy.deepcopy(body)
                # as a real API server: a replacement keeps the object's identity
                for k in ("uid", "creationTimestamp"):
                    if k in current["metadata"]:
                        new.setdefault("metadata", {})[k] = current["metadata"][k]
                self._send(200, api._commit(resource, "MODIFIED", new))
            elif method == "DELETE":
                opts = body or {}
                uid = (opts.get("preconditions") or {}).get("uid")
                if uid and uid != current["metadata"]["uid"]:
                    self._send(409, _status(409, "Conflict", "precondition failed: uid"))
                    return
                self._send(200, api._delete(resource, key, opts.get("gracePeriodSeconds")))
            else:
                self._send(405, _status(405, "MethodNotAllowed", method))

    def _review(self, resource: str, body: JSON) -> None:
        """A SelfSubjectReview (who am I) or a SelfSubjectAccessReview (may I)."""
        if resource == "selfsubjectreviews":
            info = {"username": "fake-user", "groups": ["system:authenticated"]}
            self._send(201, {**body, "status": {"userInfo": info}})
            return
        self.api.reviews.append(body)
        spec = body.get("spec") or {}
        attrs = spec.get("resourceAttributes") or {}
        res = attrs.get("resource", "") + (
            f"/{attrs['subresource']}" if attrs.get("subresource") else ""
        )
        verb = attrs.get("verb") or (spec.get("nonResourceAttributes") or {}).get("verb", "")
        allowed = res not in self.api.forbidden and (res, verb) not in self.api.denied
        self._send(201, {**body, "status": {"allowed": allowed}})

    def _patch(self, resource: str, key: Key, current: JSON, body: Any) -> None:
        api = self.api
        ctype = self.headers.get("Content-Type", "")
        if "merge-patch" not in ctype:
            self._send(415, _status(415, "UnsupportedMediaType", ctype))
            return
        if api.conflicts_next > 0:
            api.conflicts_next -= 1
            self._send(409, _status(409, "Conflict", "the object has been modified"))
            return
        want = ((body or {}).get("metadata") or {}).get("resourceVersion")
        if want and want != current["metadata"]["resourceVersion"]:
            self._send(409, _status(409, "Conflict", "the object has been modified"))
            return
        new = merge_patch(current, body)
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._send(200, api._commit(resource, "DELETED", new))
        else:
            self._send(200, api._commit(resource, "MODIFIED", new))

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # -- watch -----------------------------------------------------------------------------

    def _watch(self, resource: str, namespace: str, q: dict[str, str]) -> None:
        api = self.api
        if api.watch_failure is not None:
            code = api.watch_failure
            self._send(code, _status(code, "ServiceUnavailable", "watch refused (test)"))
            return
        start_rv = int(q.get("resourceVersion") or 0)
        timeout = float(q.get("timeoutSeconds") or 300)
        bookmarks = q.get("allowWatchBookmarks") == "true"
        api_version, kind = KINDS.get(resource, ("v1", resource))
        gone: JSON = {
            "type": "ERROR",
            "object": _status(410, "Expired", "too old resource version"),
        }
        stream = _Stream(resource)
        with api._cond:
            # checked and registered at once: from then on the changes it needs are kept
            too_old = 0 < start_rv < api.compacted_rv
            starts = api.cache_starts
            if not too_old and starts:
                cache_start = starts[self.server_index % len(starts)]
                if 0 < start_rv < cache_start:
                    too_old = True
                    message = f"too old resource version: {start_rv} ({cache_start})"
                    gone = {"type": "ERROR", "object": _status(410, "Expired", message)}
            if not too_old:
                if start_rv == 0:
                    start_rv = api.rv
                stream.pos = api.log_base + bisect.bisect_right(
                    api.log, start_rv, key=lambda e: e[0]
                )
                api._streams.add(stream)
                api._cond.notify_all()
        if too_old:
            if api.gone_mode == "http":
                self._send(410, gone["object"])
            else:
                self._start_chunks()
                self._chunk(orjson.dumps(gone) + b"\n")
                self._chunk(b"")
            return
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + (api.bookmark_interval_s or 1e9)
        try:
            self._start_chunks()
            while True:
                with api._cond:
                    while True:
                        now = time.monotonic()
                        if (
                            stream.broken
                            or stream.expired
                            or api.stopping
                            or stream.pos < api.log_base + len(api.log)
                            or now >= deadline
                            or (bookmarks and now >= next_bookmark)
                        ):
                            break
                        api._cond.wait(min(deadline, next_bookmark) - now)
                    batch = [
                        e
                        for e in api.log[stream.pos - api.log_base :]
                        if e[1] == resource
                        and (
                            not namespace
                            or (e[3].get("metadata") or {}).get("namespace") == namespace
                        )
                        and field_match(e[3], q.get("fieldSelector"))
                        and label_match(e[3], q.get("labelSelector"))
                    ]
                    stream.pos = api.log_base + len(api.log)
                    broken, expired, stopping, current_rv = (
                        stream.broken,
                        stream.expired,
                        api.stopping,
                        api.rv,
                    )
                if broken:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if expired:
                    self._chunk(orjson.dumps(gone) + b"\n")
                    self._chunk(b"")
                    return
                if stopping:
                    self._chunk(b"")
                    return
                for _, _, type_, obj in batch:
                    stream.sent.append(type_)
                    self._chunk(orjson.dumps({"type": type_, "object": obj}) + b"\n")
                now = time.monotonic()
                if bookmarks and now >= next_bookmark:
                    mark = {
                        "type": "BOOKMARK",
                        "object": {
                            "apiVersion": api_version,
                            "kind": kind,
                            "metadata": {"resourceVersion": str(current_rv)},
                        },
                    }
                    stream.sent.append("BOOKMARK")
                    self._chunk(orjson.dumps(mark) + b"\n")
                    next_bookmark = now + (api.bookmark_interval_s or 1e9)
                if now >= deadline:
                    self._chunk(b"")
                    return
        except OSError:
            self.close_connection = True
        finally:
            with api._cond:
                api._streams.discard(stream)
                api._cond.notify_all()


# -- object builders -----------------------------------------------------------------------


def node(
    name: str, *, ready: str = "True", zone: str = "", taints: list[JSON] | None = None
) -> JSON:
    labels = {"topology.kubernetes.io/zone": zone} if zone else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady"}]},
    }


def pod(
    name: str,
    *,
    namespace: str = "default",
    node_name: str = "",
    ready: bool = False,
    phase: str = "Running",
    owner: tuple[str, str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> JSON:
    meta: JSON = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = annotations
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner[0],
                "name": owner[1],
                "uid": "o",
                "controller": True,
            }
        ]
    return {
        "metadata": meta,
        "spec": {"nodeName": node_name} if node_name else {},
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def volume_attachment(name: str, node_name: str, pv: str, attached: bool = False) -> JSON:
    return {
        "metadata": {"name": name},
        "spec": {
            "attacher": "fake.csi",
            "nodeName": node_name,
            "source": {"persistentVolumeName": pv},
        },
        "status": {"attached": attached},
    }


def set_ready(obj: JSON, status: str | bool) -> None:
    """Set the Ready condition of a node (``"True"``/``"Unknown"``) or a pod (bool)."""
    value = status if isinstance(status, str) else ("True" if status else "False")
    for c in obj.setdefault("status", {}).setdefault("conditions", []):
        if c.get("type") == "Ready":
            c["status"] = value
            return
    obj["status"]["conditions"].append({"type": "Ready", "status": value})


class Changes:
    """What an informer reports (``on_change``), kept in ``seen``; :meth:`wait_for` wakes on
    each report to re-check its condition, so a test waits for a change without polling.
    An informer updates its cache before it reports, so the condition sees the change."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.seen: list[tuple[str, JSON]] = []

    def __call__(self, kind: str, obj: JSON) -> None:
        with self._cond:
            self.seen.append((kind, obj))
            self._cond.notify_all()

    def attach(self, *informers: Any) -> None:
        """Also hear what ``informers`` report, after their own ``on_change``."""
        for inf in informers:
            own: Callable[[str, JSON], None] | None = inf.on_change

            def both(kind: str, obj: JSON, own: Callable[[str, JSON], None] | None = own) -> None:
                if own is not None:
                    own(kind, obj)
                self(kind, obj)

            inf.on_change = both

    def wait_for(self, cond: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
        """Return once ``cond()`` holds, re-checked after each change reported
        (``timeout_s``: a deadlock guard, not a timing)."""
        with self._cond:
            if not self._cond.wait_for(cond, timeout_s):
                raise AssertionError(f"no change made {what} hold in {timeout_s:.0f} s")
