"""The results history (schema_version 1, JSONL per target): harness.report.history."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ConfigError
from harness.report.history import (
    Gate,
    HistoryError,
    Phase,
    Run,
    Scenario,
    Slo,
    append_run,
    check_target,
    from_allure_results,
    new_run_id,
    read_history,
    run_from_json,
    target_store,
    verdict_of,
)


def sample_run(run_id: str = "20261126T154300Z-abc123", value: float = 1.2) -> Run:
    return Run(
        run_id=run_id,
        target="lab",
        started="2026-11-26T15:43:00Z",
        finished="2026-11-26T15:50:00Z",
        verdict="passed",
        powercut_version="0.9.0",
        inventory="inventories/lab.yaml",
        seed=42,
        gates=(Gate("no phase over budget", True, "0 of 3 over"),),
        scenarios=(
            Scenario(
                name="Worker loses power",
                status="passed",
                feature="Power loss",
                epic="Node failure",
                severity="critical",
                duration_s=12.3,
                phases={"w1 NotReady": Phase(value, 30.0), "evacuation": Phase(5.0, None)},
                slos={"availability": Slo(True, 0.99)},
                data_ok=True,
            ),
        ),
    )


def test_the_documented_line_reads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "lab" / "history.jsonl"
    run = sample_run()
    append_run(path, run)
    line = path.read_text().splitlines()[0]
    doc = json.loads(line)
    assert doc["schema_version"] == 1
    assert doc["scenarios"][0]["phases"]["w1 NotReady"] == {
        "value_s": 1.2,
        "budget_s": 30.0,
        "complete": True,
        "gap": False,
    }
    assert doc["scenarios"][0]["slos"] == {"availability": {"ok": True, "worst": 0.99}}
    assert read_history(path).runs == (run,)


def test_unknown_keys_are_ignored_and_newer_schemas_skipped(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    doc = sample_run().to_json()
    doc["added_later"] = {"x": 1}
    doc["scenarios"][0]["also_new"] = [1, 2]
    doc["scenarios"][0]["phases"]["w1 NotReady"]["p99"] = 3
    newer = {**doc, "schema_version": 2, "run_id": "20261126T160000Z-000000"}
    path.write_text(json.dumps(doc) + "\n" + json.dumps(newer) + "\n")
    history = read_history(path)
    assert [r.run_id for r in history.runs] == ["20261126T154300Z-abc123"]
    assert history.newer_schema == 1
    assert history.runs[0] == sample_run()


@pytest.mark.parametrize(
    ("mutate", "says"),
    [
        (lambda d: d.update(verdict="green"), "verdict is 'green'; valid: passed, failed, broken"),
        (lambda d: d.update(schema_version=0), "schema_version is 0"),
        (lambda d: d["scenarios"][0].update(status="ok"), "status is 'ok'"),
        (
            lambda d: d["scenarios"][0]["phases"]["w1 NotReady"].update(value_s="1.2"),
            "value_s must be a number",
        ),
        (lambda d: d.update(seed="x"), "seed must be an integer"),
    ],
)
def test_a_bad_line_names_file_line_and_field(tmp_path: Path, mutate: Any, says: str) -> None:
    path = tmp_path / "history.jsonl"
    good = sample_run().to_json()
    bad = sample_run("20261126T160000Z-000001").to_json()
    mutate(bad)
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(HistoryError) as err:
        read_history(path)
    assert f"{path}:3" in str(err.value)
    assert says in str(err.value)


def test_a_torn_last_line_is_reported_and_the_next_append_starts_a_new_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.jsonl"
    append_run(path, sample_run())
    with path.open("a") as fh:
        fh.write('{"schema_version": 1, "run_id": "2026')  # a writer killed mid-line
    with pytest.raises(HistoryError, match="torn last line"):
        read_history(path)
    append_run(path, sample_run("20261126T170000Z-000002"))
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert json.loads(lines[2])["run_id"] == "20261126T170000Z-000002"


def _append_many(path: str, worker: int) -> None:
    for i in range(40):
        append_run(Path(path), sample_run(f"20261126T15{worker:02d}{i:02d}Z-{worker:06x}"))


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), w)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    runs = read_history(path).runs
    assert len(runs) == 120
    assert len({r.run_id for r in runs}) == 120


def test_missing_history_is_empty(tmp_path: Path) -> None:
    assert read_history(tmp_path / "none.jsonl").runs == ()


def test_run_ids_sort_by_time_and_differ() -> None:
    t = dt.datetime(2026, 11, 26, 15, 43, 0, tzinfo=dt.UTC)
    a, b = new_run_id(t), new_run_id(t)
    assert a.startswith("20261126T154300Z-") and len(a) == 23
    assert a != b or new_run_id(t) != a
    assert new_run_id(t + dt.timedelta(seconds=1)) > a


def test_store_paths_and_target_names(tmp_path: Path) -> None:
    store = target_store(tmp_path, "prod-eu.1")
    assert store.history == tmp_path / "prod-eu.1" / "history.jsonl"
    assert store.allure_history == tmp_path / "prod-eu.1" / "allure-history.jsonl"
    assert store.run_dir("20261126T154300Z-abc123") == (
        tmp_path / "prod-eu.1" / "runs" / "20261126T154300Z-abc123"
    )
    with pytest.raises(ValueError, match="not a run id"):
        store.run_dir("../x")
    for bad in ("", "../etc", "a/b", ".hidden", "x" * 64):
        with pytest.raises(ConfigError, match="not a usable name"):
            check_target(bad)


def test_verdict() -> None:
    ok = Scenario("a", "passed")
    assert verdict_of([ok, Scenario("b", "skipped")]) == "passed"
    assert verdict_of([ok, Scenario("b", "failed"), Scenario("c", "broken")]) == "broken"
    assert verdict_of([ok], [Gate("g", False)]) == "failed"
    assert verdict_of([]) == "broken"  # nothing ran


def _result(results: Path, name: str, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "uuid": str(uuid.uuid4()),
        "historyId": name,
        "name": name,
        "status": "passed",
        "start": 1_000_000,
        "stop": 1_012_500,
        "labels": [
            {"name": "feature", "value": "Rack outage"},
            {"name": "epic", "value": "Rack failure"},
            {"name": "severity", "value": "critical"},
        ],
        "parameters": [],
        "steps": [],
        "attachments": [],
    }
    data.update(extra)
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{data['uuid']}-result.json").write_text(json.dumps(data))
    return data


def test_from_allure_results_reads_labels_measurements_slos_and_data(tmp_path: Path) -> None:
    results = tmp_path / "allure-results"
    results.mkdir()
    (results / "m-attachment.json").write_text(
        json.dumps(
            [
                {"phase": "w1 NotReady", "seconds": 8.4, "budget_s": 20, "detail": {}},
                {
                    "phase": "evacuation",
                    "seconds": 95.0,
                    "budget_s": 90,
                    "complete": False,
                    "detail": {"gaps": [{"seconds": 2}]},
                },
                {"phase": "data read back", "seconds": 1.0, "budget_s": 30, "detail": {}},
                {"phase": "fewest ready", "value": 2},
            ]
        )
    )
    (results / "s-attachment.json").write_text(
        json.dumps({"name": "availability", "held": False, "worst": 0.93})
    )
    (results / "environment.properties").write_text("Seed=1234\n")
    _result(
        results,
        "Rack loses power",
        status="failed",
        steps=[
            {
                "name": "Then ...",
                "attachments": [
                    {"name": "measurements.json", "source": "m-attachment.json"},
                    {"name": "slo-availability.json", "source": "s-attachment.json"},
                ],
            }
        ],
    )
    # A retried scenario: only the last attempt counts; phases from parameters.
    _result(results, "Reboot", status="broken", stop=1_001_000)
    _result(
        results,
        "Reboot",
        stop=1_020_000,
        labels=[{"name": "feature", "value": "Reboot"}],
        parameters=[
            {"name": "seed", "value": "1234"},
            {"name": "n1 Ready (s)", "value": "4.5"},
            {"name": "n1 Ready budget (s)", "value": "60"},
        ],
    )
    run = from_allure_results(
        results,
        run_id="20261126T154300Z-abc123",
        target="lab",
        started="s",
        finished="f",
        powercut_version="1",
        inventory="lab.yaml",
    )
    assert run.seed == 1234
    assert run.verdict == "failed"
    rack = run.scenario("Rack loses power")
    assert rack is not None
    assert (rack.epic, rack.feature, rack.severity, rack.duration_s) == (
        "Rack failure",
        "Rack outage",
        "critical",
        12.5,
    )
    assert rack.phases["w1 NotReady"] == Phase(8.4, 20.0)
    assert rack.phases["evacuation"] == Phase(95.0, 90.0, complete=False, gap=True)
    assert "fewest ready" not in rack.phases
    assert rack.slos == {"availability": Slo(False, 0.93)}
    assert rack.data_ok is True
    reboot = run.scenario("Reboot")
    assert reboot is not None
    assert reboot.status == "passed"
    assert reboot.severity == "normal"
    assert reboot.phases == {"n1 Ready": Phase(4.5, 60.0)}
    assert reboot.data_ok is None
    # and the record is a valid history line
    assert run_from_json(json.loads(run.to_line())) == run
