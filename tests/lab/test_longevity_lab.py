"""Longevity against the lab: a 3-cycle run whose statistics are checked against the saved
timelines with the library's own checks, and a crash mid-cycle followed by ``recover`` and
``--resume``."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.checks import node_not_ready, pods_evicted, probe_health
from harness.checks.base import CheckFailed
from harness.journal import EntryState, Journal
from harness.kube.names import Act, Stage
from harness.kube.timeline import ACTION, Timeline
from harness.longevity.groups import auto_groups
from harness.longevity.measure import MARK
from harness.longevity.records import CYCLES_FILE, CycleRecord, read_log
from harness.power.base import PowerState
from harness.power.factory import driver_for
from harness.session import journal_path_for
from tests.lab.conftest import POWERCUT, LabHandle, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.disruptive, pytest.mark.needs_bmc, pytest.mark.slow]

# Fast enough for `make test`: nodes stay off 5 s at least (longer while eviction and
# rescheduling are still within their budgets); cleanup is nudged after 10 s.
FAST = ["--probe-interval", "0.25s", "--budget", "cleanup=20s"]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    return {**os.environ, "POWERCUT_STATE_DIR": str(tmp_path / "state")}


def longevity(
    env: dict[str, str], *args: str, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*POWERCUT, "longevity", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def power(lab: LabHandle, node: str) -> PowerState:
    d = driver_for(lab.inventory.node(node), "ipmi")
    try:
        return d.state()
    finally:
        d.close()


@pytest.fixture(autouse=True)
def all_on(lab: LabHandle) -> object:
    yield None
    for n in lab.inventory.node_names():
        if power(lab, n) is not PowerState.ON:
            d = driver_for(lab.inventory.node(n), "ipmi")
            d.on()
            d.close()


def nearest_rank(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[max(1, math.ceil(p / 100 * len(s))) - 1]


def independent_phases(
    tl: Timeline, record: CycleRecord, critical_services: list[str]
) -> dict[str, float]:
    """not_ready, evacuation, service outage and cleanup of one cycle, computed from its
    timeline with the library's checks (not with the longevity measurement)."""
    acks = {
        t.name: t
        for t in tl.all(ACTION, transition="power-off acknowledged")
        if t.name in record.nodes
    }
    on = tl.first(ACTION, transition="power-on acknowledged")
    done = tl.first(ACTION, MARK, "cleanup done")
    assert on is not None and done is not None
    not_ready = max(
        node_not_ready(tl, n, since=acks[n], budget_s=on.mono - acks[n].mono).duration_s
        for n in record.nodes
    )
    evacuation = 0.0
    for n in record.nodes:
        try:
            m = pods_evicted(
                tl, n, since=acks[n], budget_s=on.mono - acks[n].mono, namespace="lab", min_pods=0
            )
        except CheckFailed:
            continue  # not evicted before power-on: the record says incomplete
        evacuation = max(evacuation, m.duration_s)
    first_sent = min(t.mono for t in tl.all(ACTION, transition="power-off sent"))
    outage = max(
        probe_health(tl, name, start=first_sent, end=done.mono, min_success_ratio=0.0).duration_s
        for name in critical_services
    )
    phases = {"not_ready": not_ready, "service_outage": outage, "cleanup": done.mono - on.mono}
    if record.phases["evacuation"] is not None:  # None: no protected pod on the lost nodes
        phases["evacuation"] = evacuation
    return phases


def test_three_cycles_statistics_match_the_timelines(
    lab: LabHandle, env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    started = time.monotonic()
    proc = longevity(
        env,
        "-i",
        str(lab.inventory_path),
        "--cycles",
        "3",
        "--groups",
        "auto",  # the fixed groups, rotated (by default each cycle chooses its own)
        "--out",
        str(out),
        "--keep-timelines",
        "all",
        "--outage",
        "5s",
        *FAST,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 1: a cycle missed
    assert "stopped: 3 cycles done" in proc.stdout, proc.stdout + proc.stderr
    log = read_log(out / CYCLES_FILE)
    groups = auto_groups(lab.inventory, 1 / 3)
    assert [(c.cycle, c.group, c.nodes) for c in log.cycles] == [
        (i + 1, g.name, list(g.nodes)) for i, g in enumerate(groups)
    ]
    assert all(c.status != "failed" for c in log.cycles), [c.reason for c in log.cycles]
    services = [w.name or "" for w in lab.inventory.workloads if w.health and w.critical]
    mine: dict[str, list[float]] = {}
    for c in log.cycles:
        assert c.timeline is not None
        tl = Timeline.from_json((out / c.timeline).read_bytes())
        for phase, value in independent_phases(tl, c, services).items():
            if phase == "evacuation" and phase in c.incomplete:
                continue
            assert c.phases[phase] == pytest.approx(value, abs=2e-3), (c.cycle, phase)
            mine.setdefault(phase, []).append(value)
        assert c.phases["recovery"] is not None and c.phases["not_ready"] is not None
    stats = json.loads((out / "stats.json").read_text())
    assert stats["run"]["cycles"] == 3
    for phase, values in mine.items():
        st = stats["phases"][phase]
        assert st["count"] == len(values)
        assert st["max"] == pytest.approx(max(values), abs=2e-3)
        assert st["min"] == pytest.approx(min(values), abs=2e-3)
        assert st["p50"] == pytest.approx(nearest_rank(values, 50), abs=2e-3)
        assert st["mean"] == pytest.approx(sum(values) / len(values), abs=2e-3)
    assert (out / "cycles.csv").read_text().count("\n") == 4
    assert (out / "plots" / "phases.png").exists(), proc.stdout + proc.stderr
    assert (out / "plots" / "histograms.png").exists()
    assert len(list((out / "allure-results").glob("*-result.json"))) == 4
    print(f"3 lab cycles in {elapsed:.0f}s; {[c.duration_s for c in log.cycles]}")


def test_reboot_cycles_are_the_bmcs_power_cycle_measured_from_its_power_off_to_its_ack(
    lab: LabHandle, env: dict[str, str], tmp_path: Path
) -> None:
    """``--failure reboot`` is the steps' reboot (one dispatch, harness.failures):
    each group is power-cycled through its BMCs, never powered off and on as two requests,
    with no minimum outage (although --outage asks for 60 s), and measured as the steps
    measure it (``names.downs``): from the power-off's acknowledgement within the cycle (a
    one-node reset has none: from its request) to the cycle's acknowledgement."""
    out = tmp_path / "reboot"
    proc = longevity(
        env,
        "-i",
        str(lab.inventory_path),
        "--cycles",
        "1",
        "--failure",
        "reboot",
        "--out",
        str(out),
        "--keep-timelines",
        "all",
        "--outage",
        "60s",
        *FAST,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    (c,) = read_log(out / CYCLES_FILE).cycles
    assert c.status != "failed", c.reason
    assert c.timeline is not None
    tl = Timeline.from_json((out / c.timeline).read_bytes())
    sent_name = Act.POWER_CYCLE.at(Stage.SENT)
    ack_name = Act.POWER_CYCLE.at(Stage.ACKNOWLEDGED)
    for node in c.nodes:
        sent = tl.first(ACTION, node, sent_name)
        ack = tl.first(ACTION, node, ack_name)
        assert sent is not None and ack is not None and sent.mono < ack.mono
        assert tl.first(ACTION, node, Act.POWER_OFF.at(Stage.SENT)) is None
        assert tl.first(ACTION, node, Act.POWER_ON.at(Stage.SENT)) is None
    first_sent = min(tl.first(ACTION, n, sent_name).mono for n in c.nodes)  # type: ignore[union-attr]
    first_ack = min(tl.first(ACTION, n, ack_name).mono for n in c.nodes)  # type: ignore[union-attr]
    assert first_ack - first_sent < 30.0  # not held off for the 60 s outage
    off_name = Act.POWER_CYCLE_OFF.at(Stage.ACKNOWLEDGED)
    offs = [t.mono for n in c.nodes if (t := tl.first(ACTION, n, off_name)) is not None]
    down_from = min(offs) if offs else first_sent  # a one-node BMC reset: its request
    assert first_sent <= down_from < first_ack
    power_detail = c.detail["power"]
    assert power_detail["off_s"] == pytest.approx(first_ack - down_from, abs=2e-3)
    assert power_detail["off_sent_to_ack_s"] == pytest.approx(down_from - first_sent, abs=2e-3)
    assert lab.inventory.node_names() and all(power(lab, n) is PowerState.ON for n in c.nodes)
    # The group was chosen by the default target (sparing the critical workloads) from where
    # the pods were at the cycle's start: every critical workload kept Ready pods elsewhere.
    assert c.group == "c1"
    at_start = {
        (t.namespace, t.name): t.detail
        for t in tl.snapshot()
        if t.kind == "Pod" and t.transition == "observed" and t.mono < first_sent
    }
    for spec in lab.inventory.workloads:
        if spec.critical and spec.kind != "DaemonSet" and spec.name:
            kept = [
                name
                for (ns, name), d in at_start.items()
                if ns == spec.namespace
                and str(d.get("workload", "")).endswith(f"/{spec.name}")
                and d.get("ready")
                and d.get("node") not in c.nodes
            ]
            assert kept, f"{spec.name}: no Ready pod left outside {c.nodes}"
    print(f"reboot cycle: down {first_ack - first_sent:.2f}s; phases {c.phases}")


def test_crash_mid_cycle_then_recover_then_resume(
    lab: LabHandle, env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    inv = str(lab.inventory_path)
    journal = journal_path_for(lab.inventory)
    proc = subprocess.Popen(
        [
            *POWERCUT,
            "longevity",
            "-i",
            inv,
            "--cycles",
            "2",
            "--groups",
            "auto",  # the fixed groups, rotated: g2 is known before the run
            "--out",
            str(out),
            "--outage",
            "30s",
            *FAST,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:

        def in_cycle_two() -> bool:
            if not (out / CYCLES_FILE).exists() or not read_log(out / CYCLES_FILE).cycles:
                return False
            off = [
                e
                for e in Journal.read(journal)
                if e.state is EntryState.DONE and e.action == "power_off"
            ]
            return len(off) == 3

        wait_for("cycle 2 to power its group off", in_cycle_two, 400, every_s=0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    g2 = auto_groups(lab.inventory, 1 / 3)[1]
    assert [power(lab, n) for n in g2.nodes] == [PowerState.OFF] * 3
    log = read_log(out / CYCLES_FILE)
    assert [c.cycle for c in log.cycles] == [1]
    assert log.last_stop is None  # it died: nobody wrote why
    # the resume refuses while the journal owes the undos
    early = longevity(env, "--resume", str(out))
    assert early.returncode == 2 and "powercut recover" in early.stderr, early.stderr
    rec = subprocess.run(
        [*POWERCUT, "recover", "-i", inv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert [power(lab, n) for n in g2.nodes] == [PowerState.ON] * 3
    resumed = longevity(env, "--resume", str(out), "--outage", "5s")
    assert resumed.returncode in (0, 1), resumed.stdout + resumed.stderr
    assert "stopped: 2 cycles done" in resumed.stdout
    log = read_log(out / CYCLES_FILE)
    assert [(c.cycle, c.group) for c in log.cycles] == [(1, "g1"), (2, "g2")]
    assert [r["event"] for r in log.runs] == ["start", "resume", "stop"]
    assert all(c.status != "failed" for c in log.cycles), [c.reason for c in log.cycles]
    assert not [e for e in Journal.read(journal) if e.owes_undo]
