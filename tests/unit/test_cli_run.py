"""``powercut run``: exit codes and --dry-run, on a throwaway feature (no cluster); its
signals, with real processes and real time, in tests/integration/test_cli_run_signals.py.

The steps directory given with ``--steps`` holds one tiny feature whose only step does what
its sentence says (pass, fail a check, break, skip, or hang until interrupted), so the real
pytest child, allure-pytest-bdd and the summary run exactly as against a cluster.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.run import EXIT_FAILED, EXIT_HARNESS, EXIT_PASSED
from harness.report.allure_env import read_environment
from tests.fakes.project import INVENTORY

REPO = Path(__file__).resolve().parents[2]


FEATURE = """\
Feature: A throwaway feature

  Scenario: The outcome is {outcome}
    Then the outcome is {outcome}
"""

STEPS = """\
import os
import signal
import time
from pathlib import Path

import pytest
from pytest_bdd import parsers, scenarios, then

from harness.checks.base import CheckFailed
from harness.errors import PermanentError
from harness.report.allure_env import write_environment

scenarios("fake.feature")


@pytest.fixture
def disruption(pytestconfig):
    # what the features' fixture does: describe the cluster while the run goes on
    write_environment(Path(pytestconfig.option.allure_report_dir), {"Kubernetes version": "v9"})
    yield
    if os.environ.get("FAKE_SLOW_UNDO"):  # the signal tests (tests/integration)
        time.sleep(0.5)  # an undo that takes a while: a second SIGINT here would abort it
    Path(os.environ["FAKE_DIR"], "restored").write_text("yes")


@then(parsers.parse("the outcome is {what}"))
def outcome(what, disruption):
    if what == "fail":
        raise CheckFailed("node w1 NotReady within 20s", "Ready", 20.0, check="node-not-ready")
    if what == "broken":
        raise PermanentError("w1: the BMC refused the connection")
    if what == "skipped":
        pytest.skip("no Ready worker runs a DaemonSet pod in this cluster")
    if what == "hang":
        received = []

        def count(signum, frame):  # how many SIGINTs reach the child, undo included
            received.append(signum)
            Path(os.environ["FAKE_DIR"], "sigints").write_text(str(len(received)))
            if len(received) == 1:
                raise KeyboardInterrupt

        def terminated(signum, frame):  # what the session's handler does on SIGTERM
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, count)
        signal.signal(signal.SIGTERM, terminated)
        Path(os.environ["FAKE_DIR"], "started").write_text("yes")
        time.sleep(120)
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This checkout's harness in the child, a state directory of the test's own."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    return inv


def steps_dir(tmp_path: Path, outcome: str) -> Path:
    steps = tmp_path / "steps"
    steps.mkdir()
    (steps / "fake.feature").write_text(FEATURE.format(outcome=outcome))
    (steps / "test_fake.py").write_text(STEPS)
    return steps


def run(tmp_path: Path, inv: Path, outcome: str, *more: str) -> int:
    steps = steps_dir(tmp_path, outcome)
    argv = ["run", "-i", str(inv), "--steps", str(steps), "--out", str(tmp_path / "out")]
    return main([*argv, "--no-html", *more])


def test_a_passing_run_exits_0_and_keeps_the_features_environment(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, env, "pass") == EXIT_PASSED
    out = capfd.readouterr().out
    assert "powercut: PASSED  1 scenario: 1 passed" in out
    written = read_environment(tmp_path / "out" / "allure-results" / "environment.properties")
    assert written["Kubernetes version"] == "v9"  # the features' entry survived the run's
    assert written["Inventory"] == "fake" and written["Nodes"] == "1"
    assert (tmp_path / "out" / "junit.xml").is_file()


def test_a_skipped_scenario_passes_by_default_and_says_why(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, env, "skipped") == EXIT_PASSED
    out = capfd.readouterr().out
    assert "1 skipped" in out
    assert "no Ready worker runs a DaemonSet pod in this cluster" in out


def test_with_fail_on_skip_a_skipped_scenario_exits_1_with_its_reason(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, env, "skipped", "--fail-on-skip") == EXIT_FAILED
    out = capfd.readouterr().out
    assert "1 scenario(s) skipped, failures with --fail-on-skip:" in out
    assert (
        "test_fake::test_the_outcome_is_skipped: no Ready worker runs a DaemonSet pod in this "
        "cluster" in out
    )


def test_with_fail_on_skip_a_passing_run_still_exits_0(tmp_path: Path, env: Path) -> None:
    assert run(tmp_path, env, "pass", "--fail-on-skip") == EXIT_PASSED


def test_a_failed_check_exits_1(tmp_path: Path, env: Path) -> None:
    assert run(tmp_path, env, "fail") == EXIT_FAILED


def test_a_broken_step_exits_2(tmp_path: Path, env: Path) -> None:
    assert run(tmp_path, env, "broken") == EXIT_HARNESS


def test_a_pytest_usage_error_exits_2(tmp_path: Path, env: Path) -> None:
    assert run(tmp_path, env, "pass", "--no-such-pytest-option") == EXIT_HARNESS


def test_a_bad_inventory_exits_2(tmp_path: Path, env: Path) -> None:
    env.write_text("nodes: 3\n")
    assert run(tmp_path, env, "pass") == EXIT_HARNESS


def test_dry_run_lists_the_scenarios_and_touches_nothing(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, env, "hang", "--dry-run") == EXIT_PASSED
    out = capfd.readouterr().out
    assert "dry run: inventory" in out and "is valid (1 nodes)" in out
    assert "test_fake.py::test_the_outcome_is_hang" in out
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "started").exists()  # collected, not run


def test_dry_run_with_a_pytest_usage_error_exits_2(tmp_path: Path, env: Path) -> None:
    assert run(tmp_path, env, "pass", "--dry-run", "--no-such-pytest-option") == EXIT_HARNESS


def test_pytest_arguments_after_a_double_dash_reach_pytest(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`powercut run -i X -- -k NAME`, as the README writes it: -k selects, not a file."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert run(tmp_path / "a", env, "pass", "--dry-run", "--", "-k", "outcome") == EXIT_PASSED
    assert "test_the_outcome_is_pass" in capfd.readouterr().out
    # Selecting nothing is a usage error, not a pass.
    assert run(tmp_path / "b", env, "pass", "--dry-run", "--", "-k", "no_such") == EXIT_HARNESS
    assert "test_the_outcome_is_pass" not in capfd.readouterr().out


USER_FEATURE = """\
Feature: My own failure case
  Scenario: My rack goes dark
    Given the cluster is in steady state
    And one worker node
    When the nodes lose power at once
"""


def _user_features(tmp_path: Path) -> Path:
    mine = tmp_path / "my-repo" / "features" / "racks"
    mine.mkdir(parents=True)
    (mine / "dark.feature").write_text(USER_FEATURE)
    return mine.parent


def test_own_features_run_from_any_directory_with_or_without_the_builtins(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--features DIR` binds a user's feature files (found recursively) to the installed
    vocabulary, from a directory that holds neither steps nor features; `--no-builtin`
    leaves the built-in features out."""
    mine = _user_features(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    base = ["run", "-i", str(env), "--dry-run", "--features", str(mine)]
    assert main([*base, "--no-builtin"]) == EXIT_PASSED
    out = capfd.readouterr().out
    assert "test_my_rack_goes_dark" in out
    assert "rack" in out and "test_chaos" not in out and "test_longevity" not in out
    listed = [line for line in out.splitlines() if "::" in line]
    assert len(listed) == 1, listed
    assert main(base) == EXIT_PASSED
    listed = [line for line in capfd.readouterr().out.splitlines() if "::" in line]
    assert any("test_my_rack_goes_dark" in line for line in listed)
    assert any("test_chaos.py::" in line for line in listed)
    assert len(listed) > 10, listed  # the built-in features too


def test_own_features_that_do_not_exist_are_a_clear_error(
    tmp_path: Path, env: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    for given in (tmp_path / "no-such-dir", empty):
        argv = ["run", "-i", str(env), "--dry-run", "--features", str(given)]
        assert main(argv) == EXIT_HARNESS
        err = capfd.readouterr().err
        assert str(given) in err and "--features" in err
    assert main(["run", "-i", str(env), "--dry-run", "--no-builtin"]) == EXIT_HARNESS
    assert "--no-builtin leaves nothing to run" in capfd.readouterr().err
