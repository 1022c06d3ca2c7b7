"""A slim Kubernetes REST client that speaks raw JSON.

Model objects are slow and heavy at volume (see DESIGN.md: 26 s and 3.4 GB to list 30,000
pods with the official client's models, about 2 s and under 100 MB with paginated raw
JSON), so this client returns plain dicts and lets callers project the fields they need.
It reads a kubeconfig (client certificates, bearer tokens, CA bundles; TLS verification on
unless the kubeconfig explicitly turns it off) and keeps one connection pool.

Certificates and keys embedded in a kubeconfig (``*-data``) stay in memory. Python's
``ssl`` can load a client certificate and key only from files, so the client writes them to
a private temporary directory (mode 0700, files 0600) just for that call and deletes them
before its constructor returns: no key is left in ``/tmp``, whether the client is closed,
the process exits or it is killed afterwards.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import logging
import mmap
import os
import queue
import re
import ssl
import threading
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Literal, NoReturn
from urllib.parse import urlencode

import orjson
import urllib3

from harness.clock import SYSTEM_CLOCK, Clock
from harness.kube.apierrors import (
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
    Unreachable,
    error_for,
    raise_status,
)
from harness.kube.credentials import Auth
from harness.kube.kubeconfig import Credentials, load_client_cert, load_kubeconfig

__all__ = [  # the errors and credentials are declared apart and re-exported here
    "JSON",
    "ApiError",
    "AuthStats",
    "Buffer",
    "Conflict",
    "Credentials",
    "Forbidden",
    "Gone",
    "KubeClient",
    "NotFound",
    "PatchType",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "Unreachable",
    "WatchEvent",
    "list_meta",
    "load_kubeconfig",
]

log = logging.getLogger(__name__)

JSON = dict[str, Any]
#: a response body as read: bytes, or a view of the memory map a list page was read into
Buffer = bytes | bytearray | memoryview
PatchType = Literal["merge", "strategic", "json", "apply"]
_PATCH_CT: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


_LIST_META = re.compile(rb'"metadata":(\{[^{}]*\})')


def _head_meta(head: bytes) -> JSON | None:
    """The ListMeta in the first bytes of a list response, if it comes before the items
    (the API server writes ``metadata`` first); None when they do not show it."""
    m = _LIST_META.search(head)
    items_at = head.find(b'"items":')
    if m is None or 0 <= items_at < m.start():
        return None
    md = orjson.loads(m.group(1))
    return md if isinstance(md, dict) else {}


def list_meta(raw: Buffer) -> JSON:
    """The ListMeta of a raw list response (resourceVersion, continue) without decoding the
    items. Anything unexpected falls back to decoding the whole body."""
    md = _head_meta(bytes(raw[:4096]))
    if md is None:
        md = orjson.loads(raw).get("metadata") or {}
    return md if isinstance(md, dict) else {}


@dataclass(frozen=True)
class WatchEvent:
    """One watch event, stamped the moment its line was read."""

    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: JSON
    mono: float
    wall: float


def _page_params(page_size: int, cont: str | None, params: Mapping[str, Any]) -> JSON:
    """One page's query: a continue token carries the list's resourceVersion, and the API
    server refuses ``resourceVersion``/``resourceVersionMatch`` beside it."""
    if cont:
        params = {k: v for k, v in params.items() if k not in _FIRST_PAGE_ONLY}
    return {"limit": page_size, "continue": cont, **params}


_FIRST_PAGE_ONLY = frozenset({"resourceVersion", "resourceVersionMatch"})

#: how much of a list response is read to find its metadata before giving up on the head
_HEAD_LIMIT = 65536
#: how much of the rest of a list page is read at a time
_READ_CHUNK = 65536
#: the first size of a page's map (only what is written of it becomes resident)
_MAP_INITIAL = 8 << 20


@dataclass
class _Head:
    data: bytes
    meta: JSON | None  # the list's metadata, None when the head did not show it
    complete: bool  # the whole body has been read


def _read_head(resp: Any) -> _Head:
    """Read the start of a list response, just far enough to see the list's metadata."""
    data = b""
    while len(data) < _HEAD_LIMIT:
        try:
            chunk = resp.read(4096)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            resp.release_conn()
            raise Unreachable(f"list: stream broken: {exc}") from None
        if not chunk:
            resp.release_conn()
            return _Head(data, None, True)
        data += chunk
        meta = _head_meta(data)
        if meta is not None:
            return _Head(data, meta, False)
        if b'"items":' in data:  # items first (not what the API server writes): read it all
            break
    return _Head(data, None, False)


def _read_body(resp: Any, head: bytes) -> memoryview:
    """The rest of a list page after its ``head``, read a chunk at a time into an anonymous
    memory map (a view of the body, which unmaps it once the last reference to it is gone).

    Reading the rest whole and adding it to the head held three copies of a 3 MB page at
    once (the chunks read, their join, head + rest), in each of the pipeline's readers; and
    the C allocator kept what they freed: after the first page freed, it serves blocks that
    size from its per-thread heaps, which it does not give back. A map is its own: what is
    written becomes resident, and all of it is returned when the page is dropped. At 30,000
    pods the Observer's sync peaked 6-10 MB higher (bench/README.md, "Observer").
    """
    # private: a shared anonymous map (the default) cannot grow (resize leaves it short)
    body = mmap.mmap(-1, max(_MAP_INITIAL, 2 * len(head)), flags=mmap.MAP_PRIVATE)
    body.write(head)
    while chunk := resp.read(_READ_CHUNK):
        end = body.tell() + len(chunk)
        if end > len(body):
            body.resize(max(end, 2 * len(body)))
        body.write(chunk)
    return memoryview(body)[: body.tell()]


class _Page:
    """One page of a pipelined list: filled by a reader thread, taken by the consumer."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._data: Buffer = b""
        self._error: BaseException | None = None

    def done(self, data: Buffer) -> None:
        self._data = data
        self._ready.set()

    def fail(self, exc: BaseException) -> None:
        self._error = exc
        self._ready.set()

    def read_rest(self, resp: Any, head: bytes, path: str) -> None:
        try:
            self.done(_read_body(resp, head))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self.fail(Unreachable(f"GET {path}: stream broken: {exc}"))
        except BaseException as exc:  # noqa: BLE001 (handed to the consumer, raised there)
            self.fail(exc)
        finally:
            resp.release_conn()

    def wait(self) -> Buffer:
        """The page's body once read; the error that stopped it is raised here."""
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self._data


class AuthStats:
    """How often a 401 made the client fetch its credential again (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.retries = 0

    def count(self) -> None:
        with self._lock:
            self.retries += 1


class KubeClient:
    """Raw-JSON access to one API server."""

    def __init__(
        self,
        creds: Credentials,
        *,
        timeout_s: float = 30.0,
        maxsize: int = 8,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """``clock`` stamps watch events, and the pipelined list waits on it for room (a
        test's fake clock sees it wait); request timeouts are the sockets' own, real."""
        self.creds = creds
        self.clock = clock
        self.server = creds.server
        self.timeout_s = timeout_s
        self.maxsize = maxsize
        self._headers = {"Accept": "application/json", "User-Agent": "powercut"}
        if creds.token:
            scheme = "" if creds.token.startswith("Basic ") else "Bearer "
            self._headers["Authorization"] = f"{scheme}{creds.token}"
        #: shared with clones: 401s answered by fetching the credential again
        self.auth_stats = AuthStats()
        self._identity: list[str] = []  # who the server says we are, once asked (a 403)
        self._tls_generation = -1
        self._ssl_context = self._tls_context(None)
        self._pool = self._new_pool(maxsize)
        if creds.auth is not None:
            self._auth()  # a credential that cannot be had fails here, before any request

    def _tls_context(self, auth: Auth | None) -> ssl.SSLContext:
        creds = self.creds
        ca_data: str | bytes | None = None
        if creds.ca_data is not None:
            # PEM as text; anything else is handed over as DER
            pem = creds.ca_data.lstrip().startswith(b"-----")
            ca_data = creds.ca_data.decode("ascii", errors="replace") if pem else creds.ca_data
        ctx = ssl.create_default_context(cafile=creds.ca_file, cadata=ca_data)
        if creds.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if auth is not None and auth.cert_pem is not None:  # from an exec plugin
            load_client_cert(
                ctx,
                replace(
                    creds,
                    cert_file=None,
                    key_file=None,
                    cert_data=auth.cert_pem,
                    key_data=auth.key_pem,
                ),
            )
        else:
            load_client_cert(ctx, creds)
        return ctx

    def _new_pool(self, maxsize: int) -> urllib3.PoolManager:
        kw: dict[str, Any] = {"num_pools": 4, "maxsize": maxsize, "retries": False}
        kw["ssl_context"] = self._ssl_context
        if self.creds.tls_server_name:
            kw["server_hostname"] = self.creds.tls_server_name
            kw["assert_hostname"] = self.creds.tls_server_name
        if self.creds.proxy_url:
            return urllib3.ProxyManager(self.creds.proxy_url, **kw)
        return urllib3.PoolManager(**kw)

    def _auth(self) -> dict[str, str]:
        """The headers of the current credential (fetched again when it lapsed); a new
        client certificate from the plugin gives the client a new connection pool."""
        source = self.creds.auth
        if source is None:
            return self._headers
        auth = source.current()
        if auth.cert_pem is not None and auth.generation != self._tls_generation:
            self._ssl_context = self._tls_context(auth)
            self._pool = self._new_pool(self.maxsize)  # requests in flight finish on the old one
            self._tls_generation = auth.generation
        if auth.header is None:
            return self._headers
        return {**self._headers, "Authorization": auth.header}

    def _unauthorized(self, method: str, path: str, attempt: int) -> bool:
        """A 401: True when the credential was dropped and the request may be sent once
        more (a changing credential, first refusal); counted in ``auth_stats``."""
        if self.creds.auth is None or attempt > 0:
            return False
        self.creds.auth.invalidate()
        self.auth_stats.count()
        log.info(
            "%s %s: 401 Unauthorized: fetching %s's credential again and retrying once",
            method,
            path,
            self.creds.auth.describe,
        )
        return True

    def identity(self) -> str:
        """Who the API server says these credentials are (a SelfSubjectReview), for a 403's
        message; what went wrong when it cannot tell."""
        if self._identity:
            return self._identity[0]
        try:
            review = self.request(
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                timeout_s=min(self.timeout_s, 10.0),
            )
        except (ApiError, Unreachable) as exc:
            return f"(unknown: the SelfSubjectReview failed: {exc})"
        info = (review.get("status") or {}).get("userInfo") or {}
        groups = ", ".join(info.get("groups") or []) or "none"
        who = f"{info.get('username', '?')!r} (groups: {groups})"
        self._identity.append(who)
        return who

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str], context: str | None = None, **kw: Any
    ) -> KubeClient:
        return cls(load_kubeconfig(path, context), **kw)

    def clone(self, *, maxsize: int = 2, clock: Clock | None = None) -> KubeClient:
        """Same server, credentials and TLS context, but its own connection pool (for
        example one per watch thread, so no stream shares a connection); the same clock
        unless given."""
        other = copy.copy(self)
        if clock is not None:
            other.clock = clock
        other._headers = dict(self._headers)
        other.maxsize = maxsize
        other._pool = other._new_pool(maxsize)
        return other

    def close(self) -> None:
        self._pool.clear()

    # -- plumbing ---------------------------------------------------------------------------

    def _url(self, path: str, params: Mapping[str, Any] | None) -> str:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        return self.server + path + (("?" + urlencode(query)) if query else "")

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout_s: float | None = None,
    ) -> JSON:
        data = self.request_raw(
            method, path, body=body, params=params, content_type=content_type, timeout_s=timeout_s
        )
        if not data:
            return {}
        try:
            payload: JSON = orjson.loads(data)
        except orjson.JSONDecodeError:  # /readyz, /healthz and friends answer plain text
            payload = {"text": data.decode(errors="replace")}
        return payload

    def request_raw(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout_s: float | None = None,
    ) -> bytes:
        """The response body undecoded; an error status raises :class:`ApiError`."""
        headers: dict[str, str] = {}
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            headers["Content-Type"] = content_type
        resp = self._open(method, path, params, body=data, headers=headers, timeout_s=timeout_s)
        try:
            return bytes(resp.read())
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unreachable(
                f"{method} {path}: API server {self.server} unreachable: {exc}"
            ) from None
        finally:
            resp.release_conn()

    # -- verbs ------------------------------------------------------------------------------

    def get(self, path: str, **params: Any) -> JSON:
        return self.request("GET", path, params=params)

    def get_or_none(self, path: str) -> JSON | None:
        try:
            return self.get(path)
        except NotFound:
            return None

    def list(self, path: str, *, page_size: int = 500, **params: Any) -> tuple[list[JSON], str]:
        """All items of a collection, paginated; returns (items, resourceVersion)."""
        items: list[JSON] = []
        rv = ""
        for page, page_rv in self.pages(path, page_size=page_size, **params):
            items.extend(page)
            rv = page_rv
        return items, rv

    def pages(
        self,
        path: str,
        *,
        page_size: int = 500,
        prefetch: bool = False,
        decode: Callable[[Buffer], Any] = orjson.loads,
        **params: Any,
    ) -> Generator[tuple[builtins.list[JSON], str], None, None]:
        """A collection page by page, as (items, resourceVersion of the list): callers that
        keep only a projection can drop each page before the next one is decoded.

        ``decode`` turns a raw page into a list object (``orjson.loads`` by default; a caller
        that needs a few fields can pass a decoder that skips the rest). It is given bytes,
        or with ``prefetch`` a memoryview of the page (read into a memory map of its own,
        returned as soon as the page is dropped): it must not keep it.

        ``prefetch``: pages are asked for in a pipeline. The API server writes a list's
        metadata, continue token included, before its items and streams the items after it,
        so the next page is asked for as soon as the first bytes of this one have arrived:
        the server encodes up to ``PIPELINE_DEPTH`` pages at once (on as many cores) while
        the caller decodes and projects the one it holds. At most that many raw pages wait
        besides the one being decoded. A server that does not stream simply fills the
        pipeline more slowly.
        """
        if prefetch:
            yield from self._pipelined_pages(path, page_size, params, decode)
            return
        cont: str | None = None
        while True:
            raw = self.request_raw("GET", path, params=_page_params(page_size, cont, params))
            page = decode(raw)
            del raw
            md = page.get("metadata") or {}
            cont = md.get("continue")
            yield page.get("items") or [], str(md.get("resourceVersion", ""))
            if not cont:
                return

    #: pages asked for and not yet handed to the caller, in the pipelined list
    PIPELINE_DEPTH = 2

    def _pipelined_pages(
        self,
        path: str,
        page_size: int,
        params: Mapping[str, Any],
        decode: Callable[[Buffer], Any],
    ) -> Iterator[tuple[builtins.list[JSON], str]]:
        slots: queue.Queue[_Page | None] = queue.Queue()
        # Room for PIPELINE_DEPTH pages asked for and not yet taken: the asker waits on it
        # (through the clock, so that a test sees it wait), the consumer and a stop wake it.
        room = threading.Condition()
        free = self.PIPELINE_DEPTH
        stop = threading.Event()
        # A few long-lived reader threads rather than one per page: the C allocator keeps
        # an arena per thread that allocates, and every arena keeps its own high-water mark.
        readers = ThreadPoolExecutor(self.PIPELINE_DEPTH, thread_name_prefix=f"list {path}:")

        def take_room() -> bool:
            nonlocal free
            with room:
                while free == 0 and not stop.is_set():
                    self.clock.wait(room, 1.0)
                if stop.is_set():
                    return False
                free -= 1
                return True

        def ask() -> None:
            cont: str | None = None
            try:
                while take_room():
                    page = _Page()
                    slots.put(page)
                    try:
                        resp = self._open("GET", path, _page_params(page_size, cont, params))
                        head = _read_head(resp)
                    except BaseException as exc:  # noqa: BLE001 (handed to the consumer)
                        page.fail(exc)
                        return
                    if head.complete:
                        page.done(head.data)
                    else:
                        readers.submit(page.read_rest, resp, head.data, path)
                    # no metadata in the head: the whole page tells
                    meta = head.meta if head.meta is not None else list_meta(page.wait())
                    cont = meta.get("continue")
                    del page, head  # the consumer holds the only reference to the page now
                    if not cont:
                        return
            except BaseException:  # noqa: BLE001 (the page that failed carries the error)
                return
            finally:
                slots.put(None)
                readers.shutdown(wait=False)  # the readers finish the pages they hold

        worker = threading.Thread(target=ask, name=f"list {path}", daemon=True)
        worker.start()
        try:
            while True:
                slot = slots.get()
                if slot is None:
                    return
                raw = slot.wait()
                del slot  # the raw page lives on in `raw` only, and only until it is decoded
                with room:
                    free += 1
                    room.notify()
                page = decode(raw)
                del raw
                md = page.get("metadata") or {}
                yield page.get("items") or [], str(md.get("resourceVersion", ""))
        finally:
            stop.set()
            with room:
                room.notify_all()

    def _open(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Send a request and return the response with its body unread; an error status
        raises :class:`ApiError` (its body read), an unreachable server ``Unreachable``.
        A 401 with a changing credential is sent once more with the credential fetched
        anew."""
        attempt = 0
        while True:
            try:
                resp = self._pool.request(
                    method,
                    self._url(path, params),
                    body=body,
                    headers={**self._auth(), **(headers or {})},
                    preload_content=False,
                    timeout=urllib3.Timeout(total=timeout_s or self.timeout_s),
                )
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise Unreachable(
                    f"{method} {path}: API server {self.server} unreachable: {exc}"
                ) from None
            if resp.status < 400:
                return resp
            try:
                data = resp.read()
            except (urllib3.exceptions.HTTPError, OSError):
                data = b""
            finally:
                resp.release_conn()
            if resp.status == 401 and self._unauthorized(method, path, attempt):
                attempt += 1
                continue
            self._raise(resp.status, resp.reason, data, method, path)

    def _raise(
        self, status: int, reason: str | None, data: bytes, method: str, path: str
    ) -> NoReturn:
        """Raise the error of an answer; a 401 and a 403 name the credentials, a 403 also
        who the server took them for."""
        identity = ""
        if status == 403 and not path.endswith("/selfsubjectreviews"):
            identity = self.identity()
        raise_status(status, reason, data, method, path, who=self.creds.describe, identity=identity)

    def create(self, path: str, body: JSON, **params: Any) -> JSON:
        return self.request("POST", path, body=body, params=params)

    def replace(self, path: str, body: JSON) -> JSON:
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: Any, patch_type: PatchType = "merge", **params: Any) -> JSON:
        return self.request(
            "PATCH", path, body=body, params=params, content_type=_PATCH_CT[patch_type]
        )

    def delete(
        self, path: str, *, grace_period_s: int | None = None, body: JSON | None = None
    ) -> JSON:
        opts: JSON = dict(body or {})
        if grace_period_s is not None:
            opts["gracePeriodSeconds"] = grace_period_s
        return self.request("DELETE", path, body=opts or None)

    def apply(self, path: str, body: JSON, *, field_manager: str = "powercut") -> JSON:
        """Server-side apply of one object at its own path."""
        return self.patch(path, body, "apply", fieldManager=field_manager, force="true")

    def _open_watch(self, path: str, query: Mapping[str, Any], timeout_s: int) -> Any:
        """Open a watch's stream; an error answer raises (a 401 with a changing credential
        is tried once more with the credential fetched anew)."""
        attempt = 0
        while True:
            try:
                resp = self._pool.request(
                    "GET",
                    self._url(path, query),
                    headers=self._auth(),
                    preload_content=False,
                    timeout=urllib3.Timeout(connect=self.timeout_s, read=timeout_s + 30),
                )
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise Unreachable(
                    f"WATCH {path}: API server {self.server} unreachable: {exc}"
                ) from None
            if resp.status < 400:
                return resp
            try:
                data = resp.read()
            except (urllib3.exceptions.HTTPError, OSError):
                data = b""
            finally:
                resp.release_conn()
            if resp.status == 401 and self._unauthorized("WATCH", path, attempt):
                attempt += 1
                continue
            self._raise(resp.status, resp.reason, data, "WATCH", path)

    def watch(
        self,
        path: str,
        *,
        resource_version: str,
        timeout_s: int = 300,
        bookmarks: bool = True,
        on_open: Callable[[Callable[[], None]], None] | None = None,
        decode: Callable[[bytes], Any] = orjson.loads,
        **params: Any,
    ) -> Iterator[WatchEvent]:
        """Stream watch events; each is stamped (monotonic, wall) when its line is read.

        Ends when the server closes the stream (after ``timeout_s``). An in-stream 410 raises
        ``Gone``: the caller must re-list. ``on_open`` receives a ``cancel()`` callable once
        the API server accepted the watch (2xx: the stream is live from then on); calling it
        from another thread ends the stream promptly.
        ``decode`` turns one line into an event (``orjson.loads`` by default; it must keep
        ``type`` and, for an ERROR event, the Status's ``code``, ``reason`` and ``message``).
        """
        query = {
            "watch": "1",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_s,
            "allowWatchBookmarks": "true" if bookmarks else None,
            **params,
        }
        resp = self._open_watch(path, query, timeout_s)
        try:
            if on_open is not None:

                def cancel() -> None:
                    # ValueError/RuntimeError: already released or closed, nothing to
                    # interrupt.
                    with contextlib.suppress(ValueError, RuntimeError, OSError):
                        resp.shutdown()

                on_open(cancel)
            buf = b""
            try:
                for chunk in resp.stream(65536):
                    buf += chunk
                    while True:
                        nl = buf.find(b"\n")
                        if nl < 0:
                            break
                        line, buf = buf[:nl], buf[nl + 1 :]
                        if not line.strip():
                            continue
                        mono, wall = self.clock.monotonic(), self.clock.time()
                        try:
                            ev = decode(line)
                        except orjson.JSONDecodeError as exc:
                            # A stream cut mid-line (or cancelled under TLS) is a broken
                            # stream, like a reset: the caller resumes or re-lists.
                            msg = f"WATCH {path}: undecodable line, stream broken: {exc}"
                            raise Unreachable(msg) from None
                        obj = ev.get("object") or {}
                        if ev.get("type") == "ERROR":
                            code = int(obj.get("code", 500))
                            raise error_for(code)(
                                code,
                                str(obj.get("reason", "")),
                                str(obj.get("message", "")),
                                "WATCH",
                                path,
                            )
                        yield WatchEvent(str(ev.get("type")), obj, mono, wall)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise Unreachable(f"WATCH {path}: stream broken: {exc}") from None
        finally:
            resp.release_conn()
