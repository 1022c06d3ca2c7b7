"""Probe the Kubernetes API itself through the cluster endpoint (the load balancer).

Two probes, each a thread recording ``Probe <name> ok|fail`` samples in the timeline in the
same form as :class:`harness.checks.Prober`, so :func:`harness.checks.probe_health` judges
them:

``api``
    ``GET /readyz`` through the cluster endpoint: an API server answered and is ready.
``etcd-quorum``
    ``GET /api/v1/namespaces/kube-system`` without a resourceVersion: a quorum read, which
    etcd serves only while a majority of its members agree (a lost quorum makes it time out
    or fail).

Each probe has its own client and connection pool, with a short timeout.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Any, Final

import allure

from harness.checks.base import Ref
from harness.checks.service import PROBE, probe_health
from harness.errors import ConfigError, PowercutError, WaitTimeout
from harness.inventory import Inventory
from harness.kube.client import KubeClient
from harness.kube.names import Change, Kind
from harness.kube.timeline import Timeline, Transition, match
from harness.scenario.report import Measurements, waiting

API_PROBE: Final = "api"
ETCD_PROBE: Final = "etcd-quorum"
PATHS: Final = {API_PROBE: "/readyz", ETCD_PROBE: "/api/v1/namespaces/kube-system"}
#: How long a probe's judgement waits for a sample started after its window's end: a
#: request every 0.25 s with a 2 s timeout, and slack.
SAMPLE_AFTER_S: Final = 5.0


class ApiProber:
    """One periodic API request, recorded in the timeline until stopped."""

    def __init__(
        self,
        client: KubeClient,
        timeline: Timeline,
        name: str,
        *,
        interval_s: float = 0.25,
        timeout_s: float = 2.0,
        server: str | None = None,
        path: str | None = None,
    ) -> None:
        """``server``: ask that API server instead of the cluster endpoint (one control-plane
        node's own, with the same credentials); ``path``: what to GET (by default the
        probe ``name``'s path)."""
        creds = client.creds if server is None else dataclasses.replace(client.creds, server=server)
        self.client = KubeClient(creds, timeout_s=timeout_s, maxsize=1)
        self.timeline = timeline
        self.name = name
        self.path = path or PATHS[name]
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"powercut-{name}", daemon=True)

    def probe_once(self) -> None:
        mono, wall = time.monotonic(), time.time()
        detail: dict[str, Any] = {}
        ok = False
        try:
            self.client.get(self.path)
            ok = True
        except PowercutError as exc:
            detail["error"] = f"{type(exc).__name__}: {exc}"[:160]
        detail["latency_ms"] = round((time.monotonic() - mono) * 1000, 1)
        self.timeline.record(
            PROBE, self.name, "ok" if ok else "fail", detail=detail, mono=mono, wall=wall
        )

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            self.probe_once()
            due = max(due + self.interval_s, time.monotonic())
            self._stop.wait(due - time.monotonic())

    def start(self) -> ApiProber:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.client.close()


def longest_outage(
    probe: str,
    what: str,
    seconds: float,
    since: Ref,
    timeline: Timeline,
    measurements: Measurements,
) -> None:
    """The longest run of ``probe`` failures from ``since`` (the failure's request)
    until now, recorded as "``what`` longest outage": no longer than ``seconds``.

    The window ends with the first sample the probe starts from now on (waited for, at
    most :data:`SAMPLE_AFTER_S`): judged right after the failure, a window a fraction of a
    second long would otherwise hold no sample at all."""
    now = timeline.clock.monotonic()
    end = now
    try:
        after = timeline.wait_for(
            match(PROBE, probe, after=now - 1e-9),
            now + SAMPLE_AFTER_S,
            f"a {what} probe sample after the window's end",
        )
        end = after.mono
    except WaitTimeout:
        pass  # no sample since: judged on what there is (none at all fails, naming it)
    m = probe_health(
        timeline, probe, start=since, end=end, min_success_ratio=0.0, max_outage_s=seconds
    )
    measurements.record(
        f"{what} longest outage", m.duration_s, seconds, m.detail, started_mono=m.started_mono
    )


def api_ready_after(
    kube: KubeClient,
    timeline: Timeline,
    since: Transition,
    seconds: float,
    measurements: Measurements,
) -> None:
    """The cluster endpoint's ``GET /readyz`` probe passes after ``since`` (the power-on),
    within ``seconds``; the verbose answer (every check) is attached to the report."""
    with waiting("/readyz passing", seconds):
        ok = timeline.wait_for(
            match(Kind.PROBE, API_PROBE, Change.OK, after=since),
            since.mono + seconds,
            "GET /readyz passing after the power-on",
        )
    measurements.record(
        "API ready after power-on", ok.mono - since.mono, seconds, started_mono=since.mono
    )
    verbose = kube.request("GET", "/readyz", params={"verbose": "true"})
    allure.attach(
        str(verbose.get("text", verbose)),
        name="readyz?verbose",
        attachment_type=allure.attachment_type.TEXT,
    )


def own_api_ready_after(
    kube: KubeClient,
    inventory: Inventory,
    nodes: Sequence[str],
    timeline: Timeline,
    since: Transition,
    seconds: float,
    measurements: Measurements,
) -> None:
    """``GET /readyz`` on each control-plane node's own API server (its inventory
    ``api_endpoint``) passes after ``since``, within ``seconds``: probed for the wait, then
    stopped. No control-plane node among ``nodes``, or one without an ``api_endpoint``, is a
    harness error naming the field."""
    cps = [n for n in (inventory.node(name) for name in nodes) if n.role == "control-plane"]
    if not cps:
        raise ConfigError("no control-plane node was powered on", field="scenario")
    for node in cps:
        if node.api_endpoint is None:
            raise ConfigError(
                f"node {node.name} has no api_endpoint ('https://host:port' of its own API "
                "server), so whether it came back cannot be checked",
                source=str(inventory.source or ""),
                field=f"nodes[{node.name}].api_endpoint",
            )
        name = f"{API_PROBE}@{node.name}"
        prober = ApiProber(kube, timeline, name, server=node.api_endpoint, path="/readyz")
        prober.start()
        try:
            with waiting(f"{node.name}'s own /readyz passing", seconds):
                ok = timeline.wait_for(
                    match(Kind.PROBE, name, Change.OK, after=since),
                    since.mono + seconds,
                    f"GET {node.api_endpoint}/readyz passing after the power-on",
                )
        finally:
            prober.stop()
        measurements.record(
            f"{node.name} API server ready", ok.mono - since.mono, seconds, started_mono=since.mono
        )
