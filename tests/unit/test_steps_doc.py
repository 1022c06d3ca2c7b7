"""docs/steps.md must be what scripts/gen_steps_doc.py generates from the step code."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_steps_doc", ROOT / "scripts" / "gen_steps_doc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_steps_doc_is_up_to_date() -> None:
    gen = _generator()
    expected = gen.render()
    current = (ROOT / "docs" / "steps.md").read_text(encoding="utf-8")
    assert current == expected, (
        "docs/steps.md is out of date with the step definitions in steps/: "
        "run `python scripts/gen_steps_doc.py` and commit the result"
    )


def test_every_step_sentence_is_documented() -> None:
    gen = _generator()
    text = (ROOT / "docs" / "steps.md").read_text(encoding="utf-8")
    docs = gen.collect(gen.step_modules())
    assert docs, "no step definitions found in steps/"
    for d in docs:
        for sentence in d.sentences:
            assert gen._sentence(sentence) in text, sentence
        if d.module == "harness.steps.scenario_steps" and d.type != "when":
            assert d.doc, f"shared step {d.function} has no docstring (it is the step's doc)"
