"""What a scenario puts into the Allure report besides its Gherkin steps.

* :class:`Measurements`: every measured phase as an Allure parameter next to its budget
  (``"w-b3 NotReady (s)" = 8.4`` and ``"w-b3 NotReady budget (s)" = 20``, the convention
  :mod:`harness.report.summary` reads), excluded from Allure's history id so that runs of
  the same scenario stay one test in the history. Each phase recorded against a budget
  the step named keeps its name (``"budget": "node_not_ready"``), by which the model's bound
  is found (:mod:`harness.model.judge`). A phase whose window overlaps a gap the
  observer announced (a watch refused with 410 Gone by every API server it tried, which
  re-listed: changes in it may be missing)
  carries the gaps in its detail and an ``"<phase> observation gap (s)"`` parameter.
* :func:`attach_failure_evidence`: the Events of the watched namespaces and the before /
  after snapshots, when a scenario failed.

The timeline's attachment and the run's environment are the report's side
(:func:`harness.report.allure_env.attach_scenario_timeline`,
:func:`harness.report.allure_env.scenario_environment`): the report reads a scenario's
results, the scenario never imports the report.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import allure

from harness.checks import Measurement
from harness.errors import PowercutError
from harness.kube.client import KubeClient
from harness.kube.ledger import Ledger
from harness.kube.observer import gaps
from harness.kube.timeline import Timeline
from harness.scenario.targets.choice import Targets


def _round(x: float) -> float:
    return round(x, 3)


def shown(t: Targets) -> Targets:
    """``t``, its nodes and why shown as the result's parameters (left out of the history
    id: the nodes chosen may differ from run to run)."""
    allure.dynamic.parameter("nodes", ", ".join(t.nodes), excluded=True)
    allure.dynamic.parameter("why these nodes", t.why, excluded=True)
    return t


@contextlib.contextmanager
def waiting(what: str, seconds: float) -> Iterator[None]:
    """The Allure step a wait shows as: "wait up to <seconds>s: ``what``"."""
    with allure.step(f"wait up to {seconds:g}s: {what}"):
        yield


@dataclass
class Measurements:
    """The phases one scenario measured, in order."""

    items: list[dict[str, Any]] = field(default_factory=list)
    #: The scenario's timeline, where the observer announces its gaps.
    timeline: Timeline | None = None
    #: The budget the running step names (``within the node-not-ready budget``), as its
    #: field name in :class:`harness.budgets.Budgets`; set before each step and cleared after
    #: it by the step hooks (:mod:`harness.steps.fixtures`). Kept with every phase recorded
    #: against a budget, so that the budget and Kubernetes' model that judge the phase are
    #: found by that name (:func:`harness.model.judge.judge`). None: a limit in seconds.
    budget: str | None = None

    def record(
        self,
        phase: str,
        seconds: float,
        budget_s: float | None,
        detail: Mapping[str, Any] | None = None,
        *,
        started_mono: float | None,
        complete: bool = True,
        budget: str | None = None,
    ) -> None:
        """Add one phase and show it (and its budget) as Allure parameters, with the
        observation gaps its window (``started_mono`` on, for ``seconds``) overlaps.
        ``started_mono`` is required: None only for what has no window on the timeline
        (a skew between acknowledgements, a wait before the scenario). ``complete`` False:
        the phase's end was not seen (``seconds`` is a lower bound). ``budget``: the name of
        the budget ``budget_s`` comes from (default: the one the running step names,
        :attr:`budget`); kept as the item's ``"budget"`` when ``budget_s`` is given."""
        allure.dynamic.parameter(f"{phase} (s)", _round(seconds), excluded=True)
        if budget_s is not None:
            allure.dynamic.parameter(f"{phase} budget (s)", _round(budget_s), excluded=True)
        item: dict[str, Any] = {
            "phase": phase,
            "seconds": _round(seconds),
            "budget_s": budget_s,
            "within_budget": budget_s is None or seconds <= budget_s,
            "detail": dict(detail or {}),
            "complete": complete,
        }
        named = budget or self.budget
        if budget_s is not None and named is not None:
            item["budget"] = named
        if started_mono is not None:
            item["started_mono"] = started_mono
        self.items.append(item)
        if self._mark_gaps(item):
            total = sum(g["seconds"] for g in item["detail"]["gaps"])
            allure.dynamic.parameter(f"{phase} observation gap (s)", _round(total), excluded=True)

    def mark_gaps(self) -> int:
        """Mark the phases whose window overlaps a gap announced after they were
        recorded (in the JSON detail); returns how many phases overlap a gap."""
        return sum(self._mark_gaps(item) for item in self.items)

    def _mark_gaps(self, item: dict[str, Any]) -> bool:
        start = item.get("started_mono")
        if self.timeline is None or start is None:
            return False
        found = gaps(self.timeline, between=(start, start + item["seconds"]))
        if found:
            origin = self.timeline.start_mono
            item["detail"]["gaps"] = [g.to_json(origin) for g in found]
        return bool(found)

    def note(self, name: str, value: object) -> None:
        """A value that is not a duration (a count, the fewest Ready pods), as a parameter."""
        allure.dynamic.parameter(name, value, excluded=True)
        self.items.append({"phase": name, "value": value})

    def check(self, phase: str, m: Measurement, *, budget: str | None = None) -> Measurement:
        """Record a check's measurement under ``phase`` (``budget``: as for :meth:`record`)."""
        self.record(
            phase,
            m.duration_s,
            m.budget_s,
            m.detail,
            started_mono=m.started_mono,
            complete=m.complete,
            budget=budget,
        )
        return m

    def to_json(self) -> str:
        return json.dumps(self.items, indent=2, default=str)


def _json(doc: object) -> str:
    return json.dumps(doc, indent=2, default=str)


#: The harness's own time per scenario that the built-in features aim at (issue #26); shown
#: beside the measurement, not a budget that fails a scenario.
HARNESS_TIME_TARGET_S = 1.0


def record_harness_time(measurements: Measurements, timeline: Timeline) -> None:
    """The scenario's time not spent waiting for Kubernetes, a BMC or a hold, as the
    measurement "harness time" (its detail: the waits and the parts, slowest first), and on
    the timeline as the action ``harness time``."""
    summary = timeline.ledger.summary()
    detail = {**summary, "target_s": HARNESS_TIME_TARGET_S}
    # the harness's own time, not an observation of the cluster: no window to flag
    measurements.record("harness time", summary["harness_s"], None, detail, started_mono=None)
    for part, seconds in list(summary["parts_s"].items())[:5]:
        allure.dynamic.parameter(f"harness time: {part} (s)", seconds, excluded=True)
    timeline.action("harness", "harness time", **summary)


def harness_time_written(ledger: Ledger) -> None:
    """After the report is written: its own time, which the measurement could not hold."""
    parts = ledger.parts()
    if "report writing" in parts:
        allure.dynamic.parameter(
            "harness time: report writing (s)", round(parts["report writing"], 3), excluded=True
        )


def attach_measurements(measurements: Measurements) -> None:
    measurements.mark_gaps()
    if measurements.items:
        allure.attach(
            measurements.to_json(),
            name="measurements.json",
            attachment_type=allure.attachment_type.JSON,
        )


def namespace_events(client: KubeClient, namespaces: Sequence[str], since_wall: float) -> list[Any]:
    """Events of the namespaces (and cluster-scoped ones about nodes) since a wall time,
    as ``[time, namespace, kind/name, reason, message]``, oldest first."""
    rows: list[tuple[float, list[Any]]] = []
    for path in [f"/api/v1/namespaces/{ns}/events" for ns in namespaces] + [
        "/api/v1/namespaces/default/events"
    ]:
        items, _ = client.list(path)
        for e in items:
            stamp = (
                e.get("lastTimestamp")
                or e.get("eventTime")
                or (e.get("metadata") or {}).get("creationTimestamp")
            )
            try:
                when = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
            except ValueError:
                when = 0.0
            if when + 1 < since_wall:
                continue
            inv = e.get("involvedObject") or {}
            rows.append(
                (
                    when,
                    [
                        stamp,
                        inv.get("namespace") or "",
                        f"{inv.get('kind')}/{inv.get('name')}",
                        e.get("reason"),
                        e.get("message"),
                    ],
                )
            )
    return [row for _, row in sorted(rows, key=lambda r: r[0])]


def attach_failure_evidence(
    client: KubeClient,
    namespaces: Sequence[str],
    timeline: Timeline,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
) -> None:
    """Attach Events since the scenario started and the before / after snapshots."""
    try:
        events: object = namespace_events(client, namespaces, timeline.start_wall)
    except PowercutError as exc:  # evidence is best effort: say why it is missing
        events = {"error": f"could not list events: {type(exc).__name__}: {exc}"}
    allure.attach(_json(events), name="events.json", attachment_type=allure.attachment_type.JSON)
    allure.attach(
        _json(before), name="snapshot-before.json", attachment_type=allure.attachment_type.JSON
    )
    allure.attach(
        _json(after), name="snapshot-after.json", attachment_type=allure.attachment_type.JSON
    )
