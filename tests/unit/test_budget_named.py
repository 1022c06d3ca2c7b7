"""A phase keeps the name of the budget it was measured against (issue #34): the step's
sentence names it (``within the node-not-ready budget``), the step hooks hand it to the
scenario's :class:`~harness.scenario.report.Measurements`, each phase recorded against a
budget keeps it as ``"budget"``, and the model's bound is looked up by that name
(:func:`harness.model.judge.judge`) rather than guessed from the phase's last words."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_bdd.steps import step_function_context_registry

import harness.steps.plugin  # noqa: F401 - registers every step module
from harness.model import ClusterModel
from harness.model.bounds import Bound
from harness.model.judge import budget_of_item, judge
from harness.scenario.report import Measurements
from harness.steps import fixtures


def _step_func(sentence_start: str) -> Any:
    [func] = {
        c.step_func
        for c in step_function_context_registry.values()
        if str(c.parser.name).startswith(sentence_start)
    }
    return func


NOT_READY = "the node is NotReady within"


def test_the_budget_a_sentence_names_is_its_field_name() -> None:
    func = _step_func(NOT_READY)
    named = fixtures.budget_named(
        func, "the node is NotReady within the control-plane-node-not-ready budget"
    )
    assert named == "control_plane_node_not_ready"
    assert fixtures.budget_named(func, "the node is NotReady within 90 seconds") is None
    assert fixtures.budget_named(func, "a sentence of another step") is None


def test_a_phase_recorded_against_a_budget_keeps_its_name_and_others_do_not() -> None:
    ms = Measurements(budget="pod_eviction")
    ms.record("w1 pods Terminating", 12.0, 25.0, started_mono=1.0)
    ms.record("harness time", 0.4, None, started_mono=None)  # against no budget
    ms.record("w1 Ready", 3.0, 30.0, started_mono=2.0, budget="node_ready_after_power_on")
    ms.note("lab/web fewest Ready", 2)
    ms.budget = None  # a limit in seconds
    ms.record("w1 NotReady", 9.0, 60.0, started_mono=3.0)
    named = [item.get("budget") for item in ms.items]
    assert named == ["pod_eviction", None, "node_ready_after_power_on", None, None]


class _Node:
    def __init__(self) -> None:
        self.stash = pytest.Stash()
        self.stash[fixtures.PROVIDED] = {"outage"}


class _Request:
    def __init__(self, ms: Measurements) -> None:
        self.node, self.ms = _Node(), ms

    def getfixturevalue(self, name: str) -> object:
        assert name == "measurements", name
        return self.ms


class _Step:
    keyword = "Then"

    def __init__(self, name: str) -> None:
        self.name = name


def test_the_step_hooks_set_the_running_steps_budget_and_clear_it_after() -> None:
    ms = Measurements()
    request = _Request(ms)
    func = _step_func(NOT_READY)
    step = _Step("every lost node is NotReady within the node-not-ready budget")
    fixtures.pytest_bdd_before_step(request, None, None, step, func)  # type: ignore[arg-type]
    assert ms.budget == "node_not_ready"
    fixtures.pytest_bdd_after_step(request, None, None, step, func, {"measurements": ms})  # type: ignore[arg-type]
    assert ms.budget is None
    literal = _Step("every lost node is NotReady within 75 seconds")
    fixtures.pytest_bdd_before_step(request, None, None, literal, func)
    assert ms.budget is None


def _bound(name: str, high: float) -> Bound:
    return Bound(name, 0.0, high, "a-setting", "read from the test", "why")


def test_the_model_bound_is_found_by_the_name_not_by_the_phases_words() -> None:
    model = ClusterModel(
        version="1.36",
        settings={},
        workloads=[],
        bounds={
            "node_not_ready": _bound("node_not_ready", 22.0),
            "control_plane_node_not_ready": _bound("control_plane_node_not_ready", 32.0),
            "volume_detach": _bound("volume_detach", 422.0),
            "volume_detach_out_of_service": _bound("volume_detach_out_of_service", 22.0),
        },
        # the two NotReady budgets with one figure: words and figure cannot tell them apart
        budgets={"node_not_ready": 30.0, "control_plane_node_not_ready": 30.0},
    )
    item: dict[str, Any] = {"phase": "w1 NotReady", "seconds": 25.0, "budget_s": 30.0}
    guessed = judge(model, item)
    assert guessed is not None and guessed.bound is not None
    assert guessed.bound.budget == "node_not_ready" and guessed.deviation
    named = judge(model, {**item, "budget": "control_plane_node_not_ready"})
    assert named is not None and named.bound is not None
    assert named.bound.budget == "control_plane_node_not_ready" and not named.deviation
    released = {"phase": "lab-vol-1 released by w1", "seconds": 30.0, "budget_s": 30.0}
    assert budget_of_item(released) == "volume_detach"  # the words say the forced detach
    oos = judge(model, {**released, "budget": "volume_detach_out_of_service"})
    assert oos is not None and oos.bound is not None and oos.deviation
    assert oos.bound.budget == "volume_detach_out_of_service"
    # a bound never judges a phase of another kind: a taint's removal measured within the
    # taint-applied budget is no NoExecute taint of the node lifecycle controller
    model_taint = ClusterModel(
        version="1.36", settings={}, workloads=[],
        bounds={"taint_applied": _bound("taint_applied", 3.0)},
    )  # fmt: skip
    removed = {"phase": "w1 out-of-service taint removed", "seconds": 5.0, "budget_s": 25.0}
    judged = judge(model_taint, {**removed, "budget": "taint_applied"})
    assert judged is not None and judged.bound is None and not judged.deviation
    # a NotReady measured within a budget of another phase is still Kubernetes' NotReady
    odd = judge(model, {"phase": "w1 NotReady", "seconds": 25.0, "budget": "recovery"})
    assert odd is not None and odd.bound is not None and odd.bound.budget == "node_not_ready"
