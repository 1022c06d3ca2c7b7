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
from harness.steps import BUILTIN_FEATURES
from harness.steps.check import FeaturesDoNotParse, check_feature, check_features, check_text
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
