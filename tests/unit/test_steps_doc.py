"""docs/steps.md must be what scripts/gen_steps_doc.py generates from the step code."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from harness.steps.plugin import SCENARIO_STEP_MODULES

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
        if d.module in SCENARIO_STEP_MODULES and d.type != "when":
            assert d.doc, f"shared step {d.function} has no docstring (it is the step's doc)"


def test_powercut_steps_prints_the_reference_or_the_entries_holding_the_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from harness.cli import main

    assert main(["steps"]) == 0
    assert capsys.readouterr().out == (ROOT / "docs" / "steps.md").read_text(encoding="utf-8")
    assert main(["steps", "I", "fail"]) == 0
    out = capsys.readouterr().out
    assert "### `I fail {workers} worker node and {primary} primary node with" in out
    assert "the node is rebooted" not in out  # whole words: "I" is not in "is"
    assert main(["steps", "no-such-word"]) == 1
    assert "no step holds" in capsys.readouterr().out


def test_each_entry_says_what_it_provides_and_needs_once_the_dell_step_included() -> None:
    from harness.steps.reference import collect, entry, step_modules

    docs = {d.function: d for d in collect(step_modules())}
    dell = docs["fail_nodes"]
    assert set(dell.provides) == {"outage", "targets", "powered_on"}
    assert len(dell.sentences) == 4  # singular and plural of both roles
    assert "targets" not in dell.needs
    reboot = docs["reboot_nodes"]
    assert set(reboot.provides) == {"outage", "powered_on"}
    for d in docs.values():
        text = "\n".join(entry(d))
        assert text.count("**Provides:**") == (1 if d.provides else 0), d.function
        assert text.count("**Needs**") == (1 if d.needs else 0), d.function
        assert not set(d.provides) & set(d.needs), d.function
        if d.type == "then":
            assert "**Nothing to act on or judge:**" in text, d.function


def test_every_step_says_how_it_behaves_on_the_lab_kind_and_real_machines() -> None:
    """Every step has its lab/kind/real-machine entry (a new step must say, even if only
    that it reads nothing but the API), and the entry is in its reference text."""
    from harness.steps.reference import collect, entry, step_modules
    from harness.steps.support.platforms import DIFFERENCES

    docs = {d.function: d for d in collect(step_modules())}
    assert set(DIFFERENCES) == set(docs), (
        sorted(set(docs) - set(DIFFERENCES)),
        sorted(set(DIFFERENCES) - set(docs)),
    )
    for name, d in docs.items():
        assert "**Lab, kind, real machines:** " + DIFFERENCES[name] in "\n".join(entry(d))


def test_fields_that_name_inventory_things_say_so_in_the_reference() -> None:
    from harness.steps.reference import collect, entry, step_modules

    docs = {d.function: d for d in collect(step_modules())}
    assert dict(docs["slo_held"].names) == {"name": "slo"}
    assert dict(docs["some_nodes_of_rack"].names) == {"rack": "rack"}
    text = "\n".join(entry(docs["slo_held"]))
    assert "an SLO of the inventory's `slos` (checked against the inventory before the run)" in text
