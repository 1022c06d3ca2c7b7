"""Subject steps follow any target (issue 24, item 1).

"the member", "the singleton" and the other subject phrases resolve from the lost pods,
whatever step chose the nodes: for every subject step of the grammar after every target
step of the grammar,

- one such pod among the lost ones: the step is about that one (the chosen one, when the
  target step chose a pod of that kind);
- several: a harness error (never a product failure) naming the plural form of the step,
  which is itself a sentence of the grammar;
- none: a harness error naming the Givens that would provide one, each a sentence of the
  grammar.

No cluster: the step functions are called with the lost pods a target step of each kind
leaves, and stopped (by a spy on the resolution) before they wait.
"""

from __future__ import annotations

import inspect
import re
from types import SimpleNamespace
from typing import Any

import pytest
from pytest_bdd.steps import StepFunctionContext, step_function_context_registry

from harness.budgets import PROFILES
from harness.errors import PowercutError
from harness.kube.timeline import ACTION, FakeClock, Timeline
from harness.scenario.errors import MissingStep, NothingToMeasure
from harness.scenario.report import Measurements
from harness.scenario.targets import subjects
from harness.scenario.targets.choice import Outage, PoweredOn, Targets
from harness.scenario.targets.workloads import PodInfo, Workload
from harness.steps import fixtures
from harness.steps.check import check_step
from harness.steps.support.limits import SUBJECT_TYPES, Subject

MEMBER, SINGLETON = subjects.SubjectKind.MEMBER, subjects.SubjectKind.SINGLETON

#: What each target step leaves as the scenario's chosen pod: the kind it chose a pod for
#: (its pod is then "the member" / "the singleton" even when others were lost), "other" (it
#: chose a pod no subject phrase names), or None (it chose nodes, no pod). A new target
#: step must say which.
TARGET_STEPS: dict[str, subjects.SubjectKind | str | None] = {
    "worker_with_statefulset_member": MEMBER,
    "worker_with_singleton": SINGLETON,
    "worker_with_pdb_pods": "other",
    "worker_with_daemonset_pod": "other",
    "worker_with_pod_of": "other",
    "control_plane_node": None,
    "busiest_rack": None,
    "third_of_workers": None,
    "some_workers": None,
    "some_control_planes": None,
    "some_nodes_of_rack": None,
    "some_labelled_nodes": None,
    "named_nodes": None,
    "fail_nodes": None,
}

WORKLOADS = (
    Workload("lab", "StatefulSet", "quorum", 3, {}, True, True, 2, None),
    Workload("lab", "Deployment", "singleton", 1, {}, True, True, 0, None),
    Workload("lab", "Deployment", "web", 3, {}, False, True, 1, None),
)


def _pod(name: str, node: str, workload: str, pvs: tuple[str, ...] = ()) -> PodInfo:
    return PodInfo("lab", name, f"uid-{name}", node, workload, pvs)


MEMBERS = [_pod(f"quorum-{i}", f"w{i}", "StatefulSet/quorum", (f"pv-q{i}",)) for i in range(2)]
SINGLE = _pod("singleton-abc", "w0", "Deployment/singleton", ("pv-s",))
OTHER_SINGLE = _pod("singleton-def", "w1", "Deployment/singleton", ("pv-s2",))
WEB = _pod("web-1", "w0", "Deployment/web")


def _target_contexts() -> list[StepFunctionContext]:
    return [
        c
        for c in step_function_context_registry.values()
        if c.step_func.__module__.startswith("harness.steps")
        and "targets" in fixtures.provided_by(c.step_func, c.target_fixture)
    ]


def _subject_sentences() -> list[tuple[StepFunctionContext, str, subjects.SubjectKind]]:
    """(step, sentence, kind) of every singular subject form of the grammar."""
    out = []
    field = re.compile(r"\{(\w+):(Pods_?|Volumes|One)\}")
    for ctx in step_function_context_registry.values():
        if not ctx.step_func.__module__.startswith("harness.steps"):
            continue
        text = re.sub(r"\{\w+:Limit\}", "5 seconds", str(ctx.parser.name))
        m = field.search(text)
        if m is not None:
            for word, which in SUBJECT_TYPES[m.group(2)].words.items():
                if which is not Subject.LOST:
                    out.append((ctx, text.replace(m.group(0), word), which.kind))
        elif re.search(r"\bthe member\b", text):
            out.append((ctx, text, MEMBER))
    return sorted(out, key=lambda t: t[1])


SUBJECT_STEPS = _subject_sentences()


def _ids(item: Any) -> str:
    return str(item[1]) if isinstance(item, tuple) else str(item)


def test_every_target_step_of_the_grammar_is_listed_here() -> None:
    names = {c.step_func.__name__ for c in _target_contexts()}
    assert names == set(TARGET_STEPS), "say what each target step chooses"


def test_the_subject_steps_are_found() -> None:
    names = {c.step_func.__name__ for c, _, _ in SUBJECT_STEPS}
    assert {
        "subject_terminating",
        "lost_pods_rescheduled",
        "replacements_ready",
        "lost_volumes_multi_attach",
        "node_releases_volumes",
        "lost_volumes_reattached",
        "member_stays_terminating",
        "no_second_member",
        "member_recreated",
    } <= names


class _Resolved(Exception):
    def __init__(self, pod: PodInfo) -> None:
        self.pod = pod


def _scenario(target: str, lost: tuple[PodInfo, ...]) -> tuple[Outage, PoweredOn, Timeline]:
    """The outage a target step of ``target``'s kind leaves when ``lost`` were lost."""
    chooses = TARGET_STEPS[target]
    chosen: tuple[PodInfo, ...] = ()
    if chooses is MEMBER:
        chosen = (MEMBERS[0],)
    elif chooses is SINGLETON:
        chosen = (SINGLE,)
    elif chooses == "other":
        chosen = (WEB,)
    pods = tuple(dict.fromkeys((*chosen, *lost)))
    nodes = tuple(sorted({p.node for p in pods} or {"w0"}))
    tl = Timeline(FakeClock(start=1000.0))
    sent = tl.record(ACTION, nodes[0], "power-off sent", mono=1000.0)
    acks = {n: tl.record(ACTION, n, "power-off acknowledged", mono=1000.5) for n in nodes}
    targets = Targets(nodes, pods, subjects=chosen, racks=dict.fromkeys(nodes, "a"))
    outage = Outage(targets, pods, sent, acks, "", False, 0.0)
    on = tl.record(ACTION, nodes[0], "power-on sent", mono=1001.0)
    return outage, PoweredOn(nodes, dict.fromkeys(nodes, on), dict.fromkeys(nodes, on), ()), tl


def _call(
    ctx: StepFunctionContext, text: str, outage: Outage, powered_on: PoweredOn, tl: Timeline
) -> None:
    node = SimpleNamespace(stash=pytest.Stash())
    request = SimpleNamespace(node=node)
    node.stash[fixtures._STEP] = f"Then {text}"
    available: dict[str, Any] = {
        "request": request,
        "outage": outage,
        "powered_on": powered_on,
        "workloads": WORKLOADS,
        "timeline": tl,
        "budgets": PROFILES["fast"],
        "measurements": Measurements(),
        "baseline": SimpleNamespace(workloads=WORKLOADS),
        **(ctx.parser.parse_arguments(text) or {}),
    }
    params = inspect.signature(ctx.step_func).parameters
    ctx.step_func(**{p: available[p] for p in params})


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stop each step as soon as its subject is resolved, with the pod it resolved to."""
    real = subjects.resolve

    def resolve(*args: Any, **kwargs: Any) -> PodInfo:
        raise _Resolved(real(*args, **kwargs))

    monkeypatch.setattr(subjects, "resolve", resolve)


def _lost_kinds(kind: subjects.SubjectKind, n: int) -> tuple[PodInfo, ...]:
    of_kind = MEMBERS if kind is MEMBER else [SINGLE, OTHER_SINGLE]
    return (WEB, *of_kind[:n])


@pytest.mark.usefixtures("spy")
@pytest.mark.parametrize("target", sorted(TARGET_STEPS))
@pytest.mark.parametrize("step", SUBJECT_STEPS, ids=_ids)
def test_one_such_lost_pod_is_the_subject_whatever_chose_the_nodes(
    step: tuple[StepFunctionContext, str, subjects.SubjectKind], target: str
) -> None:
    ctx, text, kind = step
    outage, on, tl = _scenario(target, _lost_kinds(kind, 1))
    with pytest.raises(_Resolved) as got:
        _call(ctx, text, outage, on, tl)
    expected = MEMBERS[0] if kind is MEMBER else SINGLE
    assert got.value.pod == expected


@pytest.mark.usefixtures("spy")
@pytest.mark.parametrize("target", sorted(TARGET_STEPS))
@pytest.mark.parametrize("step", SUBJECT_STEPS, ids=_ids)
def test_several_are_a_harness_error_naming_the_plural_form(
    step: tuple[StepFunctionContext, str, subjects.SubjectKind], target: str
) -> None:
    ctx, text, kind = step
    outage, on, tl = _scenario(target, _lost_kinds(kind, 2))
    if TARGET_STEPS[target] is kind:
        # the target step chose one of them: that one is the subject
        with pytest.raises(_Resolved) as got:
            _call(ctx, text, outage, on, tl)
        assert got.value.pod == outage.targets.subjects[0]
        return
    with pytest.raises(subjects.AmbiguousSubject) as err:
        _call(ctx, text, outage, on, tl)
    assert isinstance(err.value, PowercutError) and not isinstance(err.value, NothingToMeasure)
    plural = err.value.plural
    assert plural.startswith("Then ") and plural in str(err.value)
    assert check_step("then", plural[5:].replace("<limit>", "5 seconds")) is None, plural
    assert f"'Then {text}'" in str(err.value)


@pytest.mark.usefixtures("spy")
@pytest.mark.parametrize("target", sorted(TARGET_STEPS))
@pytest.mark.parametrize("step", SUBJECT_STEPS, ids=_ids)
def test_none_is_a_harness_error_naming_the_givens_that_provide_one(
    step: tuple[StepFunctionContext, str, subjects.SubjectKind], target: str
) -> None:
    ctx, text, kind = step
    if TARGET_STEPS[target] is kind:
        pytest.skip("this target step provides the subject itself")
    outage, on, tl = _scenario(target, (WEB,))
    with pytest.raises(MissingStep) as err:
        _call(ctx, text, outage, on, tl)
    assert f"'Then {text}'" in str(err.value)
    assert err.value.steps
    for given in err.value.steps:
        keyword, sentence = given.split(" ", 1)
        assert keyword == "Given" and check_step("given", sentence) is None, given
        assert given in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        "every lost member stays Terminating for 5 seconds",
        "no second copy of any lost member was started",
        "every lost member is re-created and Ready within 5 seconds",
    ],
)
def test_the_member_plurals_take_every_lost_member_and_skip_when_there_is_none(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    [ctx] = [
        c
        for c in step_function_context_registry.values()
        if c.type == "then" and c.parser.is_matching(text)
    ]
    seen: list[tuple[PodInfo, ...]] = []
    real = subjects.members

    def members(outage: Outage, workloads: Any) -> Any:
        found = real(outage, workloads)
        seen.append(tuple(found))
        raise _Resolved(found[0])

    monkeypatch.setattr(subjects, "members", members)
    outage, on, tl = _scenario("busiest_rack", _lost_kinds(MEMBER, 2))
    with pytest.raises(_Resolved):
        _call(ctx, text, outage, on, tl)
    assert seen[-1] == tuple(MEMBERS)
    outage, on, tl = _scenario("busiest_rack", (WEB,))
    with pytest.raises(NothingToMeasure, match="no StatefulSet member"):
        _call(ctx, text, outage, on, tl)
