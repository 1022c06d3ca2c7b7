"""Every sentence checked before anything is touched (issue 24, item 6).

``powercut run``, dry or not, parses every feature it would run and matches every step
against the grammar before pytest starts: a misspelt sentence, a value no step accepts or
a Gherkin syntax error is one harness error (exit 2) naming the file, the line and what
would be valid, and no scenario runs (the throwaway steps below write a file when they
run: it never appears).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.run import EXIT_HARNESS, EXIT_PASSED
from harness.inventory import Inventory, load_inventory
from harness.steps import BUILTIN_FEATURES
from harness.steps.check import (
    FeaturesDoNotParse,
    check_feature,
    check_features,
    check_step,
    check_text,
)
from tests.fakes.project import INVENTORY

REPO = Path(__file__).resolve().parents[2]

TYPO = """\
Feature: A rack goes dark

  Scenario: the first step runs, the third is misspelt
    Given the cluster is in steady state
    And one worker node
    When the node loses powr
    Then the node is NotReady within the node-not-ready budget
"""

BROKEN = """\
Feature: A broken feature

  Scenario: a keyword misspelt
    Given one worker node
    Whenn the node loses power
"""

OUTLINE = """\
Feature: Dell-style outline

  Scenario Outline: fail <workers> worker(s)
    Given the cluster is in steady state
    When I fail <workers> worker node and zero primary nodes with <failure> failure for 5 seconds
    Then every lost node is Ready within the node-ready-after-power-on budget

    Examples:
      | workers | failure |
      | one     | power   |
      | one     | powr    |
      | lots    | reboot  |
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    d = tmp_path / "features"
    d.mkdir(exist_ok=True)
    path = d / name
    path.write_text(text)
    return path


def test_a_misspelt_sentence_names_file_line_and_the_closest_sentences(tmp_path: Path) -> None:
    path = _write(tmp_path, "typo.feature", TYPO)
    problems = check_feature(path)
    assert len(problems) == 1, problems
    p = problems[0]
    assert (p.path, p.line) == (str(path), 6)
    assert "When 'the node loses powr'" in p.message
    assert '"When the node loses power"' in p.message  # the closest sentence, first


def test_a_gherkin_syntax_error_names_file_line_and_what_was_expected(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.feature", BROKEN)
    [p] = check_feature(path)
    assert (p.path, p.line) == (str(path), 5)
    assert "Gherkin syntax" in p.message and "got 'Whenn the node loses power'" in p.message
    assert "a step (Given, When, Then, And, But)" in p.message


def test_an_outline_is_checked_row_by_row_with_the_values_it_uses(tmp_path: Path) -> None:
    problems = check_feature(_write(tmp_path, "outline.feature", OUTLINE))
    messages = [p.message for p in problems]
    assert len(problems) == 2, messages
    assert all(p.line == 5 for p in problems)
    powr = next(m for m in messages if "powr" in m)
    assert "unknown failure kind 'powr'" in powr and "power, graceful, reboot" in powr
    assert "failure=powr" in powr  # which example row
    lots = next(m for m in messages if "lots" in m)
    assert "closest" in lots and "I fail {workers} worker" in lots


def test_an_unknown_budget_name_is_a_problem_naming_the_right_one() -> None:
    [p] = check_text("Given one worker node\nThen the node is Ready within the node-redy budget\n")
    assert "unknown budget" in p.message and "node-ready-after-power-on" in p.message


def test_every_builtin_feature_passes_the_check() -> None:
    check_features(sorted(BUILTIN_FEATURES.rglob("*.feature")))


def test_the_error_lists_every_problem_of_every_file(tmp_path: Path) -> None:
    paths = [_write(tmp_path, "typo.feature", TYPO), _write(tmp_path, "broken.feature", BROKEN)]
    with pytest.raises(FeaturesDoNotParse) as info:
        check_features(paths)
    text = str(info.value)
    assert f"{paths[0]}:6:" in text and f"{paths[1]}:5:" in text
    assert "nothing was run or touched" in text


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    return inv


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
@pytest.mark.parametrize("text", [TYPO, BROKEN], ids=["misspelt", "syntax"])
def test_powercut_run_refuses_before_anything_runs(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str], dry: bool, text: str
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "good.feature").write_text(
        "Feature: fine\n  Scenario: fine\n    Given the cluster is in steady state\n"
    )
    bad = mine / "bad.feature"
    bad.write_text(text)
    out = tmp_path / "out"
    argv = ["run", "-i", str(env), "--features", str(mine), "--no-builtin", "--out", str(out)]
    assert main([*argv, *(["--dry-run"] if dry else [])]) == EXIT_HARNESS
    captured = capfd.readouterr()
    assert f"{bad}:" in captured.err
    assert "nothing was run or touched" in captured.err
    assert "Scenarios:" not in captured.out  # no scenario listed as runnable
    assert not out.exists()  # no report directory: pytest never started


def test_powercut_run_dry_run_of_good_features_still_lists_them(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "dell.feature").write_text(OUTLINE.replace("      | one     | powr    |\n", "")
                                       .replace("      | lots    | reboot  |\n", ""))  # fmt: skip
    argv = ["run", "-i", str(env), "--features", str(mine), "--no-builtin", "--dry-run"]
    assert main(argv) == EXIT_PASSED, capfd.readouterr().err
    assert "test_fail_" in capfd.readouterr().out


TAGGED = """\
@epic:node-failure @storage
Feature: A tag of the user's own

  @critical
  Scenario: tagged
    Given the cluster is in steady state
"""


@pytest.mark.parametrize("where", ["pyproject.toml", "powercut.toml", "pytest.ini"])
def test_a_project_registers_its_own_tags_without_editing_the_package(
    tmp_path: Path,
    env: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    project = tmp_path / "project"
    features = project / "features"
    features.mkdir(parents=True)
    (features / "tagged.feature").write_text(TAGGED)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    argv = ["run", "-i", str(env), "--features", str(features), "--no-builtin", "--dry-run"]
    assert main(argv) == EXIT_HARNESS
    err = capfd.readouterr().err
    assert f"{features / 'tagged.feature'}:2: unknown tag @storage" in err
    assert "[tool.powercut.tags]" in err and "needs_bmc" in err  # how, and what exists
    if where == "pytest.ini":  # pytest's own registration counts too
        text = "[pytest]\nmarkers =\n    storage: exercises the storage tier\n"
    else:
        table = "[tags]" if where == "powercut.toml" else "[tool.powercut.tags]"
        text = f'{table}\nstorage = "exercises the storage tier"\n'
    (project / where).write_text(text)
    assert main(argv) == EXIT_PASSED, capfd.readouterr().err
    assert "test_tagged" in capfd.readouterr().out  # pytest (--strict-markers) took it too


def test_a_bad_tag_table_names_the_file_and_the_key(tmp_path: Path) -> None:
    from harness.errors import ConfigError
    from harness.steps.support.tags import project_tags

    (tmp_path / "powercut.toml").write_text('[tags]\n"bad tag" = "x"\n')
    with pytest.raises(ConfigError, match=r"powercut.toml:tags.bad tag"):
        project_tags([tmp_path])


ORDER = """\
Feature: Thens before what they measure from

  Scenario: Ready judged before anything powered the node on
    Given the cluster is in steady state
    And one worker node
    When the node loses power
    Then the node is Ready within the node-ready-after-power-on budget

  Scenario: the API's outage judged with no probe started
    Given one control-plane node
    When the node loses power
    Then the API answered through the cluster endpoint, with no outage longer than 40 seconds

  Scenario: a typo first: what follows is not blamed on the order
    Given one worker node
    When the node loses powr
    Then the node is NotReady within the node-not-ready budget

  Scenario: the same steps in a working order
    Given the API is probed through the cluster endpoint
    And one control-plane node
    When the node loses power
    Then the API answered through the cluster endpoint, with no outage longer than 40 seconds
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
"""


def test_a_step_before_what_it_needs_is_refused_naming_the_steps_that_provide_it(
    tmp_path: Path,
) -> None:
    """The run would stop there as a harness error, but only after the steps before it
    had powered nodes off: the check refuses it before anything is touched (issue 24's
    held-out features: a Ready before any power-on, an API outage with no probe)."""
    problems = check_feature(_write(tmp_path, "order.feature", ORDER))
    by_line = {p.line: p.message for p in problems}
    assert sorted(by_line) == [7, 12, 16], by_line
    assert "step order: Then 'the node is Ready" in by_line[7]
    assert (
        "the nodes' power-on" in by_line[7] and '"When the node is powered on again"' in by_line[7]
    )
    assert '"Given the API is probed through the cluster endpoint"' in by_line[12]
    assert "no step matches" in by_line[16]  # the typo, and nothing else of that scenario
    # one sentence per step that provides it, the shortest (singular) form
    assert '"When the nodes are powered on again"' not in by_line[7]
    assert by_line[7].count("I fail") == 1


def _inventory(tmp_path: Path, slo: str = "web-available") -> Inventory:
    path = tmp_path / f"inv-{slo}.yaml"
    path.write_text(
        "name: fake\ncluster: {kubeconfig: kube.conf}\n"
        "racks: [{name: rack-a}, {name: rack-b}]\n"
        "nodes:\n"
        "  - {name: w-a1, role: worker, rack: rack-a, power: {driver: kind}}\n"
        "  - {name: w-b1, role: worker, rack: rack-b, power: {driver: kind}}\n"
        "workloads:\n  - {namespace: shop, kind: Deployment, name: web}\n"
        "prometheus: {url: 'http://127.0.0.1:9'}\n"
        f"slos:\n  - {{name: {slo}, expr: up, comparison: '>=', threshold: 1}}\n"
    )
    return load_inventory(path)


NAMES = """\
Feature: names of the inventory

  Scenario: each name misspelt
    Given two nodes of rack rack-c
    And the nodes w-a1 and w-z9
    And a token is written to each volume of web and quorum
    When the nodes lose power at once
    Then the web-avialable SLO held throughout

  Scenario: each name right
    Given every node of rack rack-b
    And the nodes w-a1 and w-b1
    And a token is written to each volume of web
    When the nodes lose power at once
    Then the web-available SLO held throughout
"""


def test_names_the_inventory_lacks_are_refused_with_the_ones_it_has(tmp_path: Path) -> None:
    """A rack, node, workload or SLO the inventory does not have would stop the scenario
    mid-run (or skip it, for a rack): refused before the run, naming the valid ones."""
    inv = _inventory(tmp_path)
    path = _write(tmp_path, "names.feature", NAMES)
    problems = check_feature(path, inventory=inv)
    by_line = {p.line: p.message for p in problems}
    assert sorted(by_line) == [4, 5, 6, 8], by_line
    assert "no rack 'rack-c'" in by_line[4] and "valid: rack-a, rack-b" in by_line[4]
    assert "no node 'w-z9'" in by_line[5] and "w-a1, w-b1" in by_line[5]
    assert "no workload 'quorum'" in by_line[6] and "valid: web" in by_line[6]
    assert "no SLO 'web-avialable'" in by_line[8] and "did you mean 'web-available'" in by_line[8]
    assert check_feature(path) == []  # without an inventory, only the grammar is checked


def test_the_builtin_features_are_not_held_to_the_users_inventory(tmp_path: Path) -> None:
    """The built-in features name the lab's SLOs: a cluster without them still runs the
    rest (the SLO step itself says what is missing), while the user's own features are
    checked against their inventory."""
    inv = _inventory(tmp_path, slo="shop-available")  # not the lab's web-available
    slo = BUILTIN_FEATURES / "slo.feature"
    mine = _write(tmp_path, "names.feature", NAMES)
    with pytest.raises(FeaturesDoNotParse) as err:
        check_features([slo, mine], inventory=inv, builtin={slo})
    assert all(p.path == str(mine) for p in err.value.problems)
    with pytest.raises(FeaturesDoNotParse):
        check_features([slo], inventory=inv)


HELDOUT = REPO / "tests" / "lab" / "heldout"


def test_the_held_out_features_pass_the_check() -> None:
    """The regression set a new user wrote from the docs (tests/lab/test_heldout_features.py
    runs it on a lab, opt-in) matches the grammar in the order it is written."""
    check_features(sorted((HELDOUT / "features").glob("*.feature")))


def test_the_held_out_mistakes_are_each_named_before_anything_runs(tmp_path: Path) -> None:
    """The mistakes the held-out user made on purpose, each named with file and line."""
    inv = _inventory(tmp_path)
    problems: dict[tuple[str, int], str] = {}
    for path in sorted((HELDOUT / "mistakes").glob("*.feature")):
        for p in check_feature(
            path, tags={"epic", "disruptive", "needs_bmc", "serial"}, inventory=inv
        ):
            problems[(Path(p.path).name, p.line)] = p.message
    expected = {
        ("typos.feature", 2): "unknown tag @storage",  # the Feature line
        ("typos.feature", 9): "no step matches When 'the node loses powr'",
        ("typos.feature", 15): "unknown budget 'the node-notready budget'",
        ("typos.feature", 20): "no SLO 'web-avialable'",
        ("typos.feature", 23): "unknown failure kind 'powr'",
        ("order.feature", 10): "step order: Then 'the node is Ready",
        ("names.feature", 4): "no rack 'rack-d'",
        ("names.feature", 5): "no node 'w-z9'",
    }
    assert set(problems) == set(expected), problems
    for where, words in expected.items():
        assert words in problems[where], (where, problems[where])


def test_a_worker_chosen_by_its_workload_names_an_inventory_workload(tmp_path: Path) -> None:
    from harness.scenario.givens import pod_of
    from harness.scenario.targets.workloads import PodInfo

    inv = _inventory(tmp_path)
    assert check_step("given", "a worker node running a pod of web", inv) is None
    why = check_step("given", "a worker node running a pod of wbe", inv)
    assert why is not None and "no workload 'wbe'" in why and "did you mean 'web'" in why
    runs = pod_of("web", "quorum").subject(())
    assert runs(PodInfo("shop", "web-1", "u1", "w-a1", "Deployment/web", ()))
    assert runs(PodInfo("shop", "quorum-0", "u2", "w-a1", "StatefulSet/quorum", ()))
    assert not runs(PodInfo("shop", "registry-1", "u3", "w-a1", "Deployment/registry", ()))
    assert pod_of("web").why == "a pod of web"
