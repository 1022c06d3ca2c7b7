"""Tags a user registers from their own project, without editing the package.

pytest runs with ``--strict-markers``, so every tag of a feature must be registered. Besides
powercut's own (:data:`MARKERS`), a project registers its tags, each
with its meaning, in one of (the first found, looking in each ``--features`` directory and
then its parents, and in the current directory and its parents):

- ``powercut.toml``::

      [tags]
      storage = "exercises the storage tier"

- ``pyproject.toml``::

      [tool.powercut.tags]
      storage = "exercises the storage tier"

Markers registered with pytest's own ``markers`` ini option (``[tool.pytest.ini_options]``
of a pyproject.toml, ``[pytest]`` of a pytest.ini) count too.
"""

from __future__ import annotations

import configparser
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

from harness.errors import ConfigError

#: powercut's own tags (pytest markers) and what each means.
MARKERS = {
    "lab": "needs the embedded lab cluster (its names: namespace `lab`, `seed-data`, the "
    "lab's SLOs; `docs/lab.md`)",
    "disruptive": "powers nodes off or otherwise disturbs the cluster",
    "slow": "takes more than a few seconds",
    "needs_bmc": "switches power through each node's BMC (IPMI or Redfish; the lab's and "
    "kind's stand-ins): power loss, graceful shutdown, power-on, reboot",
    "needs_ssh": "acts on the node itself over SSH (kind: in its container; the lab: its "
    "simulation): network partition, kubelet stop",
    "serial": "must not run in parallel with other disruptive tests",
    "kind": "written for real kubelets in a kind cluster (features/kind)",
    "demo": "one of the demo set (`make demo`, `powercut run -- -m demo`): a few scenarios "
    "covering every failure kind, every way of choosing targets and every figure of the report",
    "demo_only": "the demo set's shortened form of scenarios that run in full otherwise (fewer "
    "cycles, checks combined): run only when the -m expression names demo (`make demo`)",
    # Allure severities, written as feature tags (@critical); steps/fixtures.py also turns
    # them into the Allure severity label.
    "blocker": "severity: the cluster cannot be released if this fails",
    "critical": "severity: a critical failure case",
    "normal": "severity: a normal failure case",
    "minor": "severity: a minor failure case",
    "trivial": "severity: a trivial failure case",
}

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _tags_of(path: Path) -> dict[str, str] | None:
    """The tags a ``powercut.toml`` or ``pyproject.toml`` registers (None: it has none)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", source=str(path)) from None
    field = "tags" if path.name == "powercut.toml" else "tool.powercut.tags"
    table: object = data
    for key in field.split("."):
        table = table.get(key) if isinstance(table, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError('must be a table of tag = "meaning"', source=str(path), field=field)
    out = {}
    for name, meaning in table.items():
        if not _NAME.match(name) or not isinstance(meaning, str) or not meaning.strip():
            raise ConfigError(
                f"{name!r}: a tag is a word (letters, digits, underscore) whose value is its "
                'meaning, a non-empty string: storage = "exercises the storage tier"',
                source=str(path),
                field=f"{field}.{name}",
            )
        out[name] = meaning.strip()
    return out


def _pytest_markers(path: Path) -> dict[str, str]:
    """The markers pytest's own ini registers (``markers = ["name: meaning", ...]`` in
    ``[tool.pytest.ini_options]`` of a pyproject.toml, ``[pytest] markers =`` of a
    pytest.ini): a project that registers its tags for pytest has them registered here too."""
    lines: list[str] = []
    try:
        if path.name == "pyproject.toml":
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            section = data.get("tool", {}).get("pytest", {}).get("ini_options", {})
            given = section.get("markers") if isinstance(section, dict) else None
            lines = [str(m) for m in given] if isinstance(given, list) else []
        else:
            parser = configparser.ConfigParser()
            parser.read_string(path.read_text(encoding="utf-8"))
            if parser.has_option("pytest", "markers"):
                lines = parser.get("pytest", "markers").splitlines()
    except (OSError, tomllib.TOMLDecodeError, configparser.Error):
        return {}
    out = {}
    for line in lines:
        name, _, meaning = line.strip().partition(":")
        name = name.split("(")[0].strip()
        if _NAME.match(name):
            out[name] = meaning.strip() or name
    return out


def pytest_markers(starts: Iterable[Path]) -> dict[str, str]:
    """Every marker a pytest ini (pyproject.toml, pytest.ini) registers, from each start
    upwards (the nearest directory that registers any): name -> meaning."""
    out: dict[str, str] = {}
    for start in starts:
        for d in (start.resolve(), *start.resolve().parents):
            found: dict[str, str] = {}
            for name in ("pytest.ini", "pyproject.toml"):
                if (d / name).is_file():
                    found.update(_pytest_markers(d / name))
            if found:
                for k, v in found.items():
                    out.setdefault(k, v)
                break
    return out


def find_tag_file(start: Path) -> tuple[Path, dict[str, str]] | None:
    """The first ``powercut.toml`` or ``pyproject.toml`` registering tags, from ``start``
    upwards."""
    for d in (start, *start.parents):
        for name in ("powercut.toml", "pyproject.toml"):
            path = d / name
            if path.is_file():
                tags = _tags_of(path)
                if tags is not None:
                    return path, tags
    return None


def project_tags(starts: Iterable[Path]) -> dict[str, tuple[str, Path]]:
    """Every tag registered for ``starts`` (the features directories, the current one):
    name -> (meaning, file)."""
    out: dict[str, tuple[str, Path]] = {}
    for start in starts:
        found = find_tag_file(start.resolve())
        if found is not None:
            path, tags = found
            for name, meaning in tags.items():
                out.setdefault(name, (meaning, path))
    return out
