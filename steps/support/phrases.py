"""What every step module of the grammar shares: reading a sentence and its phrases.

- :func:`phrase`: a step sentence with typed fields (``{limit:Limit}``, ``{amount:Amount}``,
  ``{pods:Pods}``, ``{count:d}``).
- :func:`within`: a limit resolved to seconds, and the Allure step its wait shows as.
- :func:`about`, :func:`subject`, :func:`members_meant`: the lost pods a subject phrase
  ("every lost pod", "the member", "the singleton", "every lost member") stands for in this
  scenario (:mod:`harness.scenario.targets.subjects`), naming the running step in a harness error.
- :func:`provide`: what a step provides besides its ``target_fixture``.

No step is defined here; the step modules import this and never one another.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import pytest
from pytest_bdd import parsers
from pytest_bdd.compat import inject_fixture
from pytest_bdd.parsers import StepParser

from harness.budgets import Budgets
from harness.scenario.report import waiting
from harness.scenario.targets import subjects
from harness.scenario.targets.choice import Outage
from harness.scenario.targets.workloads import PodInfo, Workload
from harness.steps.fixtures import PROVIDED, current_step
from harness.steps.support.limits import TYPES, Limit, Subject


def phrase(text: str) -> StepParser:
    """A step sentence with typed fields: ``{limit:Limit}``, ``{count:d}``, ``{protocol:w}``."""
    return parsers.parse(text, extra_types=TYPES)


@contextlib.contextmanager
def within(limit: Limit, budgets: Budgets, what: str) -> Iterator[float]:
    """Resolve ``limit`` to seconds and run the body, given them, inside the Allure step
    "wait up to <seconds>s: ``what``"."""
    seconds = limit.seconds(budgets)
    with waiting(what, seconds):
        yield seconds


def about(
    request: pytest.FixtureRequest,
    outage: Outage,
    pods: Subject,
    workloads: Sequence[Workload],
    plural: str,
) -> tuple[PodInfo, ...]:
    """The lost pods a step is about: every one replaced elsewhere, or the one its subject
    phrase names (``plural``: the step's form for every lost pod, named when the phrase is
    ambiguous)."""
    kind = None if pods is Subject.LOST else pods.kind
    return subjects.about(outage, kind, workloads, step=current_step(request), plural=plural)


def subject(
    request: pytest.FixtureRequest,
    outage: Outage,
    pod: Subject,
    workloads: Sequence[Workload],
    plural: str,
) -> PodInfo:
    """The one lost pod "the member" / "the singleton" stands for, whatever chose the nodes:
    several are a harness error naming ``plural``, none one naming the Givens that provide
    such a pod."""
    return subjects.resolve(outage, pod.kind, workloads, step=current_step(request), plural=plural)


def members_meant(
    request: pytest.FixtureRequest, outage: Outage, workloads: Sequence[Workload], plural: str
) -> tuple[PodInfo, ...]:
    """The members a member step is about: written "every lost member ...", every lost one
    (none: nothing to judge); written "the member ...", the one it stands for."""
    step = current_step(request)
    every = step.split(" ", 1)[-1].startswith("every") or "any lost member" in step
    return subjects.member_or_members(outage, workloads, every=every, step=step, plural=plural)


def provide(request: pytest.FixtureRequest, name: str, value: object) -> None:
    """What a step provides besides its ``target_fixture``."""
    inject_fixture(request, name, value)
    request.node.stash.setdefault(PROVIDED, set()).add(name)
