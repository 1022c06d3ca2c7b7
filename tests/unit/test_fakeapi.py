"""The fake API server's bounded history (``tests/fakes/api.py``): what a long simulated run
relies on to keep its memory flat, with the semantics of a real API server's compaction."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from tests.fakes.api import FakeApiServer, _Stream, node, pod


@pytest.fixture
def bounded() -> Iterator[FakeApiServer]:
    with FakeApiServer(max_history=3, max_requests=2) as server:
        yield server


def get(api: FakeApiServer, path: str) -> tuple[int, list[Any]]:
    """GET ``path``; the status and the body's JSON lines (a watch's events)."""
    conn = http.client.HTTPConnection(urlsplit(api.url).netloc, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, [orjson.loads(line) for line in resp.read().splitlines() if line]
    finally:
        conn.close()


def watch(api: FakeApiServer, rv: int) -> tuple[int, list[Any]]:
    return get(api, f"/api/v1/nodes?watch=1&resourceVersion={rv}&timeoutSeconds=0.2")


def test_bounded_history_resumes_watches_within_it_and_refuses_older_ones(
    bounded: FakeApiServer,
) -> None:
    for i in range(10):
        bounded.add("nodes", node(f"n{i}"))  # resourceVersions 1001 to 1010
    assert [e[0] for e in bounded.log] == [1008, 1009, 1010]
    assert bounded.log_base == 7 and bounded.compacted_rv == 1007
    status, events = watch(bounded, 1007)
    assert status == 200
    assert [e["object"]["metadata"]["name"] for e in events] == ["n7", "n8", "n9"]
    status, events = watch(bounded, 1006)  # n6 (1007) is forgotten: too old, as after compact()
    assert status == 200 and [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410
    bounded.gone_mode = "http"
    assert watch(bounded, 1006)[0] == 410
    assert len(bounded.requests) == 2  # the latest ones
    assert [r.query["resourceVersion"] for r in bounded.requests] == ["1006", "1006"]


def test_an_open_stream_keeps_the_changes_it_has_not_sent(bounded: FakeApiServer) -> None:
    lagging = _Stream("nodes", pos=bounded.log_base)
    bounded._streams.add(lagging)  # registered, not yet woken up to read
    for i in range(6):
        bounded.add("nodes", node(f"n{i}"))
    assert len(bounded.log) == 6 and bounded.log_base == 0
    lagging.pos = 4  # it has sent the first four
    bounded.add("nodes", node("n6"))
    assert bounded.log_base == 4 and [e[0] for e in bounded.log] == [1005, 1006, 1007]
    bounded._streams.discard(lagging)
    bounded.add("nodes", node("n7"))
    assert bounded.log_base == 5 and bounded.compacted_rv == 1005


def test_unbounded_by_default_until_compacted(api: FakeApiServer) -> None:
    for i in range(5):
        api.add("nodes", node(f"n{i}"))
    assert len(api.log) == 5 and api.log_base == 0
    api.compact()  # what nothing may resume from any more is dropped
    assert api.log == [] and api.log_base == 5 and api.compacted_rv == api.rv == 1005
    api.add("nodes", node("n5"))
    status, events = watch(api, 1005)
    assert status == 200 and [e["object"]["metadata"]["name"] for e in events] == ["n5"]


def test_list_pages_are_kept_only_while_pages_are_left(api: FakeApiServer) -> None:
    for i in range(5):
        api.add("pods", pod(f"p{i}"))
    status, [whole] = get(api, "/api/v1/pods")
    assert status == 200 and len(whole["items"]) == 5 and api._snapshots == {}
    names: list[str] = []
    path = "/api/v1/pods?limit=2"
    while True:
        status, [page] = get(api, path)
        assert status == 200
        names += [p["metadata"]["name"] for p in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
        path = f"/api/v1/pods?limit=2&continue={token}"
    assert names == [f"p{i}" for i in range(5)] and api._snapshots == {}
    status, [expired] = get(api, path)  # the last page's token once more: gone
    assert status == 410 and expired["reason"] == "Expired"
