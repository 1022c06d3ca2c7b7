"""Every feature parsed and every sentence matched against the grammar before anything runs.

``powercut run`` (dry or not) calls :func:`check_features` on every feature file it would
run, before pytest starts: a Gherkin syntax error names the file, the line and what was
expected there; a sentence no step matches names the file, the line and the closest
sentences of the grammar (difflib); a value no step accepts (an amount, a failure word, a
budget name) names the field and the valid values. One error lists every problem found, and
nothing runs until all parse. The docs' example test uses the same check on the ```gherkin
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


def _check_values(ctx: StepFunctionContext, text: str) -> str | None:
    """Why the values of a matched sentence are not accepted, or None: every field's
    converter runs (amounts, failure words), and a named budget must exist."""
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
    return None


def check_step(kind: str, text: str) -> str | None:
    """Why the sentence ``text`` (of keyword ``kind``) cannot run, or None."""
    found = [c for c in _contexts(kind) if c.parser.is_matching(text)]
    if not found:
        # the words match but a value does not convert (``powr failure``, ``lots worker
        # nodes`` where an amount goes): name the value and what is valid
        for c in _contexts(kind):
            regex = getattr(getattr(c.parser, "parser", None), "_match_re", None)
            if regex is not None and regex.match(text):
                why = _check_values(c, text)
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
    return _check_values(found[0], text)


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
) -> list[Problem]:
    """The problems of one feature file (``shown``: the name to print for it; ``tags``: the
    registered tags, None not to check them)."""
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
            for step in rendered.steps:
                why = check_step(step.type, step.name)
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
    paths: Iterable[Path], *, steps: bool = True, tags: Collection[str] | None = None
) -> None:
    """Raise :class:`FeaturesDoNotParse` listing every problem of ``paths``."""
    problems = [p for path in paths for p in check_feature(path, steps=steps, tags=tags)]
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
