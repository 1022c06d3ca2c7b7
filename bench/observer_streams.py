"""The Observer's stamps against an independent raw watch, up to 1,000 Ready flips a second.

Used by `bench/observer_bench.py` (issue #26 item 3), which runs these as child processes:

- :class:`RawWatch` (``--child rawwatch``): an independent watch client in a process of its
  own. Plain ``http.client`` (not the harness's KubeClient or urllib3; only the kubeconfig's
  credentials and TLS context are shared), one thread per resource like the Observer, each
  line decoded whole with orjson and stamped with ``time.monotonic()`` when it was read: the
  same clock as the Observer's ``mono`` on this machine. It lists each resource first (for
  the Ready state of every object) and records every Ready transition it sees by the
  Observer's rules (a node's Ready status changing to a non-empty value, a pod's Ready
  condition becoming or ceasing to be True), keyed by object and resourceVersion, and the
  moment each resourceVersion was first read (for the probe flips' "raw same streams").
- :func:`flipper_main` (``--child flipper``): one of several generator processes, each with a
  few threads, flipping the Ready condition of its share of the fake nodes and pods through
  the status subresource (strategic merge patch) at its share of the target rate, open loop
  (a thread that falls behind does not burst to catch up). When told to stop it sets every
  object it left Ready back to not Ready, so nothing is left Ready for the node lifecycle
  controller to find stale (a Ready node going Unknown makes it rewrite every pod on it).
- :func:`match_raw`: each Ready transition the raw watch saw, matched with the Observer's
  transition for the same object and resourceVersion (the Observer child notes the
  resourceVersion of each event it handles), lateness = Observer stamp - raw stamp.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson

from harness.errors import TemporaryError
from harness.kube.client import ApiError, KubeClient

JSON = dict[str, Any]
#: (kind, namespace, name, resourceVersion)
EventKey = tuple[str, str, str, str]
KINDS = {"/api/v1/nodes": "Node", "/api/v1/pods": "Pod"}


def pct(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank)."""
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def ready_of(kind: str, obj: JSON) -> str:
    """The Ready value the Observer's projections compare: a node's Ready status ("" when
    it has no Ready condition), a pod's Ready condition being True ("True"/"False")."""
    conds = (obj.get("status") or {}).get("conditions") or []
    status = next((str(c.get("status") or "") for c in conds if c.get("type") == "Ready"), "")
    if kind == "Pod":
        return "True" if status == "True" else "False"
    return status


# -- the independent raw watch ------------------------------------------------------------


class _Gone(Exception):
    """An in-stream ERROR (410 Gone: the history is gone): list again."""


class RawWatch:
    """List, then watch ``paths`` over plain HTTP, one thread each; note Ready transitions."""

    def __init__(self, kubeconfig: str, paths: list[str]) -> None:
        creds = KubeClient.from_kubeconfig(kubeconfig)  # credentials and TLS context only
        url = urlsplit(creds.server)
        self._https = url.scheme == "https"
        self._host = url.hostname or "127.0.0.1"
        self._port = url.port or (443 if self._https else 80)
        self._ctx = creds._ssl_context
        self._headers = dict(creds._headers)
        self.paths = paths
        self.seen: dict[str, float] = {}  # resourceVersion -> first read
        self.transitions: list[tuple[str, str, str, str, float, str]] = []
        self.events: dict[str, int] = {KINDS[p]: 0 for p in paths}
        self.first_mono: dict[str, float] = {}
        self.last_mono: dict[str, float] = {}
        self.per_tenth: dict[int, int] = {}  # int(mono * 10) -> events read in that 0.1 s
        self.problems: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: list[http.client.HTTPConnection] = []
        self._opened = {p: threading.Event() for p in paths}  # listed, and the watch is open
        self._threads = [threading.Thread(target=self._run, args=(p,), daemon=True) for p in paths]

    def _conn(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(
                self._host, self._port, context=self._ctx, timeout=700
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=700)

    def _get(self, conn: http.client.HTTPConnection, path: str, **q: Any) -> Any:
        query = urlencode({k: v for k, v in q.items() if v is not None})
        conn.request("GET", f"{path}?{query}", headers=self._headers)
        resp = conn.getresponse()
        if resp.status >= 400:
            body = resp.read()
            raise RuntimeError(f"GET {path}: {resp.status} {body[:300]!r}")
        return resp

    def start(self) -> None:
        for t in self._threads:
            t.start()
        for opened in self._opened.values():
            opened.wait(600)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError, AttributeError):
                if c.sock is not None:
                    c.sock.shutdown(2)

    def _list(self, path: str, kind: str) -> tuple[dict[tuple[str, str], str], str]:
        state: dict[tuple[str, str], str] = {}
        conn = self._conn()
        cont = None
        rv = ""
        try:
            while True:
                page = orjson.loads(self._get(conn, path, limit=500, **{"continue": cont}).read())
                for obj in page.get("items") or []:
                    md = obj["metadata"]
                    state[(md.get("namespace", ""), md["name"])] = ready_of(kind, obj)
                md = page.get("metadata") or {}
                rv, cont = str(md.get("resourceVersion", "")), md.get("continue")
                if not cont:
                    return state, rv
        finally:
            conn.close()

    def _run(self, path: str) -> None:
        """List, then watch from the list's resourceVersion at once (a busy resource's
        history moves on: waiting for the other resource's list first got 410s), resuming
        from the last resourceVersion read; a 410 re-lists (noted in ``problems``)."""
        kind = KINDS[path]
        state: dict[tuple[str, str], str] = {}
        rv: list[str] = [""]  # the last resourceVersion read, kept through a broken stream
        while not self._stop.is_set():
            if not rv[0]:
                try:
                    state, rv[0] = self._list(path, kind)
                except (OSError, http.client.HTTPException, ValueError, RuntimeError) as exc:
                    self.problems.append(f"{path}: list failed: {type(exc).__name__}: {exc}")
                    time.sleep(0.5)
                    continue
            conn = self._conn()
            with self._lock:
                self._conns.append(conn)
            try:
                self._watch(conn, path, kind, rv, state)
            except _Gone as exc:
                self.problems.append(f"{path}: {exc}: re-listed")
                rv[0] = ""
            except (OSError, http.client.HTTPException, ValueError, RuntimeError) as exc:
                if not self._stop.is_set():
                    self.problems.append(f"{path}: {type(exc).__name__}: {exc}")
                    time.sleep(0.2)
            finally:
                with self._lock:
                    self._conns.remove(conn)
                conn.close()
                self._opened[path].set()  # (also when the first try failed: noted above)

    def _watch(
        self,
        conn: http.client.HTTPConnection,
        path: str,
        kind: str,
        rv: list[str],
        state: dict[tuple[str, str], str],
    ) -> None:
        resp = self._get(
            conn,
            path,
            watch="1",
            resourceVersion=rv[0],
            allowWatchBookmarks="true",
            timeoutSeconds=600,
        )
        self._opened[path].set()  # the stream is open: from here on nothing is missed
        buf = b""
        while not self._stop.is_set():
            chunk = resp.read1(65536)
            if not chunk:
                return  # the server ended the stream: watch again from rv
            buf += chunk
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    break
                line, buf = buf[:nl], buf[nl + 1 :]
                if not line.strip():
                    continue
                mono = time.monotonic()
                ev = orjson.loads(line)
                obj = ev.get("object") or {}
                typ = ev.get("type")
                if typ == "ERROR":
                    raise _Gone(f"watch ERROR {obj.get('code')}: {obj.get('message')}")
                md = obj.get("metadata") or {}
                new_rv = str(md.get("resourceVersion") or "")
                if new_rv:
                    rv[0] = new_rv
                if typ == "BOOKMARK":
                    continue
                self.events[kind] += 1
                self.first_mono.setdefault(kind, mono)
                self.last_mono[kind] = mono
                tenth = int(mono * 10)
                self.per_tenth[tenth] = self.per_tenth.get(tenth, 0) + 1
                self.seen.setdefault(new_rv, mono)
                key = (str(md.get("namespace") or ""), str(md.get("name") or ""))
                old = state.get(key, "" if kind == "Node" else "False")
                if typ == "DELETED":
                    state.pop(key, None)
                    continue
                new = ready_of(kind, obj)
                state[key] = new
                if new != old and new:
                    self.transitions.append((kind, key[0], key[1], new_rv, mono, new))

    def dump(self) -> JSON:
        return {
            "seen": self.seen,
            "transitions": self.transitions,
            "events": self.events,
            "first_mono": self.first_mono,
            "last_mono": self.last_mono,
            "per_tenth": self.per_tenth,
            "problems": self.problems[:20],
        }


def rawwatch_main(kubeconfig: str) -> JSON:
    """The child: start, say so, then ``dump PATH`` (stops watching) and ``quit`` on stdin."""
    w = RawWatch(kubeconfig, ["/api/v1/nodes", "/api/v1/pods"])
    w.start()
    print(json.dumps({"started": True}), flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "dump":  # stop watching, then write everything down
            w.stop()
            Path(arg).write_bytes(orjson.dumps(w.dump(), option=orjson.OPT_NON_STR_KEYS))
            print(json.dumps({"dumped": len(w.transitions)}), flush=True)
        elif cmd == "quit":
            break
    w.stop()
    return {"events": w.events}


# -- the generators -----------------------------------------------------------------------


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def flip_request(kind: str, ns: str, name: str, ready: bool) -> tuple[str, bytes]:
    """The status patch that sets an object's Ready condition (path, body)."""
    t = _now_rfc3339()
    status = "True" if ready else "False"
    cond = {"type": "Ready", "status": status, "lastTransitionTime": t}
    if kind == "Node":
        reason = "KubeletReady" if ready else "KubeletNotReady"
        body: JSON = {
            "status": {"conditions": [{**cond, "reason": reason, "lastHeartbeatTime": t}]}
        }
        return f"/api/v1/nodes/{name}/status", orjson.dumps(body)
    conds = [cond, {**cond, "type": "ContainersReady"}]
    return f"/api/v1/namespaces/{ns}/pods/{name}/status", orjson.dumps(
        {"status": {"conditions": conds}}
    )


class Flipper:
    """``threads`` threads flipping the Ready condition of ``targets`` at ``rate`` a second.

    Each thread owns a share of the targets and patches them round-robin, each patch the
    opposite of the object's last state (they all start not Ready), paced open loop.
    """

    def __init__(
        self, client: KubeClient, targets: list[tuple[str, str, str]], rate: float, threads: int
    ) -> None:
        self.client = client
        self.rate = rate
        self.shares = [targets[i::threads] for i in range(threads) if targets[i::threads]]
        self.go = threading.Event()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.patches = 0  # while running (not the reset at the end)
        self.reset_patches = 0
        self.errors: list[str] = []
        self.rtt_ms: list[float] = []
        self.started = 0.0
        self.stopped = 0.0
        self.threads = [
            threading.Thread(target=self._run, args=(share,), daemon=True) for share in self.shares
        ]

    def _patch(self, kind: str, ns: str, name: str, ready: bool) -> bool:
        path, body = flip_request(kind, ns, name, ready)
        t0 = time.monotonic()
        try:
            self.client.request_raw(
                "PATCH", path, body=body, content_type="application/strategic-merge-patch+json"
            )
        except (ApiError, TemporaryError) as exc:
            with self.lock:
                if len(self.errors) < 20:
                    self.errors.append(f"{kind} {name}: {exc}"[:200])
            return False
        rtt = (time.monotonic() - t0) * 1000
        with self.lock:
            self.rtt_ms.append(rtt)
        return True

    def _run(self, share: list[tuple[str, str, str]]) -> None:
        period = len(self.shares) / self.rate
        ready = dict.fromkeys(share, False)
        self.go.wait()
        nxt = time.monotonic()
        i = 0
        while not self.stop.is_set():
            target = share[i % len(share)]
            i += 1
            if self._patch(*target, not ready[target]):
                ready[target] = not ready[target]
                with self.lock:
                    self.patches += 1
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)
            else:
                nxt = time.monotonic()  # behind: do not burst to catch up
        for target in [t for t in share if ready[t]]:  # leave nothing Ready
            for _ in range(3):
                if self._patch(*target, False):
                    with self.lock:
                        self.reset_patches += 1
                    break
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def start_threads(self) -> None:
        for t in self.threads:
            t.start()

    def run(self) -> None:
        self.started = time.monotonic()
        self.go.set()

    def finish(self) -> JSON:
        self.stopped = time.monotonic()
        self.stop.set()
        for t in self.threads:
            t.join(120)
        return {
            "patches": self.patches,
            "reset_patches": self.reset_patches,
            "seconds": self.stopped - self.started,
            "started": self.started,
            "stopped": self.stopped,
            "done": time.monotonic(),
            "errors": self.errors,
            "rtt_ms": [round(v, 2) for v in self.rtt_ms],
        }


def flipper_main(kubeconfig: str, targets_file: str, rate: float, threads: int) -> JSON:
    """The child: ready, then ``go``, ``stop`` on stdin; prints the result."""
    targets = [(str(k), str(ns), str(n)) for k, ns, n in json.loads(Path(targets_file).read_text())]
    client = KubeClient.from_kubeconfig(kubeconfig, maxsize=threads, timeout_s=30)
    f = Flipper(client, targets, rate, threads)
    f.start_threads()
    print(json.dumps({"ready": len(targets)}), flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "go":
            f.run()
        elif cmd == "stop":
            break
    res = f.finish()
    client.close()
    return res


# -- matching -----------------------------------------------------------------------------


def match_raw(
    raw: list[tuple[str, str, str, str, float, str]],
    observer: dict[EventKey, float],
    windows: dict[str, tuple[float, float]],
) -> dict[str, JSON]:
    """Per round: every Ready transition the raw watch saw within the round's window,
    matched with the Observer's stamp of the same object and resourceVersion.

    ``observer`` maps (kind, namespace, name, resourceVersion) of each Ready transition the
    Observer recorded to its ``mono``. Returns, per round, ``late_ms`` (Observer - raw, ms,
    signed), ``lost`` (seen raw, not recorded by the Observer: a few examples and the count)
    and ``raw``/``observer`` counts.
    """
    out: dict[str, JSON] = {}
    for rnd, (lo, hi) in windows.items():
        late: list[float] = []
        lost: list[str] = []
        for kind, ns, name, rv, mono, value in raw:
            if not lo <= mono < hi:
                continue
            stamp = observer.get((kind, ns, name, rv))
            if stamp is None:
                lost.append(f"{kind} {ns + '/' if ns else ''}{name}@{rv} -> {value}")
                continue
            late.append((stamp - mono) * 1000)
        out[rnd] = {"late_ms": late, "lost": len(lost), "lost_examples": lost[:5]}
        out[rnd]["raw"] = len(late) + len(lost)
        out[rnd]["observer"] = sum(1 for m in observer.values() if lo <= m < hi)
    return out


def observer_event_rvs() -> tuple[dict[tuple[str, str, float], str], Callable[[], None]]:
    """Note the resourceVersion of every watch event the Observer handles, keyed by the
    object and the event's stamp (which the transitions it emits carry as ``mono``).

    Wraps ``_Watcher._on_event`` (one dict store per event); returns the map and an undo.
    """
    from harness.kube.observer import watch as watch_mod

    rvs: dict[tuple[str, str, float], str] = {}
    original = watch_mod._Watcher._on_event

    def on_event(self: Any, ev: Any) -> None:
        md = ev.object.get("metadata") or {}
        rvs[(str(md.get("namespace") or ""), str(md.get("name") or ""), ev.mono)] = str(
            md.get("resourceVersion") or ""
        )
        original(self, ev)

    watch_mod._Watcher._on_event = on_event  # type: ignore[method-assign]

    def undo() -> None:
        watch_mod._Watcher._on_event = original  # type: ignore[method-assign]

    return rvs, undo
