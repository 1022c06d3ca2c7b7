"""A step is a sentence and one call (docs/DESIGN.md, "House rules").

Every step of the scenario grammar (the modules of
:data:`harness.steps.plugin.SCENARIO_STEP_MODULES`) parses its sentence and delegates to
``harness.scenario``: no loop, branch, comprehension, lambda or ``try`` in its body, and
no request to the API server of its own. The logic a step needs lives in a typed library
function, tested without Gherkin. Read from the source, so a step that grows a loop fails
here, naming it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from harness.steps.plugin import SCENARIO_STEP_MODULES, pytest_plugins

LOGIC = (
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.If,
    ast.IfExp,
    ast.Try,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Lambda,
)
STEP_DECORATORS = {"given", "when", "then"}
ROOT = Path(__file__).resolve().parents[2]


def _steps(module: str) -> list[ast.FunctionDef]:
    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    out = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        names = {
            d.func.id
            for d in node.decorator_list
            if isinstance(d, ast.Call) and isinstance(d.func, ast.Name)
        }
        if names & STEP_DECORATORS:
            out.append(node)
    return out


def _logic(step: ast.FunctionDef) -> list[str]:
    found = []
    for stmt in step.body:
        for node in ast.walk(stmt):
            if isinstance(node, LOGIC):
                found.append(f"line {node.lineno}: {type(node).__name__}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "request"
            ):
                found.append(f"line {node.lineno}: an API request")
    return found


#: Every step module (the plugin's): the scenario grammar's, and the chaos, longevity and
#: SLO steps, whose work is the chaos extension's and longevity's (harness.chaos.experiment,
#: harness.longevity.verdict).
STEP_MODULES = tuple(m for m in pytest_plugins if m.endswith("_steps"))


def test_the_rule_covers_every_step_module() -> None:
    """Every ``steps/*_steps.py`` on disk is a plugin module the rule reads."""
    on_disk = {f"harness.steps.{p.stem}" for p in ROOT.joinpath("steps").glob("*_steps.py")}
    assert on_disk == set(STEP_MODULES), on_disk ^ set(STEP_MODULES)
    assert set(SCENARIO_STEP_MODULES) < set(STEP_MODULES)


@pytest.mark.parametrize("module", STEP_MODULES)
def test_every_step_is_parsing_and_one_call(module: str) -> None:
    steps = _steps(module)
    assert steps, f"{module} defines no step"
    thick = {s.name: found for s in steps if (found := _logic(s))}
    assert not thick, f"{module}: steps holding logic that belongs in harness.scenario: {thick}"


def test_the_check_finds_logic_in_a_step() -> None:
    source = (
        "@then('x')\ndef step(kube):\n    for n in kube.nodes:\n        kube.request('GET', n)\n"
    )
    [step] = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
    assert [f.split(": ")[1] for f in _logic(step)] == ["For", "an API request"]


def test_every_scenario_step_module_is_in_the_grammar_contract() -> None:
    """The import-linter contract that keeps the step modules apart names each of them."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [contract] = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"].startswith("The step grammar")
    ]
    assert set(SCENARIO_STEP_MODULES) <= set(contract["modules"])
    on_disk = {f"harness.steps.{p.stem}" for p in (ROOT / "steps").glob("*_steps.py")}
    assert on_disk == set(contract["modules"]), on_disk ^ set(contract["modules"])
