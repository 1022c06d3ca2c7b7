"""Every package and top-level module of harness/ is in the import-linter layers (STYLE 16):
a new one must be placed, not left outside every contract."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import harness

ROOT = Path(__file__).resolve().parents[2]


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_every_package_of_harness_is_in_the_layers() -> None:
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    assert isinstance(layers, list)
    placed = {name.strip() for layer in layers for name in str(layer).split("|")}
    found = {f"harness.{m.name}" for m in pkgutil.iter_modules(harness.__path__)}
    assert found - placed == set(), "not in the first layers contract of pyproject.toml"
    assert placed - found == set(), "named in the layers but not in harness/"


def test_no_contract_names_a_module_that_is_not_there() -> None:
    """A contract naming a module that was moved away would guard nothing."""
    import importlib.util

    for contract in _contracts():
        names: list[str] = []
        for key in ("layers", "modules", "source_modules", "forbidden_modules"):
            for entry in contract.get(key, []) or []:  # type: ignore[attr-defined]
                names.extend(n.strip() for n in str(entry).split("|"))
        # a contract with containers names its layers relative to each container
        containers = [str(c) for c in contract.get("containers", []) or []]  # type: ignore[attr-defined]
        if containers:
            names = [f"{c}.{n}" for c in containers for n in names]
        for name in names:
            assert importlib.util.find_spec(name) is not None, (contract["name"], name)
