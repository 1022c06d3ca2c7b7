"""The pod a subject phrase ("the member", "the singleton") stands for, whatever chose the
nodes.

A Given that chooses a node *for* a pod ("a worker node running a StatefulSet member with a
ReadWriteOnce volume") names that pod; any other target (a rack, a count of workers, nodes by
name or label, the Dell-style step) names none, and the phrase is resolved from the pods
the failure took: exactly one such pod is that one; several are a harness error that points
to the plural form of the step; none is a harness error naming the Givens that would
provide one. Neither is ever a product failure.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import PermanentError
from harness.scenario.errors import MissingStep, NothingToMeasure
from harness.scenario.targets.choice import Outage
from harness.scenario.targets.workloads import PodInfo, Workload


class SubjectKind(enum.Enum):
    """What a subject phrase is about."""

    MEMBER = "member"
    SINGLETON = "singleton"


@dataclass(frozen=True)
class _About:
    phrase: str
    what: str  # "a StatefulSet member"
    providers: tuple[str, ...]


ABOUT: dict[SubjectKind, _About] = {
    SubjectKind.MEMBER: _About(
        "the member",
        "a StatefulSet member",
        ("Given a worker node running a StatefulSet member with a ReadWriteOnce volume",),
    ),
    SubjectKind.SINGLETON: _About(
        "the singleton",
        "the pod of a one-replica Deployment (a singleton)",
        ("Given a worker node running a singleton Deployment pod with a ReadWriteOnce volume",),
    ),
}


class AmbiguousSubject(PermanentError):
    """A singular subject phrase, and the lost nodes ran several such pods."""

    def __init__(self, step: str, kind: SubjectKind, pods: Sequence[PodInfo], plural: str):
        self.step = step
        self.kind = kind
        self.pods = tuple(pods)
        self.plural = plural
        about = ABOUT[kind]
        super().__init__(
            f"'{step}': {about.phrase} means one pod, but the lost nodes ran "
            f"{len(pods)} ({about.what}): {', '.join(p.ref for p in pods)}; write the "
            f'plural form, "{plural}", or choose the nodes with "{about.providers[0]}"'
        )


def is_kind(pod: PodInfo, kind: SubjectKind, workloads: Sequence[Workload]) -> bool:
    """Whether ``pod`` is what ``kind`` is about."""
    if kind is SubjectKind.MEMBER:
        return pod.kind == "StatefulSet"
    singles = {(w.namespace, w.key) for w in workloads if w.kind == "Deployment" and w.desired == 1}
    return (pod.namespace, pod.workload) in singles


def candidates(
    outage: Outage, kind: SubjectKind, workloads: Sequence[Workload]
) -> tuple[PodInfo, ...]:
    """The lost pods ``kind`` may stand for: the one the target step chose, if it chose one
    of that kind; else every lost pod of that kind."""
    chosen = tuple(p for p in outage.subjects if is_kind(p, kind, workloads))
    if chosen:
        return chosen
    return tuple(p for p in outage.lost if is_kind(p, kind, workloads))


def resolve(
    outage: Outage,
    kind: SubjectKind,
    workloads: Sequence[Workload],
    *,
    step: str,
    plural: str,
) -> PodInfo:
    """The one pod ``kind`` stands for in this scenario (see the module's docstring)."""
    found = candidates(outage, kind, workloads)
    if len(found) == 1:
        return found[0]
    if found:
        raise AmbiguousSubject(step, kind, found, plural)
    about = ABOUT[kind]
    raise MissingStep(
        step,
        f"{about.phrase}: {about.what} on the lost nodes ({', '.join(outage.nodes)} ran none)",
        about.providers,
    )


def replaced_elsewhere(outage: Outage, *, stateless_only: bool = False) -> tuple[PodInfo, ...]:
    """The lost pods whose controllers replace them elsewhere (DaemonSet pods apart); with
    ``stateless_only``, those without a ReadWriteOnce volume."""
    pods = [p for p in outage.lost if p.replaced_elsewhere]
    return tuple(p for p in pods if p.stateless) if stateless_only else tuple(pods)


def about(
    outage: Outage,
    kind: SubjectKind | None,
    workloads: Sequence[Workload],
    *,
    step: str,
    plural: str,
) -> tuple[PodInfo, ...]:
    """The lost pods a step is about: every one its controller replaces elsewhere (``kind``
    None), or the one ``kind`` stands for (:func:`resolve`)."""
    if kind is None:
        return replaced_elsewhere(outage)
    return (resolve(outage, kind, workloads, step=step, plural=plural),)


def members(outage: Outage, workloads: Sequence[Workload]) -> tuple[PodInfo, ...]:
    """Every lost StatefulSet member (the chosen one first, if the target step chose one);
    none is nothing to judge (a skip naming the lost nodes)."""
    found = candidates(outage, SubjectKind.MEMBER, workloads)
    if not found:
        raise NothingToMeasure(
            f"no StatefulSet member ran on the lost nodes ({', '.join(outage.nodes)})"
        )
    return found


def member_or_members(
    outage: Outage, workloads: Sequence[Workload], *, every: bool, step: str, plural: str
) -> tuple[PodInfo, ...]:
    """``every``: every lost member (:func:`members`); else the one "the member" stands for
    (several: a harness error naming ``plural``)."""
    if every:
        return members(outage, workloads)
    return (resolve(outage, SubjectKind.MEMBER, workloads, step=step, plural=plural),)
