"""The page's /metrics: every target's last run and its lock, in the Prometheus text format,
and retention applied to a target's history and run directories."""

from __future__ import annotations

import datetime as dt
import json
import threading
import urllib.request
from pathlib import Path

from harness.report import history as hist
from harness.report.metrics import render_metrics
from harness.report.store_page import make_server, render_index


def line(run_id: str, started: str, **extra: object) -> str:
    doc = {
        "schema_version": 1,
        "run_id": run_id,
        "target": "x",
        "started": started,
        "finished": started.replace("22:00", "22:30"),
        "verdict": "failed",
        "gates": [{"name": "g1", "passed": True}, {"name": "g2", "passed": False}],
        "scenarios": [
            {
                "name": "power loss",
                "status": "failed",
                "phases": {"node NotReady": {"value_s": 50.0, "budget_s": 40.0}},
            },
            {"name": "drain", "status": "passed", "phases": {"drain": {"value_s": 3.5}}},
        ],
        **extra,
    }
    return json.dumps(doc) + "\n"


def samples(text: str) -> dict[str, float]:
    out = {}
    for ln in text.splitlines():
        if ln and not ln.startswith("#"):
            name, value = ln.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_the_last_run_of_each_target_with_its_exit_code_and_phases(tmp_path: Path) -> None:
    a = tmp_path / "rack-a"
    a.mkdir()
    (a / "history.jsonl").write_text(
        line("20261126T220000Z-bbbbbb", "2026-11-26T22:00:00Z", exit_code=4, restores_owed=2)
        + line("20261125T220000Z-aaaaaa", "2026-11-25T22:00:00Z", exit_code=0)
        + "torn {\n"
    )
    (a / "recover.json").write_text(
        json.dumps(
            {
                "checked": 1764200000.5,
                "owed": 2,
                "exit_code": 0,
                "lock": {"held": True, "holder": "pod/pid-7/x", "holder_alive": False},
                "dead_holder": {"holder": "pod/pid-7/x", "seen": 1764199000.25},
            }
        )
    )
    b = tmp_path / "rack-b"
    b.mkdir()
    (b / "history.jsonl").write_text(line("20261126T220000Z-cccccc", "2026-11-26T22:00:00Z"))
    m = samples(render_metrics(tmp_path))
    t = '{target="rack-a"}'
    assert m[f"powercut_last_run_exit_code{t}"] == 4  # the newest run, not the file's last line
    assert m[f"powercut_last_run_restores_failed{t}"] == 2
    assert (
        m[f"powercut_last_run_start_timestamp_seconds{t}"]
        == dt.datetime(2026, 11, 26, 22, 0, tzinfo=dt.UTC).timestamp()
    )
    assert m['powercut_last_run_verdict{target="rack-a",verdict="failed"}'] == 1
    assert m['powercut_last_run_verdict{target="rack-a",verdict="passed"}'] == 0
    assert m[f"powercut_last_run_gates{t}"] == 2
    assert m[f"powercut_last_run_gates_failed{t}"] == 1
    phase = '{target="rack-a",scenario="power loss",phase="node NotReady"}'
    assert m[f"powercut_last_run_phase_seconds{phase}"] == 50
    assert m[f"powercut_last_run_phase_budget_seconds{phase}"] == 40
    assert m[f"powercut_last_run_phase_over_budget{phase}"] == 1
    assert 'powercut_last_run_phase_budget_seconds{target="rack-a",scenario="drain"' not in str(m)
    assert m[f"powercut_lock_held{t}"] == 1 and m[f"powercut_lock_holder_alive{t}"] == 0
    assert m[f"powercut_recover_owed_undos{t}"] == 2
    assert m[f"powercut_recover_dead_holder_timestamp_seconds{t}"] == 1764199000.25
    assert m[f"powercut_store_read_errors{t}"] == 1  # the torn line, counted
    # an older line without exit_code: no exit-code sample rather than a made-up one
    assert 'powercut_last_run_exit_code{target="rack-b"}' not in m
    assert m['powercut_store_read_errors{target="rack-b"}'] == 0


def test_the_page_shows_restore_failed_apart_and_serves_metrics(tmp_path: Path) -> None:
    a = tmp_path / "rack-a"
    a.mkdir()
    (a / "history.jsonl").write_text(
        line("20261126T220000Z-bbbbbb", "2026-11-26T22:00:00Z", exit_code=4)
        + line("20261125T220000Z-aaaaaa", "2026-11-25T22:00:00Z", exit_code=1)
    )
    page = render_index(tmp_path)
    assert "4 (RESTORE FAILED: nodes may be off)" in page
    assert "1 (gate or scenario failed)" in page
    srv = make_server(tmp_path, "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            body = r.read().decode()
        assert 'powercut_last_run_exit_code{target="rack-a"} 4' in body
    finally:
        srv.shutdown()
        srv.server_close()


def test_retention_keeps_the_newest_runs_and_none_too_old(tmp_path: Path) -> None:
    store = hist.target_store(tmp_path, "rack-a")
    ids = [f"202611{d:02d}T220000Z-aaaa{d:02d}" for d in range(1, 11)]
    lines = [line(i, f"2026-11-{i[6:8]}T22:00:00Z") for i in ids]
    store.dir.mkdir(parents=True)
    store.history.write_text("".join(lines[:5]) + "not json\n" + "".join(lines[5:]))
    for i in ids:
        store.run_dir(i).mkdir(parents=True)
    now = dt.datetime(2026, 11, 11, tzinfo=dt.UTC)
    gone = hist.prune(store, keep_runs=6, now=now)
    assert gone == ids[:4]
    assert not any(store.run_dir(i).exists() for i in ids[:4])
    assert all(store.run_dir(i).exists() for i in ids[4:])
    text = store.history.read_text()
    assert "not json" in text  # an unreadable line stays, to be seen
    assert [json.loads(ln)["run_id"] for ln in text.splitlines() if ln != "not json"] == ids[4:]
    gone = hist.prune(store, keep_days=3, now=now)  # started before Nov 8 22:00
    assert gone == ids[4:7]
    assert hist.prune(store, keep_days=0.001, now=now + dt.timedelta(days=400)) == ids[7:9]
    assert [json.loads(ln)["run_id"] for ln in store.history.read_text().splitlines()
            if ln != "not json"] == ids[9:]  # fmt: skip
    assert hist.prune(store) == []  # no limit: nothing removed


def test_exit_code_round_trips_and_older_lines_lack_it() -> None:
    run = hist.run_from_json(json.loads(line("20261126T220000Z-bbbbbb", "2026-11-26T22:00:00Z")))
    assert run.exit_code is None and "exit_code" not in run.to_json()
    doc = json.loads(line("20261126T220000Z-bbbbbb", "2026-11-26T22:00:00Z", exit_code=4))
    again = hist.run_from_json(json.loads(hist.run_from_json(doc).to_line()))
    assert again.exit_code == 4
