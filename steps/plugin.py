"""The step grammar as a pytest plugin, and the options that choose which features run.

Loaded by :mod:`harness.pytest_plugin` (powercut's ``pytest11`` entry point), so the steps,
fixtures and hooks below are visible to every test module, wherever it lives: the built-in
features' bindings in this package and a user's own one-line module alike.

Options (``powercut run`` passes its own ``--features`` / ``--no-builtin`` on):

- ``--features DIR`` (repeatable): bind every ``*.feature`` under DIR (recursively) to the
  vocabulary, next to the built-in features.
- ``--no-builtin``: bind only the ``--features`` directories.
- ``--seed N``: the seed targets drawn at random (ranges, "one of the workers") come from;
  without it one is chosen, printed in the header and shown in the report's Environment,
  so ``--seed N`` replays a run's choices.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.steps import BUILTIN_FEATURES

#: The scenario grammar's step modules, one per subject, in the order the step reference
#: lists them.
SCENARIO_STEP_MODULES = (
    "harness.steps.target_steps",
    "harness.steps.power_steps",
    "harness.steps.operator_steps",
    "harness.steps.node_steps",
    "harness.steps.pod_steps",
    "harness.steps.volume_steps",
    "harness.steps.service_steps",
)

pytest_plugins = (
    "harness.steps.fixtures",
    *SCENARIO_STEP_MODULES,
    "harness.steps.chaos_steps",
    "harness.steps.longevity_steps",
    "harness.steps.slo_steps",
)

SEED = pytest.StashKey[int]()
_config: pytest.Config | None = None
_dirs: list[Path] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("powercut")
    group.addoption(
        "--features",
        dest="powercut_features",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory of your own .feature files to run with powercut's steps "
        "(repeatable; searched recursively)",
    )
    group.addoption(
        "--seed",
        dest="powercut_seed",
        type=int,
        default=None,
        metavar="N",
        help="seed of the random choices of targets (ranges, counts); replays a run's choices",
    )
    group.addoption(
        "--no-builtin",
        dest="powercut_no_builtin",
        action="store_true",
        default=False,
        help="run only the --features directories, not powercut's built-in features",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _config, _dirs
    try:
        _dirs = feature_dirs(config.getoption("powercut_features") or [])
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    _config = config
    from harness.steps.support.tags import project_tags, pytest_markers

    try:
        tags = project_tags([*_dirs, Path.cwd()])
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    for name, (meaning, path) in tags.items():
        config.addinivalue_line("markers", f"{name}: {meaning} (registered in {path})")
    # the features directories' own pytest ini markers (pytest reads only its rootdir's)
    for name, meaning in pytest_markers(_dirs).items():
        config.addinivalue_line("markers", f"{name}: {meaning}")
    given = config.getoption("powercut_seed")
    config.stash[SEED] = given if given is not None else random.SystemRandom().randrange(2**31)


def pytest_report_header(config: pytest.Config) -> str:
    return f"powercut: seed {config.stash[SEED]} (replay these choices with --seed)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the demo set's shortened scenarios (tagged ``@demo_only``, e.g. the cyclic
    third's two cycles with the SLO checks) unless the run selects the demo set (``-m demo``):
    every other run runs the full scenarios instead, as before (docs/setup.md, ``make demo``)."""
    if "demo" in re.findall(r"\w+", config.getoption("markexpr") or ""):
        return
    dropped = [item for item in items if item.get_closest_marker("demo_only")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not item.get_closest_marker("demo_only")]


def seed_of(config: pytest.Config) -> int:
    """The run's seed (``--seed``, else the one drawn at start-up)."""
    return config.stash[SEED]


def pytest_unconfigure(config: pytest.Config) -> None:
    global _config, _dirs
    if _config is config:
        _config, _dirs = None, []


def feature_dirs(given_dirs: list[str]) -> list[Path]:
    """The ``--features`` directories, resolved; a missing or empty one is a clear error."""
    dirs = []
    for given in given_dirs:
        path = Path(given).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(
                f"--features {given}: not a directory of .feature files", field="--features"
            )
        if not any(path.rglob("*.feature")):
            raise ConfigError(f"--features {given}: no .feature file in it", field="--features")
        dirs.append(path)
    return dirs


def user_feature_dirs() -> list[Path]:
    """The ``--features`` directories of the running pytest session."""
    return list(_dirs)


def builtin_enabled(config: pytest.Config | None = None) -> bool:
    config = config or _config
    return not (config is not None and config.getoption("powercut_no_builtin"))


def builtin_feature(*parts: str) -> Path:
    return BUILTIN_FEATURES.joinpath(*parts)
