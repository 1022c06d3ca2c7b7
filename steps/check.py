"""Every feature parsed and every sentence matched against the grammar before anything runs.

``powercut run`` (dry or not) calls :func:`check_features` on every feature file it would
run, before pytest starts: a Gherkin syntax error names the file, the line and what was
expected there; a sentence no step matches names the file, the line and the closest
sentences of the grammar (difflib); a value no step accepts (an amount, a failure word, a
budget name) names the field and the valid values. One error lists every problem found, and
a sentence placed before the steps that provide what it needs (a ``Then`` that measures
from a power-on, with no power-on before it) names those steps; given the inventory, an SLO,
a rack or a node it does not have names the ones it has. Nothing runs until all parse. The
docs' example test uses the same check on the ```gherkin
blocks of docs/.
"""

from __future__ import annotations

import difflib
import importlib
import re
import tempfile
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_bdd.exceptions import GherkinParseError
from pytest_bdd.parser import FeatureParser, Step
from pytest_bdd.steps import StepFunctionContext, step_function_context_registry

from harness.budgets import Budgets, canonical_budget_name
from harness.errors import ConfigError, PowercutError
from harness.inventory import Inventory
from harness.scenario.targets.select import parse_names
from harness.steps.fixtures import NEEDS, inventory_names_of, needs_of, provided_by, providers
from harness.steps.plugin import pytest_plugins as _STEP_MODULES
from harness.steps.support.limits import Limit

for _module in _STEP_MODULES:  # registers every step (pytest loads them the same way)
    importlib.import_module(_module)

_FIELD = re.compile(r"\{(\w+)(?::[^}]*)?\}")
#: Gherkin's token names, as a writer would say them.
_TOKENS = {
    "#EOF": "the end of the file",
    "#Language": "a '# language:' line",
    "#TagLine": "a @tag line",
    "#FeatureLine": "'Feature:'",
    "#RuleLine": "'Rule:'",
    "#BackgroundLine": "'Background:'",
    "#ScenarioLine": "'Scenario:' or 'Scenario Outline:'",
    "#ExamplesLine": "'Examples:'",
    "#StepLine": "a step (Given, When, Then, And, But)",
    "#DocStringSeparator": 'a """ doc string',
    "#TableRow": "a | table row |",
    "#Comment": "a # comment",
    "#Empty": "an empty line",
    "#Other": "a description line",
}


@dataclass(frozen=True)
class Problem:
    """One thing that stops a feature from running: where, and what."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class FeaturesDoNotParse(ConfigError):
    """Some feature cannot run as written: nothing ran. Lists every problem."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        n = len(self.problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(
            f"{n} problem(s) in the feature files; nothing was run or touched "
            f"(`powercut steps WORDS` lists the sentences):\n{lines}"
        )


def grammar_sentence(ctx: StepFunctionContext) -> str:
    """A step's sentence as a feature writes it: ``{limit:Limit}`` shows as ``{limit}``."""
    return _FIELD.sub(lambda m: "{" + m.group(1) + "}", str(ctx.parser.name))


def _contexts(kind: str | None = None) -> list[StepFunctionContext]:
    return [
        c
        for c in step_function_context_registry.values()
        if c.step_func.__module__.startswith("harness.steps") and (kind is None or c.type == kind)
    ]


def closest(kind: str, text: str, n: int = 3) -> list[str]:
    """The ``n`` sentences of the grammar closest to ``text`` (``Keyword sentence``): of its
    own keyword first, else of any."""
    for contexts in (_contexts(kind), _contexts()):
        by_text = {grammar_sentence(c): (c.type or "step").capitalize() for c in contexts}
        found = difflib.get_close_matches(text, list(by_text), n=n, cutoff=0.5)
        if not found:
            # a sentence with fields reads far from its template: compare on the words
            # before the first field too
            scored = sorted(
                by_text,
                key=lambda s: -difflib.SequenceMatcher(None, text, s).ratio(),
            )
            found = scored[:n]
        if found:
            return [f"{by_text[s]} {s}" for s in found]
    return []


def _syntax_message(exc: GherkinParseError) -> str:
    raw = str(exc.__cause__.args[0]) if exc.__cause__ is not None and exc.__cause__.args else ""
    m = re.search(r"expected: (.*?), got '(.*)'", raw)
    if m is None:
        return f"Gherkin syntax: {exc.message} (line: {exc.line_content.strip()!r})"
    expected = [_TOKENS.get(t.strip(), t.strip()) for t in m.group(1).split(",")]
    wanted = [e for e in expected if e not in ("a # comment", "an empty line")]
    return (
        f"Gherkin syntax: got {m.group(2).strip()!r}; expected "
        + ", ".join(wanted or expected)
        + " (a step starts with Given, When, Then, And or But)"
    )


def _check_values(
    ctx: StepFunctionContext, text: str, inventory: Inventory | None = None
) -> str | None:
    """Why the values of a matched sentence are not accepted, or None: every field's
    converter runs (amounts, failure words), a named budget must exist and, given the
    inventory, a field that names something of it (an SLO, a rack, nodes) must name what it
    has."""
    try:
        args = ctx.parser.parse_arguments(text) or {}
    except (ValueError, PowercutError) as exc:
        return f"value not accepted: {exc}"
    for name, value in args.items():
        if isinstance(value, Limit) and value.budget is not None:
            try:
                Budgets().get(canonical_budget_name(value.text))
            except PowercutError as exc:
                return f"{{{name}}}: {exc}"
    if inventory is not None:
        for name, kind in inventory_names_of(ctx.step_func).items():
            if name in args:
                why = _inventory_value(kind, str(args[name]), inventory)
                if why is not None:
                    return f"{{{name}}}: {why}"
    return None


def _inventory_value(kind: str, value: str, inventory: Inventory) -> str | None:
    """Why ``value`` names no ``kind`` of the inventory (with the valid names), or None."""
    source = f" ({inventory.source})" if inventory.source else ""
    if kind == "slo":
        valid = [s.name for s in inventory.slos]
        wanted = [value.strip()]
        what = "SLO"
    elif kind == "rack":
        valid = inventory.racks()
        wanted = [value.strip().strip('"')]
        what = "rack"
    elif kind == "workloads":
        if any(w.name is None for w in inventory.workloads):
            return None  # a workload given by selector is named only once resolved
        valid = list(dict.fromkeys(str(w.name) for w in inventory.workloads))
        wanted = parse_names(value)
        what = "workload"
    else:
        valid = [n.name for n in inventory.nodes]
        wanted = parse_names(value)
        what = "node"
    for one in wanted:
        if one not in valid:
            near = difflib.get_close_matches(one, valid, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            listed = ", ".join(valid) if valid else f"(none: the inventory has no {what}s)"
            return f"the inventory{source} has no {what} {one!r}{hint}; valid: {listed}"
    return None


def _matching(kind: str, text: str) -> list[StepFunctionContext]:
    return [c for c in _contexts(kind) if c.parser.is_matching(text)]


def check_step(kind: str, text: str, inventory: Inventory | None = None) -> str | None:
    """Why the sentence ``text`` (of keyword ``kind``) cannot run, or None (``inventory``:
    also check the names it gives of the inventory's SLOs, racks and nodes)."""
    found = _matching(kind, text)
    if not found:
        # the words match but a value does not convert (``powr failure``, ``lots worker
        # nodes`` where an amount goes): name the value and what is valid
        for c in _contexts(kind):
            regex = getattr(getattr(c.parser, "parser", None), "_match_re", None)
            if regex is not None and regex.match(text):
                why = _check_values(c, text, inventory)
                if why is not None:
                    return f"{kind.capitalize()} {text!r}: {why}"
        near = closest(kind, text)
        return f"no step matches {kind.capitalize()} {text!r}; closest: " + "; ".join(
            f'"{s}"' for s in near
        )
    funcs = {c.step_func for c in found}
    if len(funcs) > 1:
        return f"{kind.capitalize()} {text!r} matches {len(funcs)} steps: " + ", ".join(
            sorted(f.__name__ for f in funcs)
        )
    return _check_values(found[0], text, inventory)


def _order_problem(kind: str, text: str, provided: set[str]) -> str | None:
    """Why the matched sentence cannot run where it stands (what it needs that no earlier
    step of the scenario provides: the run would stop there as a harness error, after the
    steps before it acted), or None; ``provided`` grows by what the step provides."""
    found = _matching(kind, text)
    if len(found) != 1 and len({c.step_func for c in found}) != 1:
        return None
    ctx = found[0]
    missing = [n for n in needs_of(ctx.step_func) if n not in provided]
    provided.update(provided_by(ctx.step_func, ctx.target_fixture))
    if not missing:
        return None
    need = missing[0]
    choices = " or ".join(f'"{s}"' for s in providers(need))
    return (
        f"step order: {kind.capitalize()} {text!r} measures from "
        f"{NEEDS.get(need, repr(need))}, which no earlier step of this scenario provides; "
        f"put {choices} before it"
    )


def _rows(template: object) -> list[dict[str, str]]:
    rows = [
        ctx
        for ex in getattr(template, "examples", [])
        for ctx in ex.as_contexts()  # every Examples table's rows
    ]
    return rows or [{}]


#: Tag prefixes that are Allure labels, not markers.
LABEL_TAGS = ("epic:", "story:")


def _tag_problems(
    name: str, line: int, tags: Iterable[str], known: Collection[str]
) -> list[Problem]:
    out = []
    for tag in sorted(tags):
        if tag in known or tag.startswith(LABEL_TAGS):
            continue
        out.append(
            Problem(
                name,
                line,
                f"unknown tag @{tag}: register it with its meaning in your project's "
                f'powercut.toml ([tags] {tag} = "...") or pyproject.toml '
                f"([tool.powercut.tags]); registered: " + ", ".join(sorted(known)),
            )
        )
    return out


def check_feature(
    path: Path,
    *,
    steps: bool = True,
    shown: str | None = None,
    tags: Collection[str] | None = None,
    inventory: Inventory | None = None,
) -> list[Problem]:
    """The problems of one feature file (``shown``: the name to print for it; ``tags``: the
    registered tags, None not to check them; ``inventory``: the names of SLOs, racks and
    nodes the sentences give must be its own). Every sentence must match one step with
    values it accepts, and stand after the steps that provide what it needs."""
    name = shown or str(path)
    try:
        feature = FeatureParser(str(path.parent), path.name).parse()
    except GherkinParseError as exc:
        return [Problem(name, exc.line, _syntax_message(exc))]
    except (OSError, UnicodeDecodeError) as exc:
        return [Problem(name, 0, f"cannot read: {exc}")]
    if not feature.scenarios:
        return [Problem(name, feature.line_number, "no Scenario in this feature")]
    problems: dict[tuple[int, str], Problem] = {}
    if tags is not None:
        found = _tag_problems(name, feature.line_number, feature.tags, tags)
        for template in feature.scenarios.values():
            found += _tag_problems(name, template.line_number, template.tags, tags)
            for ex in template.examples:
                found += _tag_problems(name, ex.line_number or 0, ex.tags, tags)
        problems.update(((p.line, p.message), p) for p in found)
    if not steps:
        return sorted(problems.values(), key=lambda p: p.line)
    for template in feature.scenarios.values():
        for row in _rows(template):
            rendered = template.render(row)
            provided: set[str] = set()
            ordered = True  # after a sentence that cannot run, its order is moot
            for step in rendered.steps:
                why = check_step(step.type, step.name, inventory)
                if why is not None:
                    ordered = False
                elif ordered:
                    why = _order_problem(step.type, step.name, provided)
                if why is not None:
                    where = _with_row(step, row)
                    problems.setdefault(
                        (step.line_number, why), Problem(name, step.line_number, why + where)
                    )
    return sorted(problems.values(), key=lambda p: p.line)


def _with_row(step: Step, row: dict[str, str]) -> str:
    if not row:
        return ""
    return " (example: " + ", ".join(f"{k}={v}" for k, v in row.items()) + ")"


def check_features(
    paths: Iterable[Path],
    *,
    steps: bool = True,
    tags: Collection[str] | None = None,
    inventory: Inventory | None = None,
    builtin: Collection[Path] = (),
) -> None:
    """Raise :class:`FeaturesDoNotParse` listing every problem of ``paths``. The names a
    feature gives of the inventory are checked against ``inventory``, except in the
    ``builtin`` ones (written for the lab: a cluster without the lab's SLOs still runs the
    rest, and the step itself says what is missing)."""
    problems = [
        p
        for path in paths
        for p in check_feature(
            path, steps=steps, tags=tags, inventory=None if path in builtin else inventory
        )
    ]
    if problems:
        raise FeaturesDoNotParse(problems)


def check_text(text: str, *, shown: str = "<text>", line_offset: int = 0) -> list[Problem]:
    """The problems of Gherkin ``text`` (a docs example): a fragment of steps without
    ``Feature:`` / ``Scenario:`` is wrapped in one."""
    body = text
    offset = line_offset
    if not re.search(r"^\s*Feature:", text, re.M):
        if re.search(r"^\s*(Scenario|Scenario Outline|Background|Rule):", text, re.M):
            body, offset = "Feature: docs example\n" + text, line_offset - 1
        else:
            body = "Feature: docs example\n  Scenario: docs example\n" + text
            offset = line_offset - 2
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "example.feature"
        path.write_text(body, encoding="utf-8")
        return [Problem(shown, p.line + offset, p.message) for p in check_feature(path)]
