"""Composition rule of the grammar: every step that measures from what an earlier step
provides (the chosen nodes, a failure, a power-on, an operator action, a drain), placed
where nothing provides it, is a harness error naming the steps that would; never a product
failure, and raised before anything waits or acts (no cluster is touched here).

Each scenario is generated from the step registry itself, so a new step is covered the day
it is added.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_bdd.steps import step_function_context_registry

import harness.steps.plugin  # noqa: F401 - registers every step module
from harness.report.allure_env import HARNESS_ERRORS, classify
from harness.steps.fixtures import NEEDS

REPO = Path(__file__).resolve().parents[2]

INVENTORY = """\
name: composition
cluster: {kubeconfig: kube.conf}
nodes:
  - {name: w1, role: worker, power: {driver: kind}}
"""

#: A value for each typed field, as a feature would write it.
SAMPLES = {
    "Limit": "5 seconds",
    "Amount": "one",
    "Pods": "the singleton",
    "Pods_": "every lost pod's",
    "Volumes": "the singleton's volume",
    "One": "the member",
    "Failure": "power",
    "d": "2",
    "w": "ipmi",
    "": "x",
}
_FIELD = re.compile(r"\{(\w+)(?::([^}]*))?\}")


def _provided() -> set[str]:
    return {
        c.target_fixture
        for c in step_function_context_registry.values()
        if c.target_fixture is not None
    }


def _sentence(text: str) -> str:
    return _FIELD.sub(lambda m: SAMPLES.get(m.group(2) or "", "x"), text)


def needy_steps() -> list[tuple[str, str, str]]:
    """(keyword, sentence, first provided fixture it needs) of every step that needs one."""
    provided = _provided()
    out = set()
    for ctx in step_function_context_registry.values():
        if not ctx.step_func.__module__.startswith("harness.steps"):
            continue
        fields = {m.group(1) for m in _FIELD.finditer(str(ctx.parser.name))}
        needs = [
            p
            for p in inspect.signature(ctx.step_func).parameters
            if p in provided and p not in fields
        ]
        if needs and ctx.type in ("when", "then"):
            text = ctx.parser.name if isinstance(ctx.parser.name, str) else str(ctx.parser.name)
            out.add((ctx.type.capitalize(), _sentence(text), needs[0]))
    return sorted(out)


def test_the_grammar_has_steps_that_need_what_others_provide() -> None:
    needs = {n for _, _, n in needy_steps()}
    assert {"outage", "targets", "powered_on", "resolution", "drained"} <= needs
    # a sentence's own field named like a fixture is not a need (the longevity step's
    # "{outage:Limit}")
    assert not any(text.startswith("one third of the workers") for _, text, _ in needy_steps())


def test_each_step_placed_before_its_provider_is_a_harness_error_naming_it(
    tmp_path: Path,
) -> None:
    steps = needy_steps()
    scenarios = "\n".join(
        f"  Scenario: case {i}\n    {kw} {text}\n" for i, (kw, text, _) in enumerate(steps)
    )
    (tmp_path / "order.feature").write_text(f"Feature: steps out of order\n\n{scenarios}")
    (tmp_path / "test_order.py").write_text(
        'from pytest_bdd import scenarios\n\nscenarios("order.feature")\n'
    )
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    results = tmp_path / "allure-results"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(tmp_path / "test_order.py"),
            "-p",
            "no:allure_pytest",
            "-p",
            "no:cacheprovider",
            "--inventory",
            str(tmp_path / "inv.yaml"),
            "--alluredir",
            str(results),
            "-q",
        ],
        cwd=tmp_path,
        env={**os.environ, "POWERCUT_STATE_DIR": str(tmp_path / "state")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    by_name = {}
    for path in results.glob("*-result.json"):
        data = json.loads(path.read_text())
        by_name[data["name"]] = data
    assert len(by_name) == len(steps), sorted(by_name)
    for i, (kw, text, needs) in enumerate(steps):
        result = by_name[f"case {i}"]
        message = result["statusDetails"]["message"]
        assert result["status"] == "broken", (text, result["status"], message)
        assert "MissingStep: step order:" in message, (text, message)
        assert f"'{kw} {text}'" in message, message
        assert 'put "' in message, message  # names at least one step that provides it
        assert NEEDS[needs] in message, message
        assert classify(result["status"], message) == HARNESS_ERRORS, (text, message)


@pytest.mark.parametrize("fixture", ["outage", "powered_on", "resolution", "drained", "targets"])
def test_the_error_names_steps_that_provide_what_is_missing(fixture: str) -> None:
    from harness.steps.fixtures import providers as providers_of

    providers = providers_of(fixture)
    assert providers, fixture
    for p in providers:
        assert p.split()[0] in ("Given", "When", "Then"), p
        assert "{" not in p, p


def test_a_drain_of_nodes_without_inventory_pods_skips_the_eviction_check() -> None:
    """ "every pod of the nodes was evicted" after a random "1-2 worker nodes" that drew a
    worker running no inventory pod: nothing to judge, so a skip saying so (it failed the
    product with "0 expected" in the held-out features, issue 24), never a pass."""
    from types import SimpleNamespace

    from harness.kube.timeline import FakeClock, Timeline
    from harness.scenario.errors import NothingToMeasure
    from harness.steps.operator_steps import drain_evicted_all

    drained = SimpleNamespace(node="w-b2", evicted=[], duration_s=0.3)
    targets = SimpleNamespace(nodes=["w-b2"], pods=[])
    with pytest.raises(NothingToMeasure, match="ran on w-b2: the drain had nothing to evict"):
        drain_evicted_all(drained, targets, Timeline(FakeClock()))  # type: ignore[arg-type]
