"""chaostoolkit experiments run in-process against the fake cluster: the shipped drain
experiment, a deviating one, and the Gherkin step's verdicts; plus discovery."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.chaos import discover
from harness.chaos.__main__ import main as chaos_main
from harness.chaos._common import names, seconds
from harness.chaos.experiment import ExperimentBroken, ExperimentDeviated
from harness.chaos.runner import judge, run_experiment_file
from harness.errors import ConfigError
from harness.journal import EntryState
from harness.steps.chaos_steps import run_chaos_experiment
from tests.fakes.chaos import Cluster, fake_cluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with fake_cluster(tmp_path, monkeypatch) as c:
        yield c


def python(module: str, func: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "python", "module": module, "func": func, "arguments": arguments}


def experiment(tmp_path: Path, hypothesis: list[dict[str, Any]], method: list[Any]) -> Path:
    path = tmp_path / "experiment.json"
    path.write_text(
        json.dumps(
            {
                "title": "test",
                "description": "test",
                "configuration": {
                    "powercut_inventory": {"type": "env", "key": "POWERCUT_INVENTORY"}
                },
                "runtime": {"rollbacks": {"strategy": "always"}},
                "steady-state-hypothesis": {"title": "h", "probes": hypothesis},
                "method": method,
                "rollbacks": [
                    {
                        "type": "action",
                        "name": "power-on",
                        "provider": python(
                            "harness.chaos.actions", "power_on_nodes", wait_ready=False
                        ),
                    }
                ],
            }
        )
    )
    return path


POWERED = {
    "type": "probe",
    "name": "w1-is-powered",
    "tolerance": "on",
    "provider": python("harness.chaos.probes", "power_state", node="w1"),
}
POWER_OFF = {
    "type": "action",
    "name": "power-off-w1",
    "provider": python("harness.chaos.actions", "power_off_nodes", nodes="w1"),
}


def test_the_drain_experiment_holds_and_is_rolled_back(cluster: Cluster) -> None:
    journal = run_experiment_file(
        ROOT / "features" / "experiments" / "drain-worker.json",
        inventory=cluster.path,
    )
    outcome = judge(journal)
    assert outcome.ok, outcome.describe()
    assert journal["run"][0]["output"]["node"] == "w2"
    [entry] = cluster.journal()
    assert (entry.action, entry.target, entry.state) == ("drain", "node/w2", EntryState.UNDONE)
    assert not cluster.node("w2")["spec"].get("unschedulable")


def test_a_deviation_names_the_probe_and_the_rollback_still_runs(
    cluster: Cluster, tmp_path: Path
) -> None:
    path = experiment(tmp_path, [POWERED], [POWER_OFF])
    journal = run_experiment_file(path, inventory=cluster.path)
    outcome = judge(journal)
    assert not outcome.ok
    assert outcome.deviated == [
        "steady-state hypothesis deviated after the method: probe 'w1-is-powered' "
        '(harness.chaos.probes.power_state) returned "off", tolerance "on"'
    ]
    assert cluster.docker.status("w1") == ("running", False)
    assert [e.state for e in cluster.journal()] == [EntryState.UNDONE]


def test_a_probe_that_raises_and_a_failed_activity_are_named(
    cluster: Cluster, tmp_path: Path
) -> None:
    broken = {
        "type": "probe",
        "name": "no-such-node",
        "tolerance": "on",
        "provider": python("harness.chaos.probes", "power_state", node="w9"),
    }
    journal = run_experiment_file(experiment(tmp_path, [broken], []), inventory=cluster.path)
    [line] = judge(journal).deviated
    assert line.startswith("steady-state hypothesis deviated before the method: probe 'no-such")
    assert "raised" in line and "unknown node 'w9'" in line

    wait = {
        "type": "action",
        "name": "eviction",
        "provider": python("harness.chaos.actions", "wait_for_eviction", within="0.2s"),
    }
    journal = run_experiment_file(
        experiment(tmp_path, [POWERED], [POWER_OFF, wait]), inventory=cluster.path
    )
    outcome = judge(journal)
    [check] = outcome.check_failures
    assert check.startswith("method action 'eviction' (harness.chaos.actions.wait_for_eviction)")
    assert "CheckFailed: eviction: expected every pod of node w1 evicted" in check
    assert outcome.errors == []


def test_the_step_fails_naming_the_deviated_probe(
    cluster: Cluster, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    path = experiment(tmp_path, [POWERED], [POWER_OFF])
    with pytest.raises(ExperimentDeviated, match="probe 'w1-is-powered'"):
        run_chaos_experiment(str(path), cluster.inventory, pytestconfig)
    run = run_chaos_experiment("experiments/drain-worker.json", cluster.inventory, pytestconfig)
    assert run.outcome.ok and [e.action for e in run.disruptions] == ["drain"]


def test_the_step_breaks_on_an_error_that_is_not_a_check(
    cluster: Cluster, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    bad = {
        "type": "action",
        "name": "partition-a-bmc-node",
        "provider": python("harness.chaos.actions", "partition_node", node="bmc1"),
    }
    path = experiment(tmp_path, [POWERED], [bad])
    with pytest.raises(ExperimentBroken, match=r"partition-a-bmc-node.*cannot do a partition"):
        run_chaos_experiment(str(path), cluster.inventory, pytestconfig)


def test_the_step_finds_the_experiment_file(cluster: Cluster, pytestconfig: pytest.Config) -> None:
    with pytest.raises(ConfigError, match=r"no experiment file 'nope\.json'"):
        run_chaos_experiment("nope.json", cluster.inventory, pytestconfig)


def test_judge_of_failed_rollbacks_and_interrupted_runs() -> None:
    rollback = {
        "activity": {
            "type": "action",
            "name": "power-on",
            "provider": {"module": "harness.chaos.actions", "func": "power_on_nodes"},
        },
        "status": "failed",
        "exception": [
            "Traceback...\n",
            "chaoslib.exceptions.ActivityFailed: harness.errors.PermanentError: BMC refused\n",
        ],
    }
    outcome = judge({"status": "completed", "deviated": False, "rollbacks": [rollback]})
    assert not outcome.ok
    assert outcome.errors == [
        "rollback action 'power-on' (harness.chaos.actions.power_on_nodes) failed: "
        "harness.errors.PermanentError: BMC refused"
    ]
    interrupted = judge({"status": "interrupted", "deviated": False})
    assert not interrupted.ok
    assert interrupted.describe() == "the experiment ended with status 'interrupted'"
    assert judge({"status": "completed", "deviated": False}).describe() == "the steady state held"


# -- helpers and discovery -------------------------------------------------------------------


def test_within_takes_budgets_durations_and_seconds(cluster: Cluster) -> None:
    inv = cluster.inventory  # fast profile
    assert seconds(inv, "pod-eviction") == 25.0
    assert seconds(inv, "the node_not_ready budget") == 20.0
    assert seconds(inv, "90s") == 90.0
    assert seconds(inv, 12) == 12.0
    assert seconds(inv, None, ("node_not_ready", "taint_applied")) == 45.0
    assert seconds(inv, None) == 0.0
    with pytest.raises(ConfigError, match=r"neither a duration.*nor a budget"):
        seconds(inv, "soonish")


def test_node_names() -> None:
    assert names(None) == names("") == []
    assert names(" w1, w2,w1 ") == ["w1", "w2"]
    assert names(["w3"]) == ["w3"]


def test_discovery_lists_every_activity(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = discover()
    assert found["extension"]["name"] == "powercut"
    by_name = {a["name"]: a for a in found["activities"]}
    assert by_name["power_off_nodes"]["type"] == "action"
    assert by_name["workload_available"]["type"] == "probe"
    args = {a["name"]: a.get("type") for a in by_name["power_off_nodes"]["arguments"]}
    assert args == {
        "nodes": "string",
        "role": "string",
        "rack": "string",
        "count": "integer",
        "graceful": "boolean",
        "protocol": "string",
        "configuration": "mapping",
    }
    assert by_name["workload_available"]["return_type"] == "boolean"
    assert by_name["pods_on_node"]["return_type"] == "integer"
    assert found["system"]["nodes"][1] == {
        "name": "w1",
        "role": "worker",
        "rack": "rack-a",
        "power": "kind",
    }
    out = tmp_path / "discovery.json"
    assert chaos_main(["discover", "--discovery-path", str(out)]) == 0
    assert json.loads(out.read_text())["activities"]
