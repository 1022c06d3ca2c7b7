"""``powercut run`` with sign-off gates and a results store, and ``powercut compare``, on a
throwaway feature (no cluster): the real pytest child, allure-pytest-bdd, the gates, the
history and the compare output."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.run import EXIT_FAILED, EXIT_HARNESS, EXIT_PASSED
from harness.report.history import read_history
from tests.fakes.project import INVENTORY

REPO = Path(__file__).resolve().parents[2]


FEATURE = """\
@epic:node-failure
Feature: A throwaway feature

  @critical
  Scenario: Evacuation of w1
    Then evacuation took {took} seconds against 10
"""

STEPS = """\
import allure
from pytest_bdd import parsers, scenarios, then

scenarios("fake.feature")


@then(parsers.parse("evacuation took {took:g} seconds against {budget:g}"))
def took(took, budget):
    # a phase measured and recorded, as Measurements.record does, but checked by no step
    allure.dynamic.parameter("evacuation (s)", took, excluded=True)
    allure.dynamic.parameter("evacuation budget (s)", budget, excluded=True)
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    return inv


def steps(tmp_path: Path, took: float) -> Path:
    d = tmp_path / f"steps-{took:g}"
    d.mkdir()
    (d / "fake.feature").write_text(FEATURE.format(took=took))
    (d / "test_fake.py").write_text(STEPS)
    return d


def test_a_phase_over_budget_fails_the_gate_and_names_it(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "-i", str(env), "--no-html", "--steps", str(steps(tmp_path, 12))]
    assert main([*argv, "--out", str(tmp_path / "a")]) == EXIT_FAILED
    err = capfd.readouterr().err
    assert (
        "powercut: gate failed: no phase over its budget: 1 of 1 phases with a budget over "
        "it; Evacuation of w1: evacuation 12.0s / 10s" in err
    )
    # the same run under rules without that gate passes
    (tmp_path / "signoff.yaml").write_text("gates:\n  no_phase_over_budget: false\n")
    assert main([*argv, "--out", str(tmp_path / "b")]) == EXIT_PASSED
    assert "gate failed" not in capfd.readouterr().err


def test_a_bad_signoff_file_stops_the_run_before_it_starts(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "signoff.yaml").write_text("gates:\n  no_data_lots: true\n")
    out = tmp_path / "out"
    argv = ["run", "-i", str(env), "--no-html", "--steps", str(steps(tmp_path, 1))]
    assert main([*argv, "--out", str(out)]) == EXIT_HARNESS
    err = capfd.readouterr().err
    assert "signoff.yaml:gates.no_data_lots: unknown key; valid keys here:" in err
    assert "no_data_lost" in err
    assert not out.exists()
    (tmp_path / "signoff.yaml").unlink()
    assert main([*argv, "--store", str(tmp_path / "s"), "--out", str(out)]) == EXIT_HARNESS
    assert main([*argv, "--target", "x"]) == EXIT_HARNESS
    err = capfd.readouterr().err
    assert "give --out or --store, not both" in err and "add --store DIR" in err
    assert not out.exists()


def test_a_store_keeps_each_target_s_runs_and_history(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    base = ["run", "-i", str(env), "--no-html", "--store", str(store)]
    assert main([*base, "--steps", str(steps(tmp_path, 4))]) == EXIT_PASSED
    assert main([*base, "--steps", str(steps(tmp_path, 12))]) == EXIT_FAILED
    history = read_history(store / "fake" / "history.jsonl")
    assert [r.verdict for r in history.runs] == ["passed", "failed"]
    first, second = history.runs
    assert first.target == "fake" and first.inventory == str(env)
    assert [s.phases["evacuation"].value_s for r in history.runs for s in r.scenarios] == [4, 12]
    assert second.scenarios[0].severity == "critical"
    assert second.scenarios[0].epic == "Node failure"
    assert {g.name: g.passed for g in second.gates}["no phase over its budget"] is False
    for r in history.runs:
        run_dir = store / "fake" / "runs" / r.run_id
        assert (run_dir / "allure-results").is_dir() and (run_dir / "junit.xml").is_file()
    out = capfd.readouterr().out
    assert f"history: {store / 'fake' / 'history.jsonl'} (run {second.run_id})" in out
    # another target's runs go beside
    assert main([*base, "--target", "other", "--steps", str(steps(tmp_path, 5))]) == 0
    assert len(read_history(store / "other" / "history.jsonl").runs) == 1
    assert len(read_history(store / "fake" / "history.jsonl").runs) == 2
    # powercut compare, by id prefix in the store
    html = tmp_path / "cmp.html"
    argv = ["compare", first.run_id[:17], second.run_id, "--store", str(store)]
    assert main([*argv, "--target", "fake", "--html", str(html)]) == 0
    text = capfd.readouterr().out
    assert "evacuation" in text and "4.0s / 10s" in text and "12.0s / 10s" in text
    assert "+8.0s (+200%)" in text
    assert html.read_text().count('class="worse"') == 1
    json.dumps(text)  # plain text
