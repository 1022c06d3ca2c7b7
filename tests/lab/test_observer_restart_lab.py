"""The Observer against real API servers that restart: a watch refused with 410 Gone by a
restarted API server resumes on another one, with every change delivered and no re-list."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import signal
import time
from dataclasses import replace

import pytest

from harness.errors import PowercutError
from harness.kube.client import KubeClient
from harness.kube.observer import NODE, OBSERVER, Observer, gaps
from harness.lab.spec import LabSpec
from tests.fakes.relay import Relay
from tests.lab.conftest import LabHandle, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.disruptive, pytest.mark.slow]

RESTARTED = 2  # cp-3's API server


def _readyz(client: KubeClient) -> bool:
    try:
        client.request_raw("GET", "/readyz", timeout_s=2)
    except PowercutError:
        return False
    return True


def test_a_watch_refused_by_a_restarted_api_server_resumes_on_another(lab: LabHandle) -> None:
    spec = LabSpec.load(lab.state_dir)
    ports = spec.ports
    restarted = ("127.0.0.1", ports.apiserver(RESTARTED))
    balancer = ("127.0.0.1", ports.cluster)
    direct = KubeClient(replace(lab.client.creds, server=f"https://{restarted[0]}:{restarted[1]}"))
    first_after_mend = itertools.count()
    mended = False

    def upstream() -> tuple[str, int]:
        # Once the watch may reach the cluster again, its first connection goes to the
        # restarted API server (a balancer could pick it as well), the next ones through the
        # balancer to the others.
        if mended and next(first_after_mend) == 0:
            return restarted
        return balancer

    node = "w-a1"
    path = f"/api/v1/nodes/{node}"
    relay = Relay(upstream, ports.base + 998)
    watching = KubeClient(replace(lab.client.creds, server=f"https://127.0.0.1:{relay.port}"))
    obs = Observer(watching, resources=["nodes"], backoff_s=(0.2, 0.5)).start()
    tl = obs.timeline
    try:
        relay.cut()  # the harness loses the cluster...
        wait_for("the watch to notice", lambda: tl.first(OBSERVER, transition="watch-broken"), 30)
        components = json.loads((lab.state_dir / "state.json").read_text())["components"]
        os.kill(int(components[f"kube-apiserver-cp-{RESTARTED + 1}"]["pid"]), signal.SIGKILL)
        killed = time.monotonic()
        flips = 0
        # ...while a node is cordoned and uncordoned through the two live API servers...
        for value in (True, None, True, None):
            # a kept-alive connection to the killed API server fails once: retried
            wait_for(
                "a cordon patch accepted",
                functools.partial(
                    lambda v: lab.client.patch(path, {"spec": {"unschedulable": v}}), value
                ),
                30,
            )
            flips += 1
        wait_for("cp-3's kube-apiserver serving again", lambda: _readyz(direct), 120)
        assert time.monotonic() - killed > 0.5
        mended = True
        relay.mend()  # ...and is back once the killed API server's cache has started
        seen = wait_for(
            f"{flips} cordon flips on the timeline",
            lambda: (
                ts
                if len(ts := tl.all(NODE, node, where=lambda t: t.transition.endswith("cordoned")))
                >= flips
                else None
            ),
            60,
        )
    finally:
        obs.stop()
        relay.close()
        watching.close()
        direct.close()
        with contextlib.suppress(PowercutError):
            lab.client.patch(path, {"spec": {"unschedulable": None}})
    refused = tl.all(OBSERVER, "nodes", "watch-gone")
    assert refused, "the restarted API server did not refuse the watch: nothing was tested"
    assert refused[0].detail["cache_start"] is not None  # "too old resource version: a (b)"
    assert int(refused[0].detail["cache_start"]) > int(refused[0].detail["resource_version"])
    assert [t.transition for t in seen] == ["cordoned", "uncordoned"] * 2
    assert not any(t.detail.get("relist") for t in seen)
    assert tl.first(OBSERVER, transition="relisted") is None
    assert gaps(tl) == []
