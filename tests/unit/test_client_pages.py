"""Paginated lists, sequential and prefetched, against a real-HTTP fake API server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import orjson
import pytest

from harness.kube.client import ApiError, list_meta
from tests.fakeapi import FakeApiServer, pod


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


def list_requests(api: FakeApiServer) -> list[dict[str, str]]:
    return [r.query for r in api.requests if r.method == "GET" and "watch" not in r.query]


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
    pages = api.client().pages("/api/v1/pods", page_size=5, prefetch=True)
    next(pages)
    deadline = time.monotonic() + 5
    while len(list_requests(api)) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    # page 1 handed out, page 2 waiting undecoded, page 3 requested; no further
    time.sleep(0.2)
    assert len(list_requests(api)) == 3
    pages.close()


def test_an_error_reaches_the_consumer_and_closing_stops_the_helper(api: FakeApiServer) -> None:
    api.list_failure = 403
    with pytest.raises(ApiError) as err:
        list(api.client().pages("/api/v1/pods", page_size=5, prefetch=True))
    assert err.value.status == 403
    api.list_failure = None
    pages = api.client().pages("/api/v1/pods", page_size=5, prefetch=True)
    next(pages)
    pages.close()
    deadline = time.monotonic() + 5
    while any(t.name == "list /api/v1/pods" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the prefetch thread outlived its consumer"
        time.sleep(0.02)
