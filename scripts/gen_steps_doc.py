#!/usr/bin/env python3
"""Generate docs/steps.md from the step definitions of the step grammar (steps/).

Imports ``harness.steps.scenario_steps`` and every ``steps/*_steps.py`` module, reads the step
definitions pytest-bdd registered (sentence, parser fields and their types, the fixture a
step provides and the ones it needs from earlier steps, docstring, where it is defined)
and writes one Markdown reference, with the timing budgets a ``{limit}`` can name.

    python scripts/gen_steps_doc.py           # write docs/steps.md
    python scripts/gen_steps_doc.py --check   # exit 1 if docs/steps.md is out of date
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import string
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_bdd.parsers import StepParser  # noqa: E402 - after the sys.path set-up
from pytest_bdd.steps import StepFunctionContext, step_function_context_registry  # noqa: E402

from harness.budgets import PROFILES, budget_names  # noqa: E402

OUTPUT = ROOT / "docs" / "steps.md"
STEP_TYPES = ("given", "when", "then")
#: What a typed field of a sentence accepts.
FIELD_TYPES = {
    "Limit": "a named budget (`the node-not-ready budget`) or a literal (`90 seconds`)",
    "Amount": "a count (`zero` ... `twelve`, `3`), a fraction (`one-third`, `one-half`, "
    "`two-thirds`, `all`, `1/3`, `50%`; rounded up) or a range (`1-2`, drawn from the seed)",
    "Pods": "`every lost pod`, or the pod the scenario chose: `the singleton`, `the member`",
    "Pods_": "`every lost pod's`, `the singleton's` or `the member's`",
    "Volumes": "`every ReadWriteOnce volume of a lost pod` / `the ReadWriteOnce volumes of the "
    "lost pods`, or the chosen pod's: `the singleton's volume`, `the singleton's replacement`",
    "d": "an integer",
    "w": "one word (letters, digits, underscore)",
    "": "any text",
}


@dataclass(frozen=True)
class StepDoc:
    type: str
    sentences: tuple[str, ...]
    function: str
    module: str
    line: int
    doc: str
    fields: tuple[tuple[str, str], ...]  # (name, type spec)
    provides: str | None
    needs: tuple[str, ...]


def step_modules() -> list[str]:
    """``harness.steps.scenario_steps`` first, then every other ``steps/*_steps.py``, in name
    order."""
    first = "harness.steps.scenario_steps"
    found = [f"harness.steps.{p.stem}" for p in sorted((ROOT / "steps").glob("*_steps.py"))]
    return [first, *(n for n in found if n != first)]


def _fields(parser: StepParser) -> tuple[tuple[str, str], ...]:
    out = []
    for _, name, spec, _ in string.Formatter().parse(parser.name):
        if name:
            out.append((name, spec or ""))
    return tuple(out)


def collect(modules: Iterable[str]) -> list[StepDoc]:
    """The step definitions of ``modules``, one entry per function (in source order)."""
    wanted = set()
    for name in modules:
        importlib.import_module(name)
        wanted.add(name)
    by_func: dict[Callable[..., object], list[StepFunctionContext]] = {}
    for ctx in list(step_function_context_registry.values()):
        if ctx.step_func.__module__ in wanted:
            by_func.setdefault(ctx.step_func, []).append(ctx)
    provided = {c.target_fixture for cs in by_func.values() for c in cs if c.target_fixture}
    docs = []
    for func, contexts in by_func.items():
        first = contexts[0]
        params = inspect.signature(func).parameters
        fields = _fields(first.parser)
        sentences = tuple(sorted({c.parser.name for c in contexts}, key=lambda s: (len(s), s)))
        docs.append(
            StepDoc(
                type=first.type or "step",
                sentences=sentences,
                function=func.__name__,
                module=func.__module__,
                line=inspect.getsourcelines(func)[1],
                doc=inspect.cleandoc(func.__doc__ or ""),
                fields=fields,
                provides=first.target_fixture,
                needs=tuple(
                    p
                    for p in params
                    if p in provided
                    and p != first.target_fixture
                    and p not in {name for name, _ in fields}
                ),
            )
        )
    modules_order = {m: i for i, m in enumerate(modules)}
    docs.sort(key=lambda d: (STEP_TYPES.index(d.type), modules_order[d.module], d.line))
    return docs


def _sentence(text: str) -> str:
    """A sentence as written in a feature file: ``{limit:Limit}`` shows as ``{limit}``."""
    return "`" + re.sub(r"\{(\w+):[^}]*\}", r"{\1}", text) + "`"


def render(modules: Iterable[str] | None = None) -> str:
    """docs/steps.md as text."""
    names = list(modules) if modules is not None else step_modules()
    docs = collect(names)
    out = [
        "# Step vocabulary",
        "",
        "<!-- Generated by scripts/gen_steps_doc.py from the step definitions in steps/.",
        "     Do not edit by hand: change the steps and run the script. -->",
        "",
        "Every sentence the features (the built-in ones in `features/` and your "
        "own, `powercut run --features DIR`) can use, by keyword, with its parameters. A "
        "step that *provides* a fixture passes state on to later steps; a step that "
        "*needs* one must come after a step that provides it. Modules: "
        + ", ".join(f"`steps/{m.rsplit('.', 1)[1]}.py`" for m in names)
        + ".",
        "",
        "Limits (`{limit}` and other `Limit` fields) are a named budget, "
        "`the <name> budget`, resolved against the inventory's profile and overrides "
        "(see [Budgets](#budgets)), or a literal "
        "`<n> seconds`. Each measured phase is reported as an Allure parameter "
        '`"<phase> (s)"` next to `"<phase> budget (s)"`.',
        "",
    ]
    for step_type in STEP_TYPES:
        these = [d for d in docs if d.type == step_type]
        if not these:
            continue
        out += [f"## {step_type.capitalize()}", ""]
        for d in these:
            out.append(f"### {_sentence(d.sentences[0])}")
            out.append("")
            for alt in d.sentences[1:]:
                out.append(f"Also: {_sentence(alt)}")
                out.append("")
            if d.doc:
                out += [d.doc, ""]
            if d.fields:
                out += ["| parameter | accepts |", "|---|---|"]
                out += [
                    f"| `{name}` | {FIELD_TYPES.get(spec, f'format `{spec}`')} |"
                    for name, spec in d.fields
                ]
                out.append("")
            facts = [f"`{d.module.replace('.', '/')}.py`: `{d.function}`"]
            if d.provides:
                facts.append(f"provides `{d.provides}`")
            if d.needs:
                facts.append("needs " + ", ".join(f"`{n}`" for n in d.needs))
            out += ["_" + "; ".join(facts) + "_", ""]
    out += budget_table()
    return "\n".join(out).rstrip() + "\n"


def budget_table() -> list[str]:
    from harness.budgets import Budgets

    names = budget_names()
    docs = {n: Budgets().describe(n) for n in names}
    profiles = list(PROFILES)
    lines = [
        "## Budgets",
        "",
        "Write them in steps as `the <name> budget` with dashes (`the node-not-ready "
        "budget`). Seconds per profile; an inventory may override any of them "
        "(`budgets.overrides`).",
        "",
        "| budget | " + " | ".join(profiles) + " | phase |",
        "|---|" + "---|" * len(profiles) + "---|",
    ]
    for n in names:
        values = " | ".join(f"{PROFILES[p].get(n):g}" for p in profiles)
        lines.append(f"| `{n.replace('_', '-')}` | {values} | {docs[n]} |")
    lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if docs/steps.md is stale")
    ap.add_argument("--output", type=Path, default=OUTPUT)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run scripts/gen_steps_doc.py", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
