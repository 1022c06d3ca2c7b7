"""pytest plugin (entry point ``pytest11``): powercut's options, markers and fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.inventory import Inventory, load_inventory

#: The step grammar and its fixtures (harness/bdd), visible to every test module.
pytest_plugins = ("harness.bdd.plugin",)

MARKERS = {
    "lab": "needs the embedded lab cluster",
    "disruptive": "powers nodes off or otherwise disturbs the cluster",
    "slow": "takes more than a few seconds",
    "needs_bmc": "needs BMC endpoints (real or the lab's)",
    "serial": "must not run in parallel with other disruptive tests",
    # Allure severities, written as feature tags (@critical); harness/bdd/steps.py also turns
    # them into the Allure severity label.
    "blocker": "severity: the cluster cannot be released if this fails",
    "critical": "severity: a critical failure case",
    "normal": "severity: a normal failure case",
    "minor": "severity: a minor failure case",
    "trivial": "severity: a trivial failure case",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("powercut")
    group.addoption(
        "--inventory",
        action="store",
        default=None,
        help="powercut inventory YAML (cluster, nodes, BMCs, budgets)",
    )
    group.addoption(
        "--keep-on-failure",
        action="store_true",
        default=False,
        help="leave a failed scenario's disruption in place as evidence (undo later with "
        "`powercut recover`)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


@pytest.fixture(scope="session")
def inventory(pytestconfig: pytest.Config) -> Inventory:
    path = pytestconfig.getoption("--inventory")
    if not path:
        pytest.fail("this test needs --inventory PATH (a powercut inventory YAML)")
    return load_inventory(Path(path))
