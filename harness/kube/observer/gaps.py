"""Observation gaps: the windows in which a watch saw nothing (announced by a re-list), and
which of them a measured phase overlaps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from harness.kube.names import Change
from harness.kube.observer.vocabulary import OBSERVER
from harness.kube.timeline import Timeline


class Gap(NamedTuple):
    """A window in which a watch saw nothing and then re-listed: changes made in it that
    undid each other are not on the timeline (see the module docstring)."""

    resource: str  # nodes, pods, ...
    watcher: str  # the watcher's label (resource@namespace)
    since_mono: float  # the last event the watch delivered before it
    until_mono: float  # the re-list that ended it
    reason: str

    @property
    def seconds(self) -> float:
        return max(0.0, self.until_mono - self.since_mono)

    def overlaps(self, start: float, end: float) -> bool:
        return self.since_mono <= end and start <= self.until_mono

    def to_json(self, origin: float | None = None) -> dict[str, Any]:
        base = origin if origin is not None else 0.0
        return {
            "resource": self.resource,
            "from_s": round(self.since_mono - base, 3),
            "to_s": round(self.until_mono - base, 3),
            "seconds": round(self.seconds, 3),
            "reason": self.reason,
        }


def gaps(
    timeline: Timeline,
    *,
    resources: Iterable[str] | None = None,
    between: tuple[float, float] | None = None,
) -> list[Gap]:
    """The gaps the observers announced on ``timeline`` (every re-list after the first list),
    of ``resources`` only if given, overlapping ``between`` (monotonic) if given."""
    wanted = set(resources) if resources is not None else None
    found: list[Gap] = []
    for t in timeline.all(kind=OBSERVER):
        if t.transition != Change.RELISTED or "since_mono" not in t.detail:
            continue
        gap = Gap(
            str(t.detail.get("resource", "")),
            t.name,
            float(t.detail["since_mono"]),
            t.mono,
            str(t.detail.get("reason", "")),
        )
        if wanted is not None and gap.resource not in wanted:
            continue
        if between is not None and not gap.overlaps(*between):
            continue
        found.append(gap)
    return found
