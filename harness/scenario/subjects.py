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
from harness.scenario.errors import MissingStep
from harness.scenario.targets import Outage
from harness.scenario.workloads import PodInfo, Workload


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
