"""The step reference, generated from the step definitions themselves and shipped with them.

``powercut steps [WORDS]`` prints it (a ``pip install`` user has no docs/ folder);
``scripts/gen_steps_doc.py`` writes the same text to ``docs/steps.md`` and a test keeps that
file up to date. Each entry says, from the code: every sentence (singular and plural), the
parameters and the values they accept (tables), what the step provides and needs (once
each), where its measurement starts under each failure kind, whether it skips or fails when
there is nothing to judge, and how it behaves on the lab, on kind and on real machines
where that differs.
"""

from __future__ import annotations

import importlib
import inspect
import re
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pytest_bdd.parsers import StepParser
from pytest_bdd.steps import StepFunctionContext, step_function_context_registry

from harness.budgets import PROFILES, Budgets, budget_names, dashed
from harness.failures import REGISTRY, FailureKind
from harness.scenario.targets.select import ALL_WORDS
from harness.steps.fixtures import INVENTORY_NAMES, NEEDS, inventory_names_of, provided_by
from harness.steps.plugin import pytest_plugins as STEP_MODULES
from harness.steps.support.limits import AMOUNT_PATTERN, SUBJECT_TYPES, Limit, Subject
from harness.steps.support.platforms import DIFFERENCES

STEP_TYPES = ("given", "when", "then")

#: What a typed field of a sentence accepts, pointing to its table.
FIELD_TYPES = {
    "Limit": "a named budget `the <name> budget` ([Budgets](#budgets)) or `<n> seconds`",
    "Amount": "an amount ([Amounts](#amounts))",
    "Failure": "a failure word ([Failure kinds](#failure-kinds))",
    "Pods": "`every lost pod`, `the member`, `the singleton` ([Subjects](#subjects))",
    "Pods_": "`every lost pod's`, `the member's`, `the singleton's` ([Subjects](#subjects))",
    "Volumes": "the lost pods' volumes or the subject's ([Subjects](#subjects))",
    "One": "`the member` or `the singleton` ([Subjects](#subjects))",
    "d": "an integer (`2`)",
    "w": "one word (letters, digits, underscore)",
    "": "any text",
}

# -- facts the code cannot say by itself ------------------------------------------------------

#: Where each kind of failure's measurements start: the event a failure step records per
#: node (``outage``: "NotReady within", "DaemonSet pods NotReady within", the taint after
#: it) and the one its return records (``powered_on``: "Ready within", "Ready again").
FAILURE_STARTS: dict[FailureKind, tuple[str, str, str]] = {
    kind: (failure.steps, failure.down_text, failure.back_text)
    for kind, failure in REGISTRY.items()
}

#: Steps whose start is one of :data:`FAILURE_STARTS` (``outage`` or ``powered_on``).
MEASURES_FROM_FAILURE = {
    "nodes_not_ready": 1,
    "daemon_pods_not_ready": 1,
    "nodes_tainted_unreachable": 1,
    "nodes_ready_again": 2,
    "daemon_pods_ready_again": 2,
    "member_recreated": 2,
    "api_fully_ready": 2,
    "node_api_ready": 2,
}

_SKIP = (
    "Nothing to judge ({what}): the scenario is **skipped**, saying so (a failure with "
    "`--fail-on-skip`)."
)
_ONE = (
    "**Harness error** (exit 2, never a product failure) when the lost nodes ran no such pod "
    "(it names the Givens that provide one) or several (it names the plural form)."
)
#: What a step does when the cluster gives it nothing to act on or to judge.
RULES: dict[str, str] = {
    "critical_spread": (
        "A precondition: a critical workload on fewer racks (topology spread acts at "
        "scheduling only: earlier failovers can leave it concentrated) is **not judged**: the "
        "scenario is **skipped**, saying which workload and its racks (a failure with "
        "`--fail-on-skip`), never failed as the product. To restore the spread first, put "
        "`the critical workloads are spread across racks again` before it."
    ),
    "critical_respread": (
        "Restores what `every critical workload has Ready replicas in at least {count} racks` "
        "checks. A spread it cannot restore (a PodDisruptionBudget that refuses every eviction "
        "within the drain budget, a replacement not Ready within the pod-rescheduled budget "
        "or placed on a rack the workload already runs in, too few Ready racks) is **not "
        "judged**: the scenario is **skipped**, saying why (a failure with `--fail-on-skip`), "
        "never failed as the product. Nothing to evict (already spread): it does nothing."
    ),
    "pods_terminating": _SKIP.format(what="no inventory pod ran on the lost nodes"),
    "lost_pods_rescheduled": _SKIP.format(what="no lost pod") + " Singular: " + _ONE,
    "replacements_ready": _SKIP.format(what="no lost pod") + " Singular: " + _ONE,
    "lost_pods_replaced_ready": _SKIP.format(what="no lost pod a controller replaces"),
    "lost_stateless_pods_replaced_ready": _SKIP.format(what="no lost pod without a volume"),
    "lost_volumes_multi_attach": _SKIP.format(what="no volume held by a lost node")
    + " Singular: "
    + _ONE,
    "node_still_holds_volumes": _SKIP.format(what="no volume held by a lost node")
    + " Singular: "
    + _ONE,
    "node_releases_volumes": _SKIP.format(what="no volume held by a lost node")
    + " Singular: "
    + _ONE,
    "lost_volumes_reattached": _SKIP.format(what="no volume held by a lost node")
    + " Singular: "
    + _ONE,
    "subject_terminating": _ONE,
    "member_stays_terminating": "Plural: "
    + _SKIP.format(what="no StatefulSet member lost")
    + " Singular: "
    + _ONE,
    "no_second_member": "Plural: "
    + _SKIP.format(what="no StatefulSet member lost")
    + " Singular: "
    + _ONE,
    "member_recreated": "Plural: "
    + _SKIP.format(what="no StatefulSet member lost")
    + " Singular: "
    + _ONE,
    "statefulset_quorum_kept": _SKIP.format(what="no StatefulSet member lost"),
    "daemon_pods_not_ready": _SKIP.format(what="no DaemonSet pod on the node"),
    "daemon_pods_ready_again": _SKIP.format(what="no DaemonSet pod on the node"),
    "daemon_pods_not_evicted": _SKIP.format(what="no DaemonSet pod on the node"),
    "drain_evicted_all": _SKIP.format(what="no inventory pod but DaemonSet pods on the nodes"),
    "drain_left_daemon_pods": _SKIP.format(what="no DaemonSet pod on the nodes"),
    "drain_respected_pdbs": _SKIP.format(what="no workload with a PodDisruptionBudget"),
    "services_available": _SKIP.format(what="no critical workload with a health endpoint"),
    "out_of_service_taint_gone": "**Harness error** when no step removed the taint "
    "(it names `When the out-of-service taint is removed`).",
    "node_api_ready": "**Harness error** when no control-plane node was powered on, or it "
    "has no `api_endpoint` in the inventory.",
    "job_completes": "**Harness error** when the Job named is not the one re-run.",
    "lose_power_through": "**Skipped** when the node's inventory entry offers no such protocol.",
    "cut_off_network": "**Skipped** when the node's drivers cannot partition it (SSH can; "
    "IPMI, Redfish cannot).",
    "stop_kubelets": "**Skipped** when the node's drivers cannot stop its kubelet (SSH, "
    "kind and the lab can).",
    "fail_nodes": "**Skipped** when no node fits the amounts, or a node's drivers cannot do "
    "the failure kind.",
    "restart_pods_by_selector": "**Skipped** when no pod matches the selector.",
    "rerun_job": "**Skipped** when there is no such Job.",
}
_GIVEN_RULE = "**Skipped** when no node of this cluster fits, saying what it lacks."
_THEN_RULE = "Always judges: it passes or **fails** (a missing earlier step is a harness error)."

OUTLINE_EXAMPLE = """\
```gherkin
Feature: Fail workers with any failure kind

  Background:
    Given the cluster is in steady state

  Scenario Outline: Fail <workers> worker(s) with <failure> failure
    When I fail <workers> worker nodes and zero primary nodes with <failure> failure for 20 seconds
    Then every lost node is NotReady within the node-not-ready budget
    And every lost node is Ready within the node-ready-after-power-on budget
    And the cluster is back to steady state within the recovery budget

    Examples:
      | workers | failure   |
      | 1-2     | power     |
      | two     | partition |
      | 1       | kubelet   |
```"""


@dataclass(frozen=True)
class StepDoc:
    type: str
    sentences: tuple[str, ...]
    function: str
    module: str
    line: int
    doc: str
    fields: tuple[tuple[str, str], ...]  # (name, type spec)
    provides: tuple[str, ...]
    needs: tuple[str, ...]
    names: tuple[tuple[str, str], ...] = ()  # (field, inventory kind): checked before a run


def step_modules() -> list[str]:
    """Every step module the plugin loads, in its order: the scenario grammar's by subject
    (targets, failures, operator actions, nodes, pods, volumes, services), then the others."""
    return [m for m in STEP_MODULES if m.endswith("_steps")]


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
    provided = {
        n for cs in by_func.values() for c in cs for n in provided_by(c.step_func, c.target_fixture)
    }
    docs = []
    for func, contexts in by_func.items():
        first = contexts[0]
        params = inspect.signature(func).parameters
        fields = _fields(first.parser)
        gives = provided_by(func, first.target_fixture)
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
                provides=gives,
                needs=tuple(
                    p
                    for p in params
                    if p in provided and p not in gives and p not in {n for n, _ in fields}
                ),
                names=tuple(sorted(inventory_names_of(func).items())),
            )
        )
    modules_order = {m: i for i, m in enumerate(modules)}
    docs.sort(key=lambda d: (STEP_TYPES.index(d.type), modules_order[d.module], d.line))
    return docs


def sentence(text: str) -> str:
    """A sentence as written in a feature file: ``{limit:Limit}`` shows as ``{limit}``."""
    return "`" + re.sub(r"\{(\w+):[^}]*\}", r"{\1}", text) + "`"


def _provides_needs(d: StepDoc) -> list[str]:
    out = []
    if d.provides:
        out.append("**Provides:** " + "; ".join(f"`{p}` ({NEEDS.get(p, p)})" for p in d.provides))
    if d.needs:
        out.append(
            "**Needs** (from an earlier step): "
            + "; ".join(f"`{n}` ({NEEDS.get(n, n)})" for n in d.needs)
        )
    return out


def _starts(d: StepDoc) -> list[str]:
    which = MEASURES_FROM_FAILURE.get(d.function)
    if which is None:
        return []
    col = "the failure" if which == 1 else "the return"
    rows = [
        "",
        f"Measured from {col}, by failure kind:",
        "",
        "| failure | starts at |",
        "|---|---|",
    ]
    rows += [f"| `{k.value}` | {v[which]} |" for k, v in FAILURE_STARTS.items()]
    return rows


def builtin_limits() -> dict[str, list[str]]:
    """For each step function, the limits the built-in features give it (``the
    pod-rescheduled budget``), most used first: which budget fits a step, from use."""
    from collections import Counter

    from pytest_bdd.parser import FeatureParser

    from harness.steps import BUILTIN_FEATURES

    for module in step_modules():
        importlib.import_module(module)
    used: dict[str, Counter[str]] = {}
    contexts = [
        c
        for c in step_function_context_registry.values()
        if c.step_func.__module__.startswith("harness.steps")
    ]
    for path in sorted(BUILTIN_FEATURES.rglob("*.feature")):
        feature = FeatureParser(str(path.parent), path.name).parse()
        for template in feature.scenarios.values():
            rows = [r for ex in template.examples for r in ex.as_contexts()] or [{}]
            for row in rows:
                for step in template.render(row).steps:
                    for c in contexts:
                        if c.type == step.type and c.parser.is_matching(step.name):
                            args = c.parser.parse_arguments(step.name) or {}
                            for value in args.values():
                                if isinstance(value, Limit):
                                    name = c.step_func.__name__
                                    used.setdefault(name, Counter())[value.text] += 1
    return {name: [t for t, _ in counts.most_common()] for name, counts in used.items()}


def entry(d: StepDoc, limits: dict[str, list[str]] | None = None) -> list[str]:
    """One step's entry, Markdown lines."""
    out = [f"### {sentence(d.sentences[0])}", ""]
    for alt in d.sentences[1:]:
        out += [f"Also: {sentence(alt)}", ""]
    if d.doc:
        out += [d.doc, ""]
    if d.fields:
        out += ["| parameter | accepts |", "|---|---|"]
        names = dict(d.names)
        out += [
            f"| `{n}` | "
            + (
                f"{INVENTORY_NAMES[names[n]]} (checked against the inventory before the run)"
                if n in names
                else FIELD_TYPES.get(s, f"format `{s}`")
            )
            + " |"
            for n, s in d.fields
        ]
        out.append("")
    facts = _provides_needs(d)
    rule = RULES.get(d.function) or (
        _GIVEN_RULE if d.type == "given" and "targets" in d.provides else None
    )
    if rule is None and d.type == "then":
        rule = _THEN_RULE
    if rule:
        facts.append("**Nothing to act on or judge:** " + rule)
    used = (limits or {}).get(d.function)
    if used:
        facts.append("**Limit in the built-in features:** " + ", ".join(f"`{u}`" for u in used))
    if d.function in DIFFERENCES:
        facts.append("**Lab, kind, real machines:** " + DIFFERENCES[d.function])
    out += [f"- {f}" for f in facts]
    out += _starts(d)
    out += ["", f"_`{d.module.replace('.', '/')}.py`: `{d.function}`_", ""]
    return out


def value_tables() -> list[str]:
    """The accepted values of every typed field, as tables."""
    out = ["## Accepted values", "", "### Amounts", ""]
    out += [
        "| written | means |",
        "|---|---|",
        "| `zero`, `no`, `one` ... `twelve`, `0`, `3` | that many nodes |",
        "| `one-third`, `one-half`, `two-thirds`, `one-quarter`, `1/3`, `50%` | that "
        "fraction of the nodes that fit, rounded up (at least one unless it is zero) |",
        "| "
        + ", ".join(f"`{w}`" for w in sorted(ALL_WORDS) if re.fullmatch(AMOUNT_PATTERN, w))
        + " | every node that fits |",
        "| `1-2`, `two-three` | a count drawn in that range from the run's seed (`--seed N` "
        "replays it) |",
        "",
        "A count is followed by `worker node` (one) or `worker nodes`; both forms exist for "
        "every node step.",
        "",
        "### Failure kinds",
        "",
        "| word | failure | comes back by |",
        "|---|---|---|",
    ]
    out += [f"| `{k.value}` | {f.what} | {f.comes_back_by} |" for k, f in REGISTRY.items()]
    out += ["", "### Subjects", "", "| field | every lost pod | the member | the singleton |"]
    out.append("|---|---|---|---|")
    for name, t in SUBJECT_TYPES.items():
        cols = [
            ", ".join(f"`{w}`" for w, s in t.words.items() if s is which) or "-"
            for which in (Subject.LOST, Subject.MEMBER, Subject.SINGLETON)
        ]
        out.append(f"| `{name}` | " + " | ".join(cols) + " |")
    out += [
        "",
        '"The member" is a lost StatefulSet pod; "the singleton" the lost pod of a '
        "one-replica Deployment. The target step's own pod when it chose one (\"a worker node "
        'running a StatefulSet member ..."); after any other target (a rack, a count, names, '
        "labels, the Dell-style step) the one such pod among the lost ones. None or several "
        "is a harness error naming the Givens that provide one, or the plural form.",
        "",
        "### Start events by failure kind",
        "",
        "| failure | written | failure measured from | return measured from |",
        "|---|---|---|---|",
    ]
    out += [f"| `{k.value}` | {a} | {b} | {c} |" for k, (a, b, c) in FAILURE_STARTS.items()]
    out.append("")
    return out


def tag_table() -> list[str]:
    """powercut's own tags and how a project registers its own."""
    from harness.steps.support.tags import MARKERS

    out = [
        "## Tags",
        "",
        "Feature and scenario tags are pytest markers; `powercut run` refuses a tag nobody "
        "registered (naming file and line) before anything runs. `@epic:<slug>` and "
        "`@story:<slug>` are Allure labels, not markers. Register your own, with their "
        "meaning, in your project (no package edit): `powercut.toml` (`[tags]`) or "
        "`pyproject.toml` (`[tool.powercut.tags]`), in the features directory or one above "
        "it, or in the current directory:",
        "",
        "```toml",
        "[tool.powercut.tags]",
        'storage = "exercises the storage tier"',
        "```",
        "",
        "| tag | meaning |",
        "|---|---|",
    ]
    out += [f"| `@{name}` | {meaning} |" for name, meaning in MARKERS.items()]
    out.append("")
    return out


def budget_table() -> list[str]:
    names = budget_names()
    profiles = list(PROFILES)
    lines = [
        "## Budgets",
        "",
        "Written with dashes everywhere: in steps (`the node-not-ready budget`) and in an "
        "inventory's `budgets.overrides` (`node-not-ready: 40s`; an underscore spelling is "
        "read with a warning naming the dashed key). Seconds per profile.",
        "",
        "| budget | " + " | ".join(profiles) + " | phase |",
        "|---|" + "---|" * len(profiles) + "---|",
    ]
    for n in names:
        values = " | ".join(f"{PROFILES[p].get(n):g}" for p in profiles)
        lines.append(f"| `{dashed(n)}` | {values} | {Budgets().describe(n)} |")
    lines.append("")
    return lines


def render(modules: Iterable[str] | None = None) -> str:
    """The whole reference (docs/steps.md) as Markdown."""
    names = list(modules) if modules is not None else step_modules()
    docs = collect(names)
    out = [
        "# Step vocabulary",
        "",
        "<!-- Generated by scripts/gen_steps_doc.py from the step definitions in steps/",
        "     (harness/steps/reference.py). Do not edit by hand. `powercut steps [WORDS]`",
        "     prints the same. -->",
        "",
        "Every sentence the features (the built-in ones in `features/` and your own, "
        "`powercut run --features DIR`) can use, by keyword. `powercut run` checks every "
        "sentence of every feature against this grammar before anything runs: an unknown "
        "sentence names its file, line and the closest sentences here.",
        "",
        "Each entry: the sentence (and its other forms, singular and plural); its parameters "
        "and the values they accept; what it **provides** to later steps and **needs** from "
        "earlier ones (a step placed before what it needs is a harness error naming the "
        "steps that provide it); what it does when there is nothing to act on or judge; "
        "where a measurement starts under each failure kind; how the lab, kind and real "
        "machines differ. Modules: "
        + ", ".join(f"`steps/{m.rsplit('.', 1)[1]}.py`" for m in names)
        + ".",
        "",
        "## A Scenario Outline",
        "",
        "An outline runs once per row of its Examples; `<name>` is replaced by the row's "
        "value before the sentence is matched, so every value must be one the step accepts "
        "(checked before anything runs):",
        "",
        OUTLINE_EXAMPLE,
        "",
    ]
    out += value_tables()
    limits = builtin_limits()
    for step_type in STEP_TYPES:
        these = [d for d in docs if d.type == step_type]
        if these:
            out += [f"## {step_type.capitalize()}", ""]
            for d in these:
                out += entry(d, limits)
    out += tag_table()
    out += budget_table()
    return "\n".join(out).rstrip() + "\n"


def search(words: Iterable[str]) -> str:
    """The entries whose sentences or description hold every word (case-insensitive); the
    value tables when a word names one (``amounts``, ``budgets``, ``failure``,
    ``subjects``, ``tags``, ``outline``)."""
    wanted = [w.lower() for w in words]
    if not wanted:
        return render()
    out: list[str] = []
    sections = {
        "amount": value_tables,
        "failure": value_tables,
        "subject": value_tables,
        "budget": budget_table,
        "tag": tag_table,
    }
    shown: set[str] = set()
    for w in wanted:
        for key, make in sections.items():
            if w.startswith(key) and make.__name__ not in shown and len(wanted) == 1:
                out += make()
                shown.add(make.__name__)
    if wanted == ["outline"]:
        out += ["## A Scenario Outline", "", OUTLINE_EXAMPLE, ""]
    limits = builtin_limits()
    for d in collect(step_modules()):
        text = " ".join((*d.sentences, d.doc, d.function)).lower()
        if all(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", text) for w in wanted):
            out += [f"## {d.type.capitalize()}", *entry(d, limits)]
    return "\n".join(out).rstrip() + "\n" if out else ""
