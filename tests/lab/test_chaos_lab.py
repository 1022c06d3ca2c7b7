"""chaostoolkit experiments against the lab: `chaos run`, the Gherkin step, and recovery.

- ``chaos run features/experiments/worker-power-loss.json`` (the real CLI, in a
  subprocess) powers a worker off through its BMC, waits for the eviction, holds its steady
  state and powers the worker back on; the powercut journal shows the power-off undone.
- An experiment whose hypothesis does not hold fails the Gherkin step ``When I run the
  chaos experiment ...`` naming the deviated probe, and its rollback still runs.
- The drain experiment through the Gherkin scenario of ``features/chaos.feature``
  (``steps/test_chaos.py``): it passes and attaches chaostoolkit's journal to Allure.
- A ``chaos run`` killed between its method and its rollback leaves the worker off; the
  journal lets ``powercut recover`` power it on.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from harness.chaos import actions, probes
from harness.inventory import load_inventory
from harness.journal import EntryState, Journal
from harness.power.base import PowerState
from harness.power.factory import driver_for
from harness.session import journal_path_for
from tests.lab.conftest import POWERCUT, LabHandle, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.disruptive, pytest.mark.needs_bmc, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CHAOS = [str(Path(sys.executable).with_name("chaos")), "--no-version-check"]
VICTIM = "w-c2"


@pytest.fixture
def env(lab: LabHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    state = str(tmp_path / "state")
    monkeypatch.setenv("POWERCUT_STATE_DIR", state)
    monkeypatch.setenv("POWERCUT_INVENTORY", str(lab.inventory_path))
    return {
        **os.environ,
        "POWERCUT_STATE_DIR": state,
        "POWERCUT_INVENTORY": str(lab.inventory_path),
    }


def power(lab: LabHandle, node: str) -> PowerState:
    d = driver_for(lab.inventory.node(node))
    try:
        return d.state()
    finally:
        d.close()


def settled(lab: LabHandle) -> bool:
    cfg = {"powercut_inventory": str(lab.inventory_path)}
    return all(probes.node_ready(n, configuration=cfg) for n in lab.inventory.node_names()) and (
        probes.workload_available(configuration=cfg)
    )


@pytest.fixture(autouse=True)
def steady_before_and_after(lab: LabHandle, env: dict[str, str]) -> Any:
    wait_for("the lab Ready with its workloads available", lambda: settled(lab), 180, 2)
    yield None
    run(env, *POWERCUT, "recover", "-i", str(lab.inventory_path))
    for n in lab.inventory.node_names():
        if power(lab, n) is not PowerState.ON:
            d = driver_for(lab.inventory.node(n))
            d.on()
            d.close()
    wait_for("the lab Ready again", lambda: settled(lab), 180, 2)


def run(env: dict[str, str], *argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout, check=False
    )


def chaos_args(tmp: Path) -> list[str]:
    return [
        *CHAOS,
        "--settings",
        str(tmp / "settings.yaml"),
        "--log-file",
        str(tmp / "chaostoolkit.log"),
        "run",
        "--journal-path",
        str(tmp / "journal.json"),
    ]


def entries(lab: LabHandle) -> list[Any]:
    path = journal_path_for(load_inventory(lab.inventory_path))
    return Journal.read(path) if path.exists() else []


def experiment(
    tmp: Path, method: list[tuple[str, str, str, dict[str, Any]]], probe: dict[str, Any]
) -> Path:
    def py(module: str, func: str, **arguments: Any) -> dict[str, Any]:
        return {"type": "python", "module": module, "func": func, "arguments": arguments}

    data = {
        "title": "lab test experiment",
        "description": "written by tests/lab/test_chaos_lab.py",
        "configuration": {"powercut_inventory": {"type": "env", "key": "POWERCUT_INVENTORY"}},
        "runtime": {"rollbacks": {"strategy": "always"}},
        "steady-state-hypothesis": {"title": "the victim is powered", "probes": [probe]},
        "method": [
            {"type": "action", "name": name, "provider": py(module, func, **args)}
            for name, module, func, args in method
        ],
        "rollbacks": [
            {
                "type": "action",
                "name": "power-on",
                "provider": py("harness.chaos.actions", "power_on_nodes"),
            }
        ],
    }
    path = tmp / "experiment.json"
    path.write_text(json.dumps(data, indent=2))
    return path


POWERED = {
    "type": "probe",
    "name": "victim-is-powered",
    "tolerance": "on",
    "provider": {
        "type": "python",
        "module": "harness.chaos.probes",
        "func": "power_state",
        "arguments": {"node": VICTIM},
    },
}


def test_chaos_run_of_the_worker_power_loss_experiment(
    lab: LabHandle, env: dict[str, str], tmp_path: Path
) -> None:
    out = run(env, *chaos_args(tmp_path), "features/experiments/worker-power-loss.json")
    log = (
        (tmp_path / "chaostoolkit.log").read_text()
        if (tmp_path / "chaostoolkit.log").exists()
        else ""
    )
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr}\n{log[-4000:]}"
    journal = json.loads((tmp_path / "journal.json").read_text())
    assert journal["status"] == "completed" and not journal["deviated"]
    power_off, evicted = journal["run"]
    [victim] = power_off["output"]["nodes"]
    assert evicted["status"] == "succeeded"
    assert evicted["output"]["seconds"] <= evicted["output"]["budget_s"]
    [rollback] = journal["rollbacks"]
    assert rollback["status"] == "succeeded" and rollback["output"]["nodes"] == [victim]
    [entry] = entries(lab)
    assert (entry.action, entry.target, entry.state) == (
        "power_off",
        f"node/{victim}",
        EntryState.UNDONE,
    )
    assert power(lab, victim) is PowerState.ON
    assert probes.node_ready(victim, configuration={"powercut_inventory": str(lab.inventory_path)})


def test_a_deviated_hypothesis_fails_the_step_naming_the_probe(
    lab: LabHandle, env: dict[str, str], tmp_path: Path
) -> None:
    path = experiment(
        tmp_path,
        [("power-off-the-victim", "harness.chaos.actions", "power_off_nodes", {"nodes": VICTIM})],
        POWERED,
    )
    (tmp_path / "deviation.feature").write_text(
        textwrap.dedent(
            f"""\
            Feature: a chaos experiment whose hypothesis does not hold
              Scenario: the victim stays powered
                When I run the chaos experiment "{path}"
            """
        )
    )
    (tmp_path / "test_deviation.py").write_text(
        # the steps come from powercut's pytest plugin: one line binds a user's feature
        'from pytest_bdd import scenarios\n\nscenarios("deviation.feature")\n'
    )
    out = run(
        env,
        sys.executable,
        "-m",
        "pytest",
        str(tmp_path / "test_deviation.py"),
        "-c",
        str(ROOT / "pyproject.toml"),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        "--inventory",
        str(lab.inventory_path),
        "-q",
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "ExperimentDeviated" in out.stdout, out.stdout
    assert (
        "steady-state hypothesis deviated after the method: probe 'victim-is-powered' "
        '(harness.chaos.probes.power_state) returned "off", tolerance "on"' in out.stdout
    ), out.stdout
    # The rollback ran all the same: the victim is on and the journal says so.
    assert power(lab, VICTIM) is PowerState.ON
    assert [(e.action, e.state) for e in entries(lab)] == [("power_off", EntryState.UNDONE)]


def attachments(node: dict[str, Any]) -> list[str]:
    """Names of the attachments of an Allure result and of its steps, at any depth."""
    own = [str(a.get("name")) for a in node.get("attachments", [])]
    return own + [n for step in node.get("steps", []) for n in attachments(step)]


def test_the_drain_experiment_through_the_gherkin_scenario(
    lab: LabHandle, env: dict[str, str], tmp_path: Path
) -> None:
    results = tmp_path / "allure-results"
    out = run(
        env,
        sys.executable,
        "-m",
        "pytest",
        "steps/test_chaos.py",
        "-k",
        "drained",
        "-p",
        "no:cacheprovider",
        "--inventory",
        str(lab.inventory_path),
        "--alluredir",
        str(results),
        "-q",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout, out.stdout
    names = [
        name
        for f in results.glob("*-result.json")
        for name in attachments(json.loads(f.read_text()))
    ]
    assert "chaostoolkit journal: drain-worker.json" in names, names
    assert "powercut journal: disruptions of this experiment" in names, names
    [entry] = entries(lab)
    assert (entry.action, entry.state) == ("drain", EntryState.UNDONE)


def test_powercut_recover_after_a_killed_chaos_run(
    lab: LabHandle, env: dict[str, str], tmp_path: Path
) -> None:
    path = experiment(
        tmp_path,
        [("power-off-the-victim", "harness.chaos.actions", "power_off_nodes", {"nodes": VICTIM})],
        POWERED,
    )
    # Then a 10-minute pause (chaostoolkit's own), during which the run is killed. (A wait for
    # the node to be Ready does not block: a node reads Ready for seconds after its power cut.)
    data = json.loads(path.read_text())
    data["method"][0]["pauses"] = {"after": 600}
    path.write_text(json.dumps(data, indent=2))
    proc = subprocess.Popen(
        [*chaos_args(tmp_path), str(path)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            f"the power-off of {VICTIM} journaled as done",
            lambda: [(e.action, e.state) for e in entries(lab)] == [("power_off", EntryState.DONE)],
            120,
            0.5,
        )
        time.sleep(1)  # well inside the 10 min wait: the method is still running
        assert proc.poll() is None, "chaos run ended before it could be killed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert power(lab, VICTIM) is PowerState.OFF
    first = run(env, *POWERCUT, "recover", "-i", str(lab.inventory_path))
    assert first.returncode == 0, first.stdout + first.stderr
    assert re.search(rf"done \([\d.]+ s\): power_on\(node='{VICTIM}'\)", first.stdout), first.stdout
    assert power(lab, VICTIM) is PowerState.ON
    second = run(env, *POWERCUT, "recover", "-i", str(lab.inventory_path))
    assert "nothing to recover" in second.stdout


def test_a_partition_through_the_session_cuts_the_node_off_and_heals_it(lab: LabHandle) -> None:
    """``partition_node`` goes through ``Session.cut`` as the steps' partitions do: the node
    keeps its power on while it stops reporting, the journal holds the heal as its undo, and
    ``heal_partition`` (a session of its own) brings it back and marks the entry undone."""
    cfg = {"powercut_inventory": str(lab.inventory_path)}
    out = actions.partition_node(VICTIM, heal_after="10m", configuration=cfg)
    assert out["heal_after_s"] == 600.0
    [entry] = entries(lab)
    assert (entry.action, entry.state, entry.undo.action) == ("partition", EntryState.DONE, "heal")
    wait_for(
        f"{VICTIM} NotReady while cut off",
        lambda: not probes.node_ready(VICTIM, within="1s", configuration=cfg),
        120,
        1,
    )
    assert power(lab, VICTIM) is PowerState.ON  # cut off, not powered off
    assert actions.heal_partition(configuration=cfg) == {"nodes": [VICTIM]}
    assert [e.state for e in entries(lab)] == [EntryState.UNDONE]
    assert probes.node_ready(VICTIM, within="2m", configuration=cfg)
