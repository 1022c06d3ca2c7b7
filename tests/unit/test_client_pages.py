"""Paginated lists, sequential and prefetched, against a real-HTTP fake API server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

import orjson
import pytest

from harness.kube.client import ApiError, Credentials, KubeClient, Unreachable, list_meta
from tests.fakes.api import FakeApiServer, Request, pod
from tests.fakes.clock import STUCK_S, FakeClock


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        for i in range(23):
            server.add("pods", pod(f"p{i:02d}", namespace="ns", node_name=f"w{i % 3}"))
        yield server


def names(pages: Iterator[tuple[list[dict[str, object]], str]]) -> tuple[list[str], set[str]]:
    seen: list[str] = []
    rvs: set[str] = set()
    for items, rv in pages:
        seen.extend(str(i["metadata"]["name"]) for i in items)  # type: ignore[index]
        rvs.add(rv)
    return seen, rvs


def is_list(r: Request) -> bool:
    return r.method == "GET" and "watch" not in r.query


def list_requests(api: FakeApiServer) -> list[dict[str, str]]:
    return [r.query for r in api.requests if is_list(r)]


def test_list_meta_reads_the_head_only_when_metadata_comes_first() -> None:
    body = orjson.dumps(
        {"kind": "PodList", "metadata": {"resourceVersion": "7", "continue": "abc"}, "items": []}
    )
    assert list_meta(body) == {"resourceVersion": "7", "continue": "abc"}
    # Items first (not what the API server writes): an item's metadata must not be taken for
    # the list's; the whole body is decoded instead.
    odd = b'{"items":[{"metadata":{"name":"x"}}],"metadata":{"continue":"c2"}}'
    assert list_meta(odd) == {"continue": "c2"}
    assert list_meta(b'{"items":[]}') == {}


def test_prefetched_pages_match_sequential_ones(api: FakeApiServer) -> None:
    client = api.client()
    seq, seq_rvs = names(client.pages("/api/v1/pods", page_size=5))
    api.requests.clear()
    pre, pre_rvs = names(client.pages("/api/v1/pods", page_size=5, prefetch=True))
    assert pre == seq and len(pre) == 23 and len(set(pre)) == 23
    assert pre_rvs == seq_rvs
    queries = list_requests(api)
    assert len(queries) == 5  # 5+5+5+5+3: every continue token followed once, no extra request
    assert all(q.get("limit") == "5" for q in queries)
    assert "continue" not in queries[0] and all(q.get("continue") for q in queries[1:])


def test_prefetch_asks_for_the_next_page_before_this_one_is_consumed(
    api: FakeApiServer,
) -> None:
    # The pipeline waits for room on a manual fake clock. Once it has asked for the pages
    # it may and waits again, nothing but the consumer taking a page gives it room.
    clock = FakeClock(manual=True)
    pages = api.client(clock=clock).pages("/api/v1/pods", page_size=5, prefetch=True)
    depth = KubeClient.PIPELINE_DEPTH
    for taken in (1, 2):
        next(pages)
        api.wait_for_requests(taken + depth, is_list)  # asked ahead...
        clock.block_until_waiting(1)  # ...and waits for room: no further
        # page N handed out, the next PIPELINE_DEPTH pages asked for
        assert len(list_requests(api)) == taken + depth
    assert len(list(pages)) == 3  # 5 pages in all (23 pods), no request after the last
    assert len(list_requests(api)) == 5
    assert clock.monotonic() == FakeClock().monotonic()  # it waited for room, not for time


def test_an_error_reaches_the_consumer_and_closing_stops_the_helper(api: FakeApiServer) -> None:
    api.list_failure = 403
    with pytest.raises(ApiError) as err:
        list(api.client().pages("/api/v1/pods", page_size=5, prefetch=True))
    assert err.value.status == 403
    api.list_failure = None
    pages = api.client().pages("/api/v1/pods", page_size=5, prefetch=True)
    next(pages)
    helpers = [t for t in threading.enumerate() if t.name == "list /api/v1/pods"]
    assert helpers
    pages.close()
    for helper in helpers:
        helper.join(STUCK_S)
        assert not helper.is_alive(), "the prefetch thread outlived its consumer"


class _StreamingLists:
    """A loopback HTTP server that answers a paginated pod list the way the API server
    streams one: the list's metadata (with the continue token) first, the items later. Page
    N's items are held back until page N+1 has been asked for (at most ``hold_s``, by default
    a deadlock guard, not a timing), so a client that waits for a whole page before asking
    for the next one shows up as a hold that timed out."""

    def __init__(
        self, pages: int, per_page: int, hold_s: float = STUCK_S, fail_page: int = 0
    ) -> None:
        self.pages, self.per_page, self.hold_s, self.fail_page = pages, per_page, hold_s, fail_page
        self.asked = [threading.Event() for _ in range(pages + 1)]
        self.held_until_next: list[bool] = []
        self.broken_page = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                q = dict(parse_qsl(urlsplit(self.path).query))
                n = int(q.get("continue") or 0)
                server.asked[n].set()
                if n == server.fail_page and n:
                    body = orjson.dumps({"kind": "Status", "code": 410, "reason": "Expired"})
                    self.send_response(410)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                last = n == server.pages - 1
                md = {"resourceVersion": "77", **({} if last else {"continue": str(n + 1)})}
                head = b'{"kind":"PodList","metadata":' + orjson.dumps(md) + b',"items":['
                items = b",".join(
                    orjson.dumps({"metadata": {"name": f"p{n}-{i}", "namespace": "ns"}})
                    for i in range(server.per_page)
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._chunk(head + b" " * 8192)  # past the client's first read
                if not last:
                    server.held_until_next.append(server.asked[n + 1].wait(server.hold_s))
                if n == server.broken_page and n:
                    self.connection.shutdown(socket.SHUT_RDWR)  # cut mid-body
                    return
                self._chunk(items + b"]}")
                self.wfile.write(b"0\r\n\r\n")

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> KubeClient:
        self.thread.start()
        return KubeClient(Credentials(server=f"http://127.0.0.1:{self.httpd.server_address[1]}"))

    def __exit__(self, *exc: object) -> None:
        for e in self.asked:
            e.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def test_pipelined_pages_ask_for_the_next_page_while_this_one_streams() -> None:
    server = _StreamingLists(pages=6, per_page=4)
    with server as client:
        got, rvs = names(client.pages("/api/v1/pods", page_size=4, prefetch=True))
    assert got == [f"p{n}-{i}" for n in range(6) for i in range(4)]
    assert rvs == {"77"}
    # every page but the last was still streaming when the next one was asked for
    assert server.held_until_next == [True] * 5


def test_sequential_pages_wait_for_the_whole_page() -> None:
    # The counter-test: without the pipeline each hold times out, so the test above would
    # notice a client that waits for a whole page first.
    server = _StreamingLists(pages=3, per_page=2, hold_s=0.2)
    with server as client:
        got, _ = names(client.pages("/api/v1/pods", page_size=2))
    assert len(got) == 6
    assert server.held_until_next == [False, False]


def test_an_error_or_a_cut_stream_in_the_pipeline_reaches_the_consumer_in_order() -> None:
    server = _StreamingLists(pages=6, per_page=3, fail_page=3)
    with server as client:
        pages = client.pages("/api/v1/pods", page_size=3, prefetch=True)
        first = [next(pages)[0][0]["metadata"]["name"] for _ in range(3)]
        assert first == ["p0-0", "p1-0", "p2-0"]
        with pytest.raises(ApiError) as err:
            next(pages)
        assert err.value.status == 410
    server = _StreamingLists(pages=4, per_page=3)
    server.broken_page = 2
    with server as client:
        pages = client.pages("/api/v1/pods", page_size=3, prefetch=True)
        assert [next(pages)[0][0]["metadata"]["name"] for _ in range(2)] == ["p0-0", "p1-0"]
        with pytest.raises(Unreachable):
            next(pages)


class _Chunks:
    """A response body handed out in the chunks given, then b"" (what `read(n)` returns)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    def read(self, n: int) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


def test_a_prefetched_page_is_read_into_a_map_of_its_own_and_returned_when_dropped() -> None:
    import gc
    import weakref

    from harness.kube import client as client_mod

    head = b'{"metadata":{"continue":"c"},"items":['
    # more than the map's first size: it grows as the chunks come
    item = b'{"metadata":{"name":"' + b"x" * 1000 + b'"}},'
    count = (client_mod._MAP_INITIAL // len(item)) * 2 + 3
    chunks = [item * 1000] * (count // 1000) + [item * (count % 1000) + b'{"x":1}]}']
    view = client_mod._read_body(_Chunks(chunks), head)
    expected = head + b"".join(chunks)
    assert isinstance(view, memoryview) and len(view) == len(expected) > client_mod._MAP_INITIAL
    assert view == expected
    assert list_meta(view) == {"continue": "c"}
    assert len(orjson.loads(view)["items"]) == count + 1
    owner = weakref.ref(view.obj)  # the map
    del view
    gc.collect()
    assert owner() is None  # unmapped once the page is dropped
