"""The page's /metrics scraped by a real Prometheus (Debian's, on 127.0.0.1) evaluating the
chart's alerts as helm renders them: a night whose restore failed (exit 4) fires
PowercutRestoreFailed and not PowercutNightFailed; a failed gate (exit 1) the reverse; a
target with no run for 26 hours fires PowercutNoRecentRun; a runner the recover CronJob
found dead after the last run fires PowercutRunnerDied, and not once a later run finished,
nor PowercutLockHeldByDeadRunner once recover released the lock. (PowercutLockHeldByDeadRunner
waits five minutes: promtool's unit tests cover it, tests/chart/alerts-test.yaml.)"""

from __future__ import annotations

import datetime as dt
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.inventory.slo import PrometheusSpec
from harness.kindlab.binaries import obtain_helm
from harness.kindlab.versions import KUBERNETES
from harness.lab.prometheus import PrometheusServer, ScrapeJob
from harness.report.store_page import make_server
from harness.slo.client import PrometheusClient

# helm: `make chart` runs it (helm's Go build stays off the checks' path in `make test`)
pytestmark = [pytest.mark.slow, pytest.mark.helm]
CHART = Path(__file__).resolve().parents[2] / "deploy" / "chart"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chart_rules(tmp: Path) -> list[dict[str, Any]]:
    helm = obtain_helm(lambda m: print(m, file=sys.stderr))
    values = tmp / "values.yaml"
    values.write_text(yaml.safe_dump({"metrics": {"prometheusRule": {"enabled": True}}}))
    out = subprocess.run(
        [str(helm), "template", "pc", str(CHART), "-f", str(values), "--kube-version",
         KUBERNETES.lstrip("v"), "--show-only", "templates/monitoring.yaml"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    (rule,) = [d for d in yaml.safe_load_all(out.stdout) if d]
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


def history(store: Path, target: str, finished: dt.datetime, exit_code: int) -> None:
    d = store / target
    d.mkdir(parents=True)
    started = finished - dt.timedelta(minutes=20)
    doc = {
        "schema_version": 1,
        "run_id": f"{started:%Y%m%dT%H%M%SZ}-abcdef",
        "target": target,
        "started": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "finished": finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "verdict": "failed" if exit_code else "passed",
        "scenarios": [{"name": "s", "status": "failed" if exit_code else "passed"}],
        "exit_code": exit_code,
    }
    (d / "history.jsonl").write_text(json.dumps(doc) + "\n")


def recovered(store: Path, target: str, dead_seen: dt.datetime) -> None:
    """The recover CronJob's record of a check that found the lock held by a dead runner
    (at ``dead_seen``), took it over, undid everything and released it."""
    free = {"held": False, "holder": "", "holder_alive": False, "expires_in_s": 0.0}
    seen = dead_seen.timestamp()
    doc = {
        "checked": seen, "finished": seen + 20, "exit_code": 0, "owed": 0, "lock": free,
        "found": {"owed": 2, "lock": {"held": True, "holder": "pc-lab-x/pid-7/ab",
                                      "holder_alive": False, "expires_in_s": -30.0}},
        "dead_holder": {"holder": "pc-lab-x/pid-7/ab", "seen": seen},
    }  # fmt: skip
    (store / target / "recover.json").write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusClient]:
    tmp = tmp_path_factory.mktemp("alerts")
    store = tmp / "store"
    now = dt.datetime.now(dt.UTC)
    history(store, "restore-failed", now, 4)
    history(store, "gate-failed", now, 1)
    history(store, "passed", now, 0)
    history(store, "stale", now - dt.timedelta(hours=27), 0)
    # killed after its last run's end / killed, then a later run finished
    history(store, "killed", now - dt.timedelta(hours=1), 0)
    recovered(store, "killed", now - dt.timedelta(minutes=5))
    history(store, "killed-then-ran", now, 0)
    recovered(store, "killed-then-ran", now - dt.timedelta(minutes=5))
    page = make_server(store, "127.0.0.1", 0)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    job = ScrapeJob("powercut-page", [f"127.0.0.1:{page.server_address[1]}"])
    server = PrometheusServer(tmp / "prometheus", free_port(), [job], rules=chart_rules(tmp))
    try:
        with server, PrometheusClient(PrometheusSpec(url=server.url)) as client:
            yield client
    finally:
        page.shutdown()
        page.server_close()


def firing(client: PrometheusClient) -> set[tuple[str, str]]:
    return {
        (s.labels["alertname"], s.labels.get("target", ""))
        for s in client.query('ALERTS{alertstate="firing"}')
    }


def test_each_alert_fires_for_its_own_failure_only(prometheus: PrometheusClient) -> None:
    want = {
        ("PowercutRestoreFailed", "restore-failed"),
        ("PowercutNightFailed", "gate-failed"),
        ("PowercutNoRecentRun", "stale"),
        ("PowercutRunnerDied", "killed"),
    }
    deadline = time.monotonic() + 60
    seen: set[tuple[str, str]] = set()
    while time.monotonic() < deadline:
        seen = firing(prometheus)
        if want <= seen:
            break
        time.sleep(0.5)
    assert seen == want, f"firing: {sorted(seen)}"


def test_promtool_finds_nothing_to_lint_in_the_metrics(tmp_path: Path) -> None:
    from harness.report.metrics import render_metrics

    history(tmp_path, "rack-a", dt.datetime.now(dt.UTC), 4)
    (tmp_path / "rack-a" / "recover.json").write_text(
        json.dumps({"checked": 1.0, "owed": 1, "exit_code": 0,
                    "lock": {"held": True, "holder_alive": False}})
    )  # fmt: skip
    text = render_metrics(tmp_path)
    assert 'powercut_lock_held{target="rack-a"} 1' in text
    out = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr
