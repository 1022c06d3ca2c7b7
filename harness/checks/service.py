"""Service health from the client's side: a prober thread and a check over its samples.

A :class:`Prober` sends an HTTP GET (``http://``/``https://`` URL) or opens a TCP connection
(``tcp://host:port`` or ``host:port``) every ``interval_s`` on a fresh connection, as a new
client would, and records each sample in the timeline as ``Probe <name> ok|fail`` with
``latency_ms`` and ``status`` or ``error``. :func:`probe_health` turns the samples of a
window into a success ratio and the longest outage.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Collection
from typing import Any
from urllib.parse import urlsplit

import urllib3

from harness.checks.base import CheckFailed, Measurement, Ref, ref_label, ref_mono, watch_until
from harness.errors import ConfigError
from harness.kube.names import Change, Kind
from harness.kube.timeline import Clock, Timeline, Transition

PROBE = Kind.PROBE


class Prober:
    """Probe one target periodically into the timeline until stopped.

    Samples are stamped and paced by ``clock`` (the timeline's unless given), so a test
    steps the prober with a fake clock; a sample's ``latency_ms`` is the request's own,
    measured in real time.
    """

    def __init__(
        self,
        timeline: Timeline,
        target: str,
        *,
        name: str | None = None,
        interval_s: float = 0.25,
        timeout_s: float = 1.0,
        ok_status: Collection[int] = range(200, 400),
        verify: bool | str = True,
        clock: Clock | None = None,
    ) -> None:
        if interval_s <= 0 or timeout_s <= 0:
            raise ConfigError("interval_s and timeout_s must be positive", field="probe")
        self.timeline = timeline
        self.clock = clock if clock is not None else timeline.clock
        self.target = target
        self.name = name or target
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.ok_status = ok_status
        parts = urlsplit(target if "://" in target else f"tcp://{target}")
        self.scheme = parts.scheme
        if self.scheme in ("http", "https"):
            ctx = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
            if verify is False:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self._pool: urllib3.PoolManager | None = urllib3.PoolManager(
                num_pools=1, maxsize=1, retries=False, ssl_context=ctx
            )
            self._addr: tuple[str, int] = ("", 0)
        elif self.scheme == "tcp" and parts.hostname and parts.port:
            self._pool = None
            self._addr = (parts.hostname, parts.port)
        else:
            raise ConfigError(
                f"cannot probe {target!r}: use http(s)://host[:port]/path, tcp://host:port "
                "or host:port",
                field="probe",
            )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def probe_once(self) -> Transition:
        """One sample, recorded in the timeline (stamped when it was sent)."""
        mono, wall = self.clock.monotonic(), self.clock.time()
        sent = time.monotonic()
        detail: dict[str, Any] = {}
        ok = False
        try:
            if self._pool is not None:
                resp = self._pool.request(
                    "GET",
                    self.target,
                    headers={"Connection": "close", "User-Agent": "powercut-probe"},
                    timeout=urllib3.Timeout(total=self.timeout_s),
                    redirect=False,
                )
                detail["status"] = resp.status
                ok = resp.status in self.ok_status
            else:
                with socket.create_connection(self._addr, timeout=self.timeout_s):
                    ok = True
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            detail["error"] = f"{type(exc).__name__}: {exc}"[:160]
        detail["latency_ms"] = round((time.monotonic() - sent) * 1000, 1)
        return self.timeline.record(
            PROBE, self.name, Change.OK if ok else Change.FAIL, detail=detail, mono=mono, wall=wall
        )

    def _run(self) -> None:
        due = self.clock.monotonic()
        while not self._stop.is_set():
            self.probe_once()
            due += self.interval_s
            now = self.clock.monotonic()
            if due < now:  # a slow probe: skip the missed slots rather than burst
                due = now
            self.clock.wait_event(self._stop, due - now)

    def start(self) -> Prober:
        if self._thread is not None:
            raise RuntimeError("prober already started")
        self._thread = threading.Thread(
            target=self._run, name=f"powercut-probe-{self.name}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout_s + 5)
        if self._pool is not None:
            self._pool.clear()

    def __enter__(self) -> Prober:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def outages(samples: list[Transition]) -> list[tuple[float, float, bool]]:
    """``(start, end, ongoing)`` of each run of failed samples, ``samples`` sorted by time.

    An outage runs from its first failed sample to the next successful one; one still going
    at the last sample ends there (``ongoing``). Resolution is the probe interval.
    """
    out: list[tuple[float, float, bool]] = []
    began: float | None = None
    for t in samples:
        if t.transition == Change.FAIL:
            if began is None:
                began = t.mono
        elif began is not None:
            out.append((began, t.mono, False))
            began = None
    if began is not None:
        out.append((began, samples[-1].mono, True))
    return out


def probe_health(
    tl: Timeline,
    probe: str,
    *,
    start: Ref,
    end: Ref,
    min_success_ratio: float = 1.0,
    max_outage_s: float | None = None,
) -> Measurement:
    """Success ratio and longest outage of a probe's samples in ``[start, end]``.

    Waits until ``end`` if it is still to come, failing early once an outage has lasted
    longer than ``max_outage_s``. The measurement's duration is the longest outage.
    """
    s, e = ref_mono(start), ref_mono(end)
    window = f"from {ref_label(tl, start)} to {ref_label(tl, end)}"
    limits = [f"success ratio >= {min_success_ratio:g}"]
    if max_outage_s is not None:
        limits.append(f"no outage longer than {max_outage_s:g}s")
    expected = f"probe {probe}: {' and '.join(limits)} {window}"
    pos = 0
    began: float | None = None

    def too_long() -> bool | None:
        nonlocal pos, began
        new = tl.read_from(pos)
        pos += len(new)
        for t in new:
            if t.kind != PROBE or t.name != probe or not s <= t.mono <= e:
                continue
            if t.transition == Change.OK:
                began = None
            elif began is None:
                began = t.mono
        if (
            max_outage_s is not None
            and began is not None
            and tl.clock.monotonic() - began > max_outage_s
        ):
            return True
        return None

    watch_until(tl, too_long, e)
    samples = tl.all(PROBE, probe, where=lambda t: s <= t.mono <= e)
    if not samples:
        raise CheckFailed(
            expected, "no probe samples (is the prober running?)", 0.0, check="probe-health"
        )
    ok = sum(1 for t in samples if t.transition == Change.OK)
    ratio = ok / len(samples)
    runs = outages(samples)
    # One still going at the last sample lasted at least until the window end (or now).
    until = min(e, tl.clock.monotonic())
    spans = [(b, (max(until, f) if ongoing else f) - b, ongoing) for b, f, ongoing in runs]
    longest = max(spans, key=lambda r: r[1], default=None)
    longest_s = 0.0 if longest is None else longest[1]
    detail: dict[str, Any] = {
        "probe": probe,
        "samples": len(samples),
        "ok": ok,
        "failed": len(samples) - ok,
        "success_ratio": round(ratio, 4),
        "outages": len(runs),
        "longest_outage_s": round(longest_s, 3),
        "longest_outage_at_s": None if longest is None else round(longest[0] - s, 3),
        "ongoing": bool(longest and longest[2]),
    }
    problems = []
    if ratio < min_success_ratio:
        problems.append(f"success ratio {ratio:.3f} ({ok}/{len(samples)})")
    overran = max_outage_s is not None and longest is not None and longest_s > max_outage_s
    if overran and longest is not None:
        problems.append(f"outage of {longest_s:.1f}s from {longest[0] - s:.1f}s into the window")
    if problems:
        last = samples[-1]
        raise CheckFailed(
            expected,
            "; ".join(problems) + f"; last sample: {tl.describe(last)}",
            min(e, last.mono) - s,
            check="probe-health",
            detail=detail,
            # the service answers again, only after a longer outage than allowed
            late=overran and len(problems) == 1 and not any(r[2] for r in runs),
        )
    return Measurement("probe-health", s, longest_s, max_outage_s, detail)
