"""pytest plugin (entry point ``pytest11``): powercut's options, markers and fixtures."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from harness import progress
from harness.errors import ConfigError
from harness.inventory import Inventory, load_inventory
from harness.settings import Settings, from_environment
from harness.steps.support.tags import MARKERS

#: The step grammar and its fixtures (steps), visible to every test module.
pytest_plugins = ("harness.steps.plugin",)


#: The terminal's stderr, kept before pytest captures file descriptors 1 and 2 (this hook
#: runs when the plugin is registered, before capturing starts): the progress display
#: writes there while a test runs.
_TERMINAL: list[int] = []

#: powercut's settings (docs/settings.md), read from the environment once, when the plugin
#: is registered; a bad value stops pytest with the variable's name and its valid values.
_SETTINGS: list[Settings] = []


def settings() -> Settings:
    """The settings the plugin read when it was registered."""
    if not _SETTINGS:
        _SETTINGS.append(from_environment())
    return _SETTINGS[0]


def pytest_addoption(parser: pytest.Parser) -> None:
    if not _TERMINAL:
        with contextlib.suppress(OSError):  # no stderr at all: no display either
            _TERMINAL.append(os.dup(2))
    try:
        read = settings()
    except ConfigError as exc:
        raise pytest.UsageError(f"powercut: {exc}") from None
    group = parser.getgroup("powercut")
    group.addoption(
        "--inventory",
        action="store",
        default=None,
        help="powercut inventory YAML (cluster, nodes, BMCs, budgets)",
    )
    group.addoption(
        "--context",
        action="store",
        default=None,
        metavar="NAME",
        help="the kubeconfig context to use instead of the inventory's cluster.context (as "
        "kubectl's --context); its cluster must hold every node the inventory names, or no "
        "scenario touches anything (docs/connecting.md)",
    )
    group.addoption(
        "--keep-on-failure",
        action="store_true",
        default=False,
        help="leave a failed scenario's disruption in place as evidence (undo later with "
        "`powercut recover`)",
    )
    group.addoption(
        "--powercut-progress",
        choices=("auto", "rich", "plain", "off"),
        default=read.progress,
        help="show each scenario, step and wait against its budget: rich (a live panel on "
        "the terminal), plain (lines, for CI logs), auto (rich on a terminal), off (default; "
        "`powercut run` turns it on)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    from harness.report.title_path import install

    # A feature file outside pytest's rootdir must not break its scenarios in
    # allure-pytest-bdd (a shared feature directory, the built-in features of `powercut run`).
    install()
    _start_progress(config)


_PROGRESS: list[Any] = []  # (renderer, listening context) while a display runs


def _start_progress(config: pytest.Config) -> None:
    """The live display, on the terminal ``powercut run`` hands over (POWERCUT_PROGRESS_FD:
    pytest's own output then goes to the run's log) or on pytest's stderr."""
    requested = str(config.getoption("--powercut-progress") or "off")
    if requested == "off" or _PROGRESS:
        return
    from harness.progress.display import choose_mode, renderer_for

    given = settings().progress_fd
    fd = given if given is not None else (_TERMINAL[0] if _TERMINAL else None)
    if fd is None:
        return
    try:
        stream = os.fdopen(fd, "w", buffering=1, closefd=False)
    except OSError:
        return
    renderer = renderer_for(choose_mode(requested, stream), stream)
    if renderer is None:
        return
    listening = progress.listen(renderer)
    listening.__enter__()
    renderer.start()
    _PROGRESS.append((renderer, listening))


def pytest_unconfigure(config: pytest.Config) -> None:
    while _PROGRESS:
        renderer, listening = _PROGRESS.pop()
        renderer.stop()
        listening.__exit__(None, None, None)


_SCENARIOS: dict[str, str] = {}  # test node id -> "Feature: Scenario", for its verdict


@pytest.hookimpl(optionalhook=True)
def pytest_bdd_before_scenario(request: Any, feature: Any, scenario: Any) -> None:
    name = f"{feature.name}: {scenario.name}"
    _SCENARIOS[request.node.nodeid] = name
    progress.scenario(name)


@pytest.hookimpl(optionalhook=True)
def pytest_bdd_before_step(
    request: Any, feature: Any, scenario: Any, step: Any, step_func: Any
) -> None:
    progress.step(f"{step.keyword} {step.name}")


@pytest.hookimpl(optionalhook=True)
def pytest_bdd_step_error(
    request: Any,
    feature: Any,
    scenario: Any,
    step: Any,
    step_func: Any,
    step_func_args: Any,
    exception: BaseException,
) -> None:
    progress.step_end(f"{step.keyword} {step.name}", "failed")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A scenario's verdict, once: its call, or the setup that failed or skipped it."""
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        name = _SCENARIOS.pop(report.nodeid, None) or report.head_line or report.nodeid
        progress.scenario_end(name, report.outcome)


@pytest.fixture(scope="session")
def inventory(pytestconfig: pytest.Config) -> Inventory:
    path = pytestconfig.getoption("--inventory")
    if not path:
        pytest.fail("this test needs --inventory PATH (a powercut inventory YAML)")
    from harness.kube.target import aim_at_context

    return aim_at_context(load_inventory(Path(path)), pytestconfig.getoption("--context"))
