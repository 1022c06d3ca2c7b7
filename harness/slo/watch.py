"""The stop-condition watcher: a thread that evaluates the inventory's ``stop_conditions``
every ``interval_s`` while a scenario runs and, on the first breach, asks to stop.

An SLO condition breaches when its objective was missed over its last ``for`` (or at its
last evaluation step, without ``for``), judged by the same code as the steps
(:func:`harness.slo.evaluate.breaches`); an alert condition when Prometheus reports the
alert firing. The watcher calls ``on_breach(condition, detail)`` once and stops; the
session it belongs to aborts the scenario and undoes its disruptions.

A watcher that cannot read Prometheus (unreachable, a query that returns nothing) does not
stop the scenario: it says so once, through ``say``, and keeps trying. A stop condition
naming an alert Prometheus has no rule for is refused when the watcher starts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.errors import PowercutError
from harness.inventory.slo import (
    AlertSpec,
    PrometheusSpec,
    SloSpec,
    StopConditionSpec,
    alert_by_label,
    slo_by_name,
)
from harness.slo.client import PrometheusClient, Series
from harness.slo.evaluate import UnknownAlert, breaches

__all__ = ["Condition", "StopWatcher", "watcher_for"]

log = logging.getLogger(__name__)
OnBreach = Callable[[str, str], None]
Say = Callable[[str], None]


@dataclass(frozen=True)
class Condition:
    """One stop condition, resolved: an SLO or an alert spec."""

    label: str  # "SLO api-available", "alert LabAPIQuorumLost"
    slo: SloSpec | None = None
    alert: AlertSpec | None = None


def resolve(
    conditions: Sequence[StopConditionSpec],
    slos: Sequence[SloSpec],
    alerts: Sequence[AlertSpec],
) -> list[Condition]:
    out = []
    for c in conditions:
        if c.slo is not None:
            out.append(Condition(c.label, slo=slo_by_name(slos, c.slo)))
        else:
            out.append(Condition(c.label, alert=alert_by_label(alerts, str(c.alert))))
    return out


class StopWatcher:
    """Evaluates ``conditions`` against Prometheus every ``interval_s`` in a daemon thread."""

    def __init__(
        self,
        client: PrometheusClient,
        conditions: Sequence[Condition],
        on_breach: OnBreach,
        *,
        interval_s: float = 1.0,
        say: Say | None = None,
        owns_client: bool = False,
    ) -> None:
        self.client = client
        self.conditions = list(conditions)
        self.on_breach = on_breach
        self.interval_s = interval_s
        self.say = say or (lambda msg: log.warning("%s", msg))
        self._owns_client = owns_client
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.breached: tuple[str, str] | None = None
        self.evaluations = 0
        self.problem: str | None = None  # the last reason a condition could not be read

    def check_rules(self) -> None:
        """Refuse a condition naming an alert Prometheus has no rule for."""
        named = [c.alert.name for c in self.conditions if c.alert and c.alert.name]
        if named:
            rules = self.client.alert_rules()
            for name in named:
                if name not in rules:
                    raise UnknownAlert(name, rules)

    def start(self) -> StopWatcher:
        self.check_rules()
        self._thread = threading.Thread(target=self._loop, name="stop conditions", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; returns once the thread has ended (no breach is reported after)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> StopWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- evaluation ------------------------------------------------------------------------

    def check_once(self, now: float | None = None) -> tuple[str, str] | None:
        """Evaluate every condition once; the first breach as (condition, detail)."""
        now = time.time() if now is None else now
        for cond in self.conditions:
            try:
                detail = self._breach(cond, now)
            except PowercutError as exc:
                self._problem(f"stop condition {cond.label} not evaluated: {exc}")
                continue
            if detail is not None:
                return cond.label, detail
        self.evaluations += 1
        return None

    def _breach(self, cond: Condition, now: float) -> str | None:
        if cond.slo is not None:
            slo = cond.slo
            span = (slo.for_ or 0.0) + slo.step
            series: list[Series] = [
                s for s in self.client.query_range(slo.expr, now - span, now, slo.step) if s.points
            ]
            if not series:
                raise PowercutError(f"{slo.expr!r} returned no series")
            found = [b for b in breaches(slo, series, slo.step) if b.end >= now - slo.step * 1.5]
            if not found:
                return None
            b = found[0]
            lasting = f" for {b.duration_s:.0f} s" if slo.for_ else ""
            return f"{slo.expr} = {b.worst:g} on {b.series}{lasting}; objective {slo.objective}"
        assert cond.alert is not None
        firing = self.client.query(f"ALERTS{{{cond.alert.selector}}}", at=now)
        if not firing:
            return None
        names = sorted({s.labels.get("alertname", "?") for s in firing})
        return f"alert firing: {', '.join(names)}"

    def _problem(self, text: str) -> None:
        if text != self.problem:
            self.say(text)
        self.problem = text

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            found = self.check_once()
            if found is not None and not self._stop.is_set():
                self.breached = found
                self.on_breach(*found)
                return
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))


def watcher_for(
    prometheus: PrometheusSpec,
    conditions: Sequence[StopConditionSpec],
    slos: Sequence[SloSpec],
    alerts: Sequence[AlertSpec],
    on_breach: OnBreach,
    *,
    interval_s: float = 1.0,
    say: Say | None = None,
) -> StopWatcher:
    """A watcher of ``conditions`` with a client of its own (closed when it stops)."""
    client = PrometheusClient(prometheus)
    return StopWatcher(
        client,
        resolve(conditions, slos, alerts),
        on_breach,
        interval_s=interval_s,
        say=say,
        owns_client=True,
    )
