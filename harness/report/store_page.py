"""The results store's page: every run of every target with its verdict, from the targets'
history files (``STORE/<target>/history.jsonl``, schema_version 1), and the store itself
served read-only beside it (``powercut store serve``, the chart's page Deployment).

The index is made afresh on every request, so a run that has just appended its line shows at
once. A history line that cannot be read is shown as such (file and line), never dropped
silently; a line of a newer schema_version is counted and skipped; unknown keys are ignored.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.report.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from harness.report.metrics import render_metrics

log = logging.getLogger(__name__)

HISTORY_FILE = "history.jsonl"
RUNS_DIR = "runs"
REPORT_NAMES = ("report.html", "index.html")


@dataclass(frozen=True)
class RunRow:
    run_id: str
    started: str
    finished: str
    verdict: str
    counts: dict[str, int]
    report: str | None  # path of the run's report, relative to the store
    exit_code: int | None = None  # powercut run's exit status, where recorded


#: What each exit status of ``powercut run`` means, as the page shows it.
EXIT_MEANINGS = {
    0: "passed",
    1: "gate or scenario failed",
    2: "harness error",
    3: "interrupted, restored",
    4: "RESTORE FAILED: nodes may be off",
    5: "stop condition, restored",
}


def exit_text(code: int | None) -> str:
    if code is None:
        return "-"
    return f"{code} ({EXIT_MEANINGS.get(code, 'unknown')})"


@dataclass
class TargetRows:
    target: str
    runs: list[RunRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    newer: int = 0  # lines of a newer schema_version, skipped


def _report_of(store: Path, target: str, run_id: str) -> str | None:
    run = store / target / RUNS_DIR / run_id
    for name in REPORT_NAMES:
        if (run / name).is_file():
            return f"{target}/{RUNS_DIR}/{run_id}/{name}"
    return f"{target}/{RUNS_DIR}/{run_id}/" if run.is_dir() else None


def _row(store: Path, target: str, doc: dict[str, Any]) -> RunRow:
    counts: dict[str, int] = {}
    for s in doc.get("scenarios") or []:
        st = str((s or {}).get("status", "?"))
        counts[st] = counts.get(st, 0) + 1
    run_id = str(doc["run_id"])
    return RunRow(
        run_id=run_id,
        started=str(doc.get("started", "")),
        finished=str(doc.get("finished", "")),
        verdict=str(doc.get("verdict", "?")),
        counts=counts,
        report=_report_of(store, target, run_id) if "/" not in run_id else None,
        exit_code=_int_or_none(doc.get("exit_code")),
    )


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def read_target(store: Path, target: str) -> TargetRows:
    rows = TargetRows(target)
    path = store / target / HISTORY_FILE
    try:
        text = path.read_text()
    except OSError as exc:
        rows.problems.append(f"{path}: {exc.strerror or exc}")
        return rows
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            if int(doc.get("schema_version", 0)) > 1:
                rows.newer += 1
                continue
            rows.runs.append(_row(store, target, doc))
        except (ValueError, KeyError, TypeError) as exc:
            rows.problems.append(f"{path}:{n}: {exc}")
    rows.runs.sort(key=lambda r: r.run_id, reverse=True)
    return rows


def targets(store: Path) -> Iterator[str]:
    if not store.is_dir():
        return
    for d in sorted(store.iterdir()):
        if d.is_dir() and (d / HISTORY_FILE).is_file():
            yield d.name


def read_store(store: Path) -> list[TargetRows]:
    return [read_target(store, t) for t in targets(store)]


_STYLE = """
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin-bottom:2em}
td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}
.passed{color:#1a7f37;font-weight:600}.failed{color:#cf222e;font-weight:600}
.broken{color:#9a6700;font-weight:600}.problem{color:#cf222e}
.restore{color:#fff;background:#cf222e;font-weight:700}
"""


def render_index(store: Path, *, now: dt.datetime | None = None) -> str:
    """The page: one table per target, newest run first."""
    e = html.escape
    when = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M:%SZ")
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>powercut runs</title>",
        f"<style>{_STYLE}</style></head><body><h1>powercut runs</h1>",
        f"<p>Results store {e(str(store))}, read {e(when)}.</p>",
    ]
    all_rows = read_store(store)
    if not all_rows:
        parts.append("<p>No run yet: no target has a history.jsonl.</p>")
    for t in all_rows:
        last = t.runs[0].verdict if t.runs else "no run"
        parts.append(
            f"<h2 id='{e(t.target)}'>{e(t.target)} <small>({len(t.runs)} runs, last: "
            f"<span class='{e(last)}'>{e(last)}</span>)</small></h2>"
        )
        for p in t.problems:
            parts.append(f"<p class='problem'>unreadable history line: {e(p)}</p>")
        if t.newer:
            parts.append(f"<p>{t.newer} line(s) of a newer schema_version skipped.</p>")
        parts.append(
            "<table><tr><th>run</th><th>started</th><th>finished</th><th>verdict</th>"
            "<th>exit</th><th>scenarios</th><th>report</th></tr>"
        )
        for r in t.runs:
            counts = ", ".join(f"{n} {s}" for s, n in sorted(r.counts.items())) or "none"
            link = f"<a href='{quote(r.report)}'>report</a>" if r.report else "-"
            parts.append(
                f"<tr><td>{e(r.run_id)}</td><td>{e(r.started)}</td><td>{e(r.finished)}</td>"
                f"<td class='{e(r.verdict)}'>{e(r.verdict)}</td>"
                f"<td class='{'restore' if r.exit_code == 4 else ''}'>{e(exit_text(r.exit_code))}"
                f"</td><td>{e(counts)}</td>"
                f"<td>{link}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def make_server(store: Path, host: str, port: int) -> ThreadingHTTPServer:
    """A server of the store (GET and HEAD only: read-only) with the index at ``/`` and
    Prometheus metrics at ``/metrics`` (:mod:`harness.report.metrics`)."""
    root = store.resolve()

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] in ("/", "/index.html"):
                body = render_index(root).encode()
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)
                return
            if self.path.split("?", 1)[0] == "/metrics":
                body = render_metrics(root).encode()
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", METRICS_CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:
            log.info("%s %s", self.address_string(), format % args)

    return ThreadingHTTPServer((host, port), Handler)


def serve(store: Path, host: str, port: int, stop: threading.Event | None = None) -> None:
    srv = make_server(store, host, port)
    if stop is not None:

        def watch(ev: threading.Event) -> None:
            ev.wait()
            srv.shutdown()

        threading.Thread(target=watch, args=(stop,), daemon=True).start()
    try:
        srv.serve_forever()
    finally:
        srv.server_close()
