"""Every step of every built-in feature matches exactly one step of the grammar (after an
outline's examples are filled in): no feature can break on its vocabulary at run time, and
no sentence is ambiguous between two steps."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_bdd.parser import FeatureParser
from pytest_bdd.steps import step_function_context_registry

import harness.steps.plugin  # noqa: F401 - registers every step module
from harness.steps import BUILTIN_FEATURES

FEATURES = sorted(BUILTIN_FEATURES.rglob("*.feature"))


def _texts(path: Path) -> list[tuple[str, str]]:
    feature = FeatureParser(str(path.parent), path.name).parse()
    out = []
    for scenario in feature.scenarios.values():
        rows = [dict(zip(ex.example_params, row, strict=True)) for ex in scenario.examples
                for row in ex.examples] or [{}]  # fmt: skip
        for row in rows:
            for step in scenario.steps:
                text = step.name
                for key, value in row.items():
                    text = text.replace(f"<{key}>", value)
                out.append((step.type, text))
    return out


def _matches(kind: str, text: str) -> set[str]:
    return {
        f"{ctx.step_func.__module__}.{ctx.step_func.__name__}"
        for ctx in step_function_context_registry.values()
        if ctx.type == kind and ctx.parser.is_matching(text)
    }


@pytest.mark.parametrize("path", FEATURES, ids=lambda p: p.name)
def test_every_step_of_the_feature_matches_one_step_of_the_grammar(path: Path) -> None:
    for kind, text in _texts(path):
        found = _matches(kind, text)
        assert len(found) == 1, f"{path.name}: {kind} {text!r} matches {sorted(found) or 'none'}"


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("then", "the singleton is rescheduled on another node within 30 seconds"),
        ("then", "every lost pod is rescheduled on another node within 30 seconds"),
        ("then", "the singleton's replacement is Ready within the pod-rescheduled budget"),
        ("then", "the node releases the singleton's volume within the volume-detach budget"),
        ("when", "the nodes are shut down gracefully"),
        (
            "when",
            "I fail 1-2 worker nodes and zero primary nodes with kubelet failure for 5 seconds",
        ),
        ("given", "one-third of the worker nodes"),
        ("given", "two nodes of rack rack-b"),
        ("given", "the nodes w-a1, w-b1 and w-c1"),
    ],
)
def test_singular_plural_and_subject_forms_are_one_step_each(kind: str, text: str) -> None:
    assert len(_matches(kind, text)) == 1, text
