"""Guaranteed recovery against the lab: journal, SIGTERM, SIGKILL + recover, lock, secrets."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from harness.inventory import load_inventory
from harness.journal import Journal
from harness.kube.timeline import ACTION
from harness.power.base import PowerState
from harness.power.factory import driver_for
from harness.session import Session, journal_path_for
from tests.lab.conftest import POWERCUT, LabHandle, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.disruptive, pytest.mark.needs_bmc]
VICTIM = "w-b3"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    return {**os.environ, "POWERCUT_STATE_DIR": str(tmp_path / "state")}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*POWERCUT, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def power(lab: LabHandle, node: str = VICTIM) -> PowerState:
    d = driver_for(lab.inventory.node(node), "ipmi")
    try:
        return d.state()
    finally:
        d.close()


def node_ready(lab: LabHandle, node: str = VICTIM) -> bool:
    conds = lab.client.get(f"/api/v1/nodes/{node}")["status"]["conditions"]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


@pytest.fixture(autouse=True)
def back_on(lab: LabHandle) -> object:
    # Each test starts from a Ready victim: the test before may have just powered it back
    # on, and `power off` / `cycle` refuse a node that is not Ready (pre-flight). Booted
    # first: a victim powered on a moment ago still reads the Ready it had before it went
    # off, until the grace period turns it Unknown (seen: the next test's pre-flight failed).
    wait_for(
        f"{VICTIM} booted and Ready before the test",
        lambda: lab.booted(VICTIM) and node_ready(lab),
        90,
    )
    yield None
    for n in (VICTIM, "cp-1", "cp-2"):
        if power(lab, n) is not PowerState.ON:
            d = driver_for(lab.inventory.node(n), "ipmi")
            d.on()
            d.close()


def test_cli_power_off_is_journaled_and_recover_is_idempotent(
    lab: LabHandle, env: dict[str, str]
) -> None:
    inv = str(lab.inventory_path)
    out = run(env, "power", "off", VICTIM, "-i", inv)
    assert out.returncode == 0, out.stderr
    assert power(lab) is PowerState.OFF
    status = run(env, "power", "status", VICTIM, "-i", inv, "--protocol", "redfish")
    assert status.stdout.split() == [VICTIM, "redfish", "off"]
    first = run(env, "recover", "-i", inv)
    assert first.returncode == 0, first.stderr
    assert re.search(rf"done \([\d.]+ s\): power_on\(node='{VICTIM}'\)", first.stdout), first.stdout
    assert power(lab) is PowerState.ON
    second = run(env, "recover", "-i", inv)
    assert second.returncode == 0 and "nothing to recover" in second.stdout


def test_dry_run_and_blast_radius_touch_nothing(lab: LabHandle, env: dict[str, str]) -> None:
    inv = str(lab.inventory_path)
    dry = run(env, "power", "off", VICTIM, "-i", inv, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"power off {VICTIM}" in dry.stdout and "nothing was changed" in dry.stdout
    assert power(lab) is PowerState.ON
    assert not journal_path_for(lab.inventory).exists()
    refused = run(env, "power", "off", "cp-1", "cp-2", "-i", inv)
    assert refused.returncode == 2
    assert "control-plane" in refused.stderr and "Traceback" not in refused.stderr
    assert power(lab, "cp-1") is PowerState.ON and power(lab, "cp-2") is PowerState.ON


SCRIPT = textwrap.dedent(
    """
    import sys, time
    from harness.inventory import load_inventory
    from harness.session import Session
    inv = load_inventory(sys.argv[1])
    with Session(inv) as s:
        print("START", flush=True)
        s.power_off([sys.argv[2]])
        print("OFF", flush=True)
        time.sleep(300)
    """
)


def _scenario(lab: LabHandle, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(lab.inventory_path), VICTIM],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_sigterm_during_power_off_puts_the_node_back(lab: LabHandle, env: dict[str, str]) -> None:
    proc = _scenario(lab, env)
    try:
        journal = journal_path_for(lab.inventory)
        # The undo is journaled before the BMC is asked: signal as soon as it is on disk.
        wait_for(
            "the power-off journaled",
            lambda: journal.exists() and '"begin"' in journal.read_text(),
            60,
            0.01,
        )
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert power(lab) is PowerState.ON, proc.stderr.read() if proc.stderr else ""
    with Journal(journal) as j:
        assert j.pending_undos() == []


def test_sigkill_leaves_it_to_recover(lab: LabHandle, env: dict[str, str]) -> None:
    proc = _scenario(lab, env)
    try:
        stdout = proc.stdout
        assert stdout is not None
        wait_for("the node powered off", lambda: "OFF" in (stdout.readline() or ""), 60)
        proc.kill()
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(1)
    assert power(lab) is PowerState.OFF, "SIGKILL leaves no chance to undo: the node stays off"
    out = run(env, "recover", "-i", str(lab.inventory_path))
    assert out.returncode == 0, out.stderr
    assert "released the cluster lock" in out.stdout
    assert power(lab) is PowerState.ON
    # The lock is free again: a new session can start at once.
    with Session(load_inventory(lab.inventory_path)):
        pass


def test_lock_keeps_two_runs_apart(lab: LabHandle, env: dict[str, str], tmp_path: Path) -> None:
    # Another machine's run: its own journal, the same cluster.
    with Session(lab.inventory, journal_path=tmp_path / "elsewhere.jsonl"):
        out = run(env, "power", "off", VICTIM, "-i", str(lab.inventory_path))
    assert out.returncode == 2
    assert "cluster lock" in out.stderr
    assert power(lab) is PowerState.ON


def test_secrets_never_appear(lab: LabHandle, env: dict[str, str], tmp_path: Path) -> None:
    real = (
        Path(lab.inventory.node(VICTIM).power_for("ipmi").password_file or "").read_text().strip()
    )
    wrong = "Wr0ng-S3cret-Pa55w0rd"
    doc = yaml.safe_load(lab.inventory_path.read_text())
    for n in doc["nodes"]:
        for p in [n["power"], *n["power_alternatives"]]:
            p.pop("password_file")
            p["password_env"] = "LAB_BMC_PW"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    seen = []
    for proto in ("ipmi", "redfish"):
        out = run(
            {**env, "LAB_BMC_PW": wrong},
            "-v",
            "power",
            "status",
            VICTIM,
            "-i",
            str(bad),
            "--protocol",
            proto,
        )
        assert out.returncode == 2, out.stdout
        seen.append(out.stdout + out.stderr)
    good = run({**env, "LAB_BMC_PW": real}, "-v", "power", "cycle", VICTIM, "-i", str(bad))
    assert good.returncode == 0, good.stderr
    seen.append(good.stdout + good.stderr)
    journal = journal_path_for(load_inventory(bad))
    if journal.exists():
        seen.append(journal.read_text())
    for text in seen:
        assert wrong not in text and real not in text


def test_fencing_needs_the_bmc_to_read_off_before_the_out_of_service_taint(
    lab: LabHandle, env: dict[str, str]
) -> None:
    from harness.kube.actions import OUT_OF_SERVICE_KEY, FencingRequired

    def tainted() -> bool:
        taints = lab.client.get(f"/api/v1/nodes/{VICTIM}")["spec"].get("taints") or []
        return any(t["key"] == OUT_OF_SERVICE_KEY for t in taints)

    with Session(lab.inventory, client=lab.client) as s:
        # Running (as a partitioned node would be): refused, through its real BMCs.
        with pytest.raises(FencingRequired, match="reads power on"):
            s.add_out_of_service_taint(VICTIM)
        assert not tainted()
        s.power_off([VICTIM])
        s.add_out_of_service_taint(VICTIM)  # the BMC reads OFF: fenced
        assert tainted()
        fenced = s.timeline.first(ACTION, VICTIM, "fenced")
        assert fenced is not None
    # The session undid both, the taint first: nothing is left.
    assert not tainted()
    assert power(lab) is PowerState.ON
