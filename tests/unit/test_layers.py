"""Every package and top-level module of harness/ is in the import-linter layers
(docs/DESIGN.md, "House rules"): a new one must be placed, not left outside every
contract."""

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


#: Packages whose own layers contract leaves modules out on purpose, and why. Any other
#: package with a layers contract of its own must place every module it holds.
PARTIAL = {
    # watch.py sits between the Observer and its handlers (see the contract's comment)
    "harness.kube.observer": "watch.py between two layers",
}


def test_a_package_with_layers_of_its_own_places_every_module_in_them() -> None:
    """A module added to a package with layers of its own (scenario, longevity, session,
    kube, checks, slo, journal, inventory), or one split off a module there, must be placed
    in them: a contract over ``containers`` says so itself (``exhaustive``); for the others
    the list is read from the tree here, not kept by hand."""
    import importlib

    for contract in _contracts()[1:]:
        if contract["type"] != "layers":
            continue
        if contract.get("containers"):
            assert contract.get("exhaustive") is True, contract["name"]
            continue
        layers = contract["layers"]
        assert isinstance(layers, list)
        placed = {name.strip() for layer in layers for name in str(layer).split("|")}
        packages = {name.rsplit(".", 1)[0] for name in placed}
        assert len(packages) == 1, (contract["name"], packages)
        (package,) = packages
        if package in PARTIAL:
            continue
        found = {
            f"{package}.{m.name}"
            for m in pkgutil.iter_modules(importlib.import_module(package).__path__)
            if m.name != "__main__"
        }
        assert found - placed == set(), f"not in the layers of {package}: {contract['name']}"
