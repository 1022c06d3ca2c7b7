"""The scenario's fixtures and the hooks around its steps, for every step module.

Fixtures (one set per scenario, torn down in reverse): ``timeline`` -> ``observer``
(list+watch of nodes, pods, events, volumes, PVCs and endpoints of the inventory's
namespaces) -> ``workloads`` (the inventory's workloads as they are in the cluster) ->
``probers`` (one health probe per workload service) -> ``baseline`` (waits until the
cluster is healthy and records how it was found) -> ``session`` (cluster lock, journal,
undo). The session's teardown undoes whatever is left, waits until the cluster is as the
scenario found it, and attaches the timeline (JSON and SVG), the measurements and, when the
scenario failed, the Events and before/after snapshots.

Hooks: Gherkin tags to Allure labels; a fixture or step that finds nothing to act on skips
(:class:`~harness.scenario.errors.NotApplicable`); and the composition rule: a step that
needs what an earlier step provides (``target_fixture``), placed where nothing provided it,
is a :class:`~harness.scenario.errors.MissingStep` naming the steps that would, raised
before it waits or acts. Loaded by :mod:`harness.steps.plugin`; the steps themselves
(the ``*_steps`` modules, one per subject) hold only parsing and delegation.
"""

from __future__ import annotations

import inspect
import random
import re
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any, TypeVar

import allure
import pytest
from pytest_bdd.scenario import scenario_wrapper_template_registry
from pytest_bdd.steps import step_function_context_registry

from harness.budgets import Budgets, canonical_budget_name
from harness.checks import Prober
from harness.inventory import Inventory
from harness.journal import UndoFailed
from harness.kube.client import KubeClient
from harness.kube.ledger import Ledger
from harness.kube.observer import Observer
from harness.kube.target import client_for
from harness.kube.timeline import Timeline
from harness.report.allure_env import (
    attach_scenario_timeline,
    prepare_results,
    scenario_environment,
)
from harness.scenario import report
from harness.scenario.errors import MissingStep, NotApplicable
from harness.scenario.expectations import steady_state
from harness.scenario.expectations.apiprobe import API_PROBE, ETCD_PROBE, ApiProber
from harness.scenario.expectations.steady_state import Baseline
from harness.scenario.report import Measurements
from harness.scenario.targets.workloads import Workload, resolve_workloads
from harness.session import Session
from harness.steps.plugin import seed_of
from harness.steps.support import labels
from harness.steps.support.limits import Limit

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


# -- pytest hooks ----------------------------------------------------------------------------


# Tags to Allure labels: severity (@critical, also a marker), epic (@epic:node-failure) and
# story (@story:..., else the scenario's name); see steps/support/labels.py.


@pytest.hookimpl(tryfirst=True)  # before pytest-bdd's own, whatever order plugins load in
def pytest_bdd_apply_tag(tag: str, function: object) -> bool | None:
    return labels.pytest_bdd_apply_tag(tag, function)


pytest_bdd_before_scenario = labels.pytest_bdd_before_scenario


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the item, so fixture teardowns know if it failed."""
    rep = yield
    item.stash.setdefault(_REPORTS, {})[rep.when] = rep
    return rep


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """A fixture that finds nothing to act on skips the scenario, saying what is missing."""
    try:
        return (yield)
    except NotApplicable as exc:
        pytest.skip(str(exc))


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """A step that finds nothing to act on or to measure (no target, no lost pod, a driver
    that cannot do the failure kind) skips the scenario, saying what is missing: a skip,
    never a product failure."""
    try:
        return (yield)
    except NotApplicable as exc:
        pytest.skip(str(exc))


_STEP = pytest.StashKey[str]()
LEDGER = pytest.StashKey[Ledger]()
_STEP_PART = pytest.StashKey[tuple[str, float, float] | None]()
_FIELD = re.compile(r"\{(\w+)(?::[^}]*)?\}")


PROVIDED = pytest.StashKey[set[str]]()


def current_step(request: pytest.FixtureRequest) -> str:
    """The running step as the feature wrote it (``Then the member is ...``)."""
    step: str = request.node.stash.get(_STEP, "this step")
    return step


def _provided_by_steps() -> set[str]:
    """Every fixture some step provides (``target_fixture``)."""
    return {
        name
        for ctx in step_function_context_registry.values()
        for name in provided_by(ctx.step_func, ctx.target_fixture)
    }


@pytest.hookimpl(tryfirst=True)
def pytest_bdd_before_step(
    request: pytest.FixtureRequest, feature: object, scenario: object, step: Any, step_func: Any
) -> None:
    """Before a step runs: remember it, and check that every fixture it needs from an
    earlier step was provided. A step placed where its start cannot come (say, an eviction
    expectation with no failure before it) is a harness error naming the steps that would
    provide it, raised before anything waits or acts."""
    request.node.stash[_STEP] = f"{step.keyword} {step.name}"
    ledger = request.node.stash.get(LEDGER, None)
    if ledger is not None:
        ledger.end(request.node.stash.get(_STEP_PART, None))  # a step that raised
        request.node.stash[_STEP_PART] = ledger.begin(f"{step.keyword} {step.name}")
    provided = request.node.stash.setdefault(PROVIDED, set())
    needs = [name for name in needs_of(step_func) if name not in provided]
    if needs:
        raise _missing(request, needs[0], NEEDS.get(needs[0], f"the {needs[0]!r} of a step"))
    if "measurements" in inspect.signature(step_func).parameters:
        # the step records against its own limit: kept by name with each phase it records
        request.getfixturevalue("measurements").budget = budget_named(step_func, step.name)


def budget_named(step_func: Callable[..., Any], text: str) -> str | None:
    """The budget (field name) the sentence ``text`` of ``step_func`` names as its limit
    (``within the node-not-ready budget``: ``node_not_ready``); None for a limit in seconds,
    no limit, or a sentence of none of its parsers."""
    for ctx in step_function_context_registry.values():
        if ctx.step_func is not step_func or not ctx.parser.is_matching(text):
            continue
        args = ctx.parser.parse_arguments(text) or {}
        named = [v.budget for v in args.values() if isinstance(v, Limit) and v.budget]
        return canonical_budget_name(named[0]) if named else None
    return None


def needs_of(step_func: Callable[..., Any]) -> list[str]:
    """What a step function needs from earlier steps, in its signature's order: the
    fixtures some step provides, less the sentence's own fields (``{outage:Limit}``). The
    run's hook and the check before the run (:mod:`harness.steps.check`) both use it."""
    parsed = {
        m.group(1)
        for ctx in step_function_context_registry.values()
        if ctx.step_func is step_func
        for m in _FIELD.finditer(str(ctx.parser.name))
    }
    by_steps = _provided_by_steps()
    return [
        name
        for name in inspect.signature(step_func).parameters
        if name in by_steps and name not in parsed
    ]


@pytest.hookimpl(tryfirst=True)
def pytest_bdd_after_step(
    request: pytest.FixtureRequest,
    feature: object,
    scenario: object,
    step: Any,
    step_func: Any,
    step_func_args: object,
) -> None:
    ledger = request.node.stash.get(LEDGER, None)
    if ledger is not None:
        ledger.end(request.node.stash.get(_STEP_PART, None))
        request.node.stash[_STEP_PART] = None
    if isinstance(step_func_args, dict) and isinstance(
        step_func_args.get("measurements"), Measurements
    ):
        step_func_args["measurements"].budget = None  # what the teardown records is no step's
    provided = request.node.stash.setdefault(PROVIDED, set())
    for ctx in step_function_context_registry.values():
        if ctx.step_func is step_func:
            provided.update(provided_by(step_func, ctx.target_fixture))


#: What each provided fixture stands for, in a step-order error.
NEEDS = {
    "targets": "the nodes a Given chose",
    "outage": "a failure of the nodes (power loss, shutdown)",
    "powered_on": "the nodes' power-on",
    "resolution": "an operator action that frees the stuck pods",
    "drained": "a drain of the node",
    "restarted": "a restart of pods by selector",
    "rerun": "a re-run of a Job",
    "api_probed": "the API probes (started before the failure)",
    "chaos_run": "a chaos experiment's run",
    "longevity_run": "a longevity run",
    "tokens": "tokens written to the volumes (the data check)",
    "tokens_read_on": "the tokens read back from their volumes (the data check)",
}


F = TypeVar("F", bound=Callable[..., Any])
_ALSO = "__powercut_also_provides__"


def also_provides(*fixtures: str) -> Callable[[F], F]:
    """Mark a step that provides ``fixtures`` besides its ``target_fixture`` (it injects
    them itself): the Dell-style step provides the chosen nodes and the return too, a
    reboot the failure. Put it below the step decorators."""

    def mark(func: F) -> F:
        setattr(func, _ALSO, tuple(fixtures))
        return func

    return mark


_NAMES = "__powercut_inventory_names__"

#: What a sentence's field may name from the inventory (``the <name> SLO held throughout``):
#: the kinds :func:`inventory_names` accepts, as a reader says them.
INVENTORY_NAMES = {
    "slo": "an SLO of the inventory's `slos`",
    "rack": "a rack of the inventory",
    "nodes": "inventory node names (`w-a1`, `w-a1 and w-b1`, `w-a1, w-b1 and w-c1`)",
    "workloads": "inventory workload names (`quorum`, `quorum and singleton`)",
}


def inventory_names(**fields: str) -> Callable[[F], F]:
    """Mark a step whose fields name things of the inventory (``rack="rack"``,
    ``name="slo"``, ``names="nodes"``; kinds in :data:`INVENTORY_NAMES`): the check before
    the run refuses a name the inventory does not have, with the valid ones, before anything
    is touched. Put it below the step decorators."""
    unknown = set(fields.values()) - set(INVENTORY_NAMES)
    if unknown:
        raise ValueError(f"unknown inventory name kinds: {sorted(unknown)}")

    def mark(func: F) -> F:
        setattr(func, _NAMES, dict(fields))
        return func

    return mark


def inventory_names_of(step_func: object) -> dict[str, str]:
    """The fields of a step that name things of the inventory, and their kinds."""
    return dict(getattr(step_func, _NAMES, {}))


def provided_by(step_func: object, target_fixture: str | None) -> tuple[str, ...]:
    """Every fixture a step function provides: its ``target_fixture`` and the ones marked
    with :func:`also_provides`, once each."""
    also: tuple[str, ...] = getattr(step_func, _ALSO, ())
    first = (target_fixture,) if target_fixture else ()
    return tuple(dict.fromkeys((*first, *also)))


def providers(fixture: str) -> list[str]:
    """One sentence of every step that provides ``fixture`` (``target_fixture`` or
    :func:`also_provides`), as a feature writes it (``{limit:Limit}`` shows as
    ``<limit>``): its shortest form, the singular one (``powercut steps`` lists the
    others)."""
    order = {"given": 0, "when": 1, "then": 2}
    shortest: dict[object, tuple[int, str, str]] = {}
    for ctx in step_function_context_registry.values():
        if fixture not in provided_by(ctx.step_func, ctx.target_fixture):
            continue
        text = str(ctx.parser.name)
        entry = (order.get(ctx.type or "", 3), (ctx.type or "").capitalize(), text)
        known = shortest.get(ctx.step_func)
        if known is None or (len(text), text) < (len(known[2]), known[2]):
            shortest[ctx.step_func] = entry
    return [
        f"{kind} {_FIELD.sub(_as_placeholder, text)}" for _, kind, text in sorted(shortest.values())
    ]


def _as_placeholder(m: re.Match[str]) -> str:
    return f"<{m.group(1)}>"


def _missing(request: pytest.FixtureRequest, fixture: str, needs: str) -> MissingStep:
    step = request.node.stash.get(_STEP, "this step")
    return MissingStep(step, needs, providers(fixture))


def _failed(item: pytest.Item) -> bool:
    return any(r.failed for r in item.stash.get(_REPORTS, {}).values())


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def budgets(inventory: Inventory) -> Budgets:
    """The inventory's timing budgets (profile and overrides)."""
    return inventory.timing_budgets()


@pytest.fixture(scope="session")
def kube(inventory: Inventory) -> Iterator[KubeClient]:
    client = client_for(inventory)
    yield client
    client.close()


@pytest.fixture(scope="session")
def namespaces(inventory: Inventory) -> list[str]:
    """The namespaces of the inventory's workloads (where pods and events are watched)."""
    return sorted({w.namespace for w in inventory.workloads})


@pytest.fixture(scope="session")
def run_environment(pytestconfig: pytest.Config, kube: KubeClient, inventory: Inventory) -> None:
    """environment.properties and categories.json, once, when Allure results are written."""
    results = getattr(pytestconfig.option, "allure_report_dir", None)
    if results:
        environment = {**scenario_environment(kube, inventory), "Seed": seed_of(pytestconfig)}
        prepare_results(Path(results), environment=environment)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """The scenario's random generator: the run's seed and the scenario's name, so each
    scenario draws its own targets and ``--seed`` replays them all."""
    seed = seed_of(request.config)
    allure.dynamic.parameter("seed", seed, excluded=True)
    return random.Random(f"{seed}:{request.node.name}")


@pytest.fixture
def timeline(request: pytest.FixtureRequest) -> Timeline:
    tl = Timeline()
    request.node.stash[LEDGER] = tl.ledger  # the harness's own time, step by step
    return tl


@pytest.fixture
def observer(kube: KubeClient, namespaces: list[str], timeline: Timeline) -> Iterator[Observer]:
    with timeline.ledger.part("observer start (list and watch)"):
        obs = Observer(kube, namespaces or None, timeline=timeline).start()
    yield obs
    obs.stop()


@pytest.fixture
def workloads(kube: KubeClient, inventory: Inventory, timeline: Timeline) -> tuple[Workload, ...]:
    with timeline.ledger.part("workloads resolved"):
        return tuple(resolve_workloads(kube, inventory))


@pytest.fixture
def probers(workloads: tuple[Workload, ...], timeline: Timeline) -> Iterator[dict[str, Prober]]:
    """One health probe per workload with a health endpoint, all scenario long."""
    with timeline.ledger.part("probes started"):
        running = {
            w.probe: Prober(timeline, w.health, name=w.probe).start()
            for w in workloads
            if w.health is not None
        }
    yield running
    for p in running.values():
        p.stop()


@pytest.fixture
def api_probes(kube: KubeClient, timeline: Timeline) -> Iterator[list[ApiProber]]:
    """Probes of the API and of etcd's quorum through the cluster endpoint."""
    with timeline.ledger.part("probes started"):
        running = [ApiProber(kube, timeline, name).start() for name in (API_PROBE, ETCD_PROBE)]
    yield running
    for p in running:
        p.stop()


@pytest.fixture
def measurements(timeline: Timeline) -> Measurements:
    return Measurements(timeline=timeline)


@pytest.fixture
def baseline(
    inventory: Inventory,
    observer: Observer,
    workloads: tuple[Workload, ...],
    probers: dict[str, Prober],
    budgets: Budgets,
    run_environment: None,
) -> Baseline:
    """Wait (at most the recovery budget) until the cluster is healthy; record it as found."""
    with (
        allure.step(f"wait up to {budgets.recovery:g}s for the cluster to be healthy"),
        observer.timeline.ledger.part("steady-state check before"),
    ):
        settled = steady_state.wait_steady(
            inventory, observer, workloads, timeout_s=budgets.recovery
        )
        return Baseline(
            steady_state.nodes_found(inventory, observer),
            workloads,
            settled,
            steady_state.snapshot(observer),
            at_mono=time.monotonic(),
        )


class UndoIncomplete(Exception):
    """Some undos failed after a failed scenario: the cluster is not fully restored."""


@pytest.fixture
def session(
    request: pytest.FixtureRequest,
    inventory: Inventory,
    kube: KubeClient,
    namespaces: list[str],
    timeline: Timeline,
    observer: Observer,
    baseline: Baseline,
    budgets: Budgets,
    measurements: Measurements,
) -> Iterator[Session]:
    """The disruption session; its teardown undoes, waits for the cluster as found, reports."""
    keep = bool(request.config.getoption("--keep-on-failure"))
    with timeline.ledger.part("session start (journal, power drivers)"):
        s = Session(inventory, client=kube, timeline=timeline, keep_on_failure=keep)
        s.__enter__()
    try:
        yield s
    finally:
        failed = _failed(request.node)
        if failed:
            report.attach_failure_evidence(
                kube, namespaces, timeline, baseline.snapshot, steady_state.snapshot(observer)
            )
        ledger = timeline.ledger
        try:
            with allure.step("undo what the scenario left disrupted"), ledger.part("undo"):
                undone = s.finish(failed=failed)
                if not failed and not all(r.ok for r in undone):
                    raise UndoFailed(undone)
            if failed and not all(r.ok for r in undone):
                raise UndoIncomplete(
                    "; ".join(
                        f"undo failed: {r.description}: {r.error}" for r in undone if not r.ok
                    )
                )
            if not (failed and keep):
                with (
                    allure.step(f"wait up to {budgets.recovery:g}s for the cluster as found"),
                    ledger.part("steady-state check after"),
                ):
                    steady_state.wait_steady(
                        inventory,
                        observer,
                        baseline.workloads,
                        timeout_s=budgets.recovery,
                        found=baseline.nodes,
                        description="the cluster as the scenario found it (teardown)",
                    )
        finally:
            with ledger.part("report writing"):
                report.record_harness_time(measurements, timeline)
                report.attach_measurements(measurements)
                attach_scenario_timeline(timeline, title=_scenario_title(request.node))
            report.harness_time_written(ledger)


# -- helpers ---------------------------------------------------------------------------------


# -- helpers ---------------------------------------------------------------------------------


def _scenario_title(item: pytest.Item) -> str:
    """The scenario's name (with the outline's example), for the timeline picture."""
    func = getattr(item, "function", None)
    scenario = scenario_wrapper_template_registry.get(func) if func is not None else None
    name = scenario.name if scenario is not None else item.name
    callspec = getattr(item, "callspec", None)
    example = callspec.params.get("_pytest_bdd_example") if callspec is not None else None
    if isinstance(example, dict):
        for key, value in example.items():
            name = name.replace(f"<{key}>", str(value))
    return name
