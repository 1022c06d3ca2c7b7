"""The results store's page: every run of every target with its verdict, served read-only."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.report.store_page import make_server, read_store, render_index


def line(run_id: str, verdict: str, statuses: list[str], **extra: object) -> str:
    doc = {
        "schema_version": 1,
        "run_id": run_id,
        "target": "x",
        "started": "2026-11-26T15:43:00Z",
        "finished": "2026-11-26T15:50:00Z",
        "verdict": verdict,
        "scenarios": [{"name": f"s{i}", "status": s} for i, s in enumerate(statuses)],
        **extra,
    }
    return json.dumps(doc) + "\n"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    a = tmp_path / "rack-a"
    (a / "runs" / "20261125T220000Z-aaaaaa").mkdir(parents=True)
    (a / "runs" / "20261125T220000Z-aaaaaa" / "report.html").write_text("<p>old</p>")
    (a / "history.jsonl").write_text(
        line("20261125T220000Z-aaaaaa", "passed", ["passed", "passed"])
        + line("20261126T220000Z-bbbbbb", "failed", ["passed", "failed"], future_key=1)
        + "not json\n"
        + json.dumps({"schema_version": 2, "run_id": "later"})
        + "\n"
    )
    b = tmp_path / "rack-b"
    b.mkdir()
    (b / "history.jsonl").write_text(line("20261126T010203Z-cccccc", "broken", ["broken"]))
    (tmp_path / "not-a-target").mkdir()
    return tmp_path


def test_every_run_of_every_target(store: Path) -> None:
    rows = read_store(store)
    assert [t.target for t in rows] == ["rack-a", "rack-b"]
    a = rows[0]
    assert [r.run_id for r in a.runs] == ["20261126T220000Z-bbbbbb", "20261125T220000Z-aaaaaa"]
    assert a.runs[0].verdict == "failed" and a.runs[0].counts == {"passed": 1, "failed": 1}
    assert a.runs[1].report == "rack-a/runs/20261125T220000Z-aaaaaa/report.html"
    assert a.runs[0].report is None  # no run directory
    assert a.newer == 1
    assert len(a.problems) == 1 and "history.jsonl:3" in a.problems[0]
    page = render_index(store)
    assert "rack-a" in page and "rack-b" in page and "broken" in page
    assert "unreadable history line" in page and "history.jsonl:3" in page


def test_served_read_only(store: Path) -> None:
    srv = make_server(store, "127.0.0.1", 0)
    port = srv.server_address[1]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(base + "/", timeout=5) as r:  # noqa: S310
            assert "20261126T010203Z-cccccc" in r.read().decode()
        with urllib.request.urlopen(  # noqa: S310
            base + "/rack-a/runs/20261125T220000Z-aaaaaa/report.html", timeout=5
        ) as r:
            assert r.read() == b"<p>old</p>"
        req = urllib.request.Request(base + "/rack-a/history.jsonl", data=b"x", method="PUT")  # noqa: S310
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)  # noqa: S310
        assert err.value.code == 501
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/../../etc/passwd", timeout=5)  # noqa: S310
        assert err.value.code == 404
    finally:
        srv.shutdown()
        srv.server_close()


def test_empty_store(tmp_path: Path) -> None:
    assert "No run yet" in render_index(tmp_path)
