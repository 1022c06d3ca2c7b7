"""SLOs and alerts evaluated over a window with range queries.

An SLO *held* over a window when, at every evaluation step, every series its expression
returns meets the objective (``value <comparison> threshold``), apart from breaches shorter
than its ``for``. A query that returns no series at all is an error (:class:`NoSeries`),
never a pass: an expression with a typo in a label would otherwise "hold" forever.

An alert *fired* when ``ALERTS{alertstate="firing", ...}`` has a sample in the window. An
alert given by name must be an alerting rule Prometheus knows (:class:`UnknownAlert`),
for the same reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.clock import SYSTEM_CLOCK
from harness.errors import PermanentError, PowercutError
from harness.inventory.slo import AlertSpec, SloSpec
from harness.slo.client import PrometheusClient, QueryRejected, Series

__all__ = [
    "AROUND_S",
    "CATCH_UP_S",
    "AlertResult",
    "Breach",
    "CatchUp",
    "NoSeries",
    "SloResult",
    "UnknownAlert",
    "breaches",
    "evaluate_alert",
    "evaluate_slo",
    "wait_caught_up",
    "window_verdicts",
    "worst_value",
]


class NoSeries(PermanentError):
    """The SLO's expression returned no series over the window: nothing to judge."""

    def __init__(self, slo: str, expr: str, start: float, end: float) -> None:
        self.slo = slo
        self.expr = expr
        self.start = start
        self.end = end
        super().__init__(
            f"SLO {slo}: {expr!r} returned no series over the {end - start:.0f} s window: "
            "check the metric and label names, and that Prometheus scrapes the target "
            "(an SLO with no data is never taken as held)"
        )


class UnknownAlert(PermanentError):
    """An alert named in the inventory is not an alerting rule of this Prometheus."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        names = sorted(known)
        self.known = names
        valid = ", ".join(names) if names else "(none: no alerting rules are loaded)"
        super().__init__(f"Prometheus has no alerting rule {name!r}; it has: {valid}")


class SloQueryRejected(PermanentError):
    """An SLO's expression was refused by Prometheus (its own message attached)."""

    def __init__(self, slo: str, exc: QueryRejected) -> None:
        self.slo = slo
        self.expr = exc.expr
        self.server_message = exc.server_message
        super().__init__(
            f"SLO {slo}: Prometheus rejected the expression {exc.expr!r}: {exc.server_message}"
        )


@dataclass(frozen=True, slots=True)
class Breach:
    """One stretch of a series outside its objective (unix times of its first and last
    bad points; ``worst`` the value furthest from the objective)."""

    series: str
    start: float
    end: float
    worst: float

    @property
    def duration_s(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class SloResult:
    """An SLO over a window: its series, its breaches and its worst value."""

    slo: SloSpec
    start: float
    end: float
    series: tuple[Series, ...]
    breaches: tuple[Breach, ...]
    note: str = ""  # how the window was judged, when not on its own samples

    @property
    def held(self) -> bool:
        return not self.breaches

    @property
    def worst(self) -> float | None:
        return worst_value(self.slo, (v for s in self.series for _, v in s.points))

    def message(self) -> str:
        """What happened, in one paragraph (for a failure or the report)."""
        window = f"{self.end - self.start:.0f} s"
        worst = self.worst
        worst_text = f"; worst {worst:g}" if worst is not None else ""
        note = f" ({self.note})" if self.note else ""
        if self.held:
            return (
                f"SLO {self.slo.name} held over {window} ({self.slo.objective}{worst_text}, "
                f"{len(self.series)} series){note}"
            )
        first = self.breaches[0]
        more = f" and {len(self.breaches) - 1} more" if len(self.breaches) > 1 else ""
        for_ = f" for {self.slo.for_:g} s or longer" if self.slo.for_ else ""
        return (
            f"SLO {self.slo.name} breached{for_}: {self.slo.expr} must keep "
            f"{self.slo.objective}; {first.series} was {first.worst:g} from "
            f"+{first.start - self.start:.0f} s to +{first.end - self.start:.0f} s of the "
            f"{window} window{more}{worst_text}{note}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.slo.name,
            "expr": self.slo.expr,
            "comparison": self.slo.comparison,
            "threshold": self.slo.threshold,
            "for_s": self.slo.for_,
            "start": self.start,
            "end": self.end,
            "held": self.held,
            "note": self.note,
            "worst": _json_number(self.worst),
            "breaches": [
                {"series": b.series, "start": b.start, "end": b.end, "worst": _json_number(b.worst)}
                for b in self.breaches
            ],
            "series": [
                {"labels": dict(s.labels), "points": [[t, _json_number(v)] for t, v in s.points]}
                for s in self.series
            ],
        }


def _json_number(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return str(value)  # "nan", "inf", "-inf": JSON has no spelling for them


@dataclass(frozen=True, slots=True)
class AlertResult:
    """An alert spec over a window: the alerts that fired (name, labels, first, last)."""

    alert: AlertSpec
    start: float
    end: float
    fired: tuple[tuple[str, Mapping[str, str], float, float], ...]

    @property
    def held(self) -> bool:
        return not self.fired

    def message(self) -> str:
        if self.held:
            return f"alert {self.alert.label} did not fire over {self.end - self.start:.0f} s"
        parts = []
        for name, labels, first, last in self.fired:
            extra = ",".join(
                f'{k}="{v}"' for k, v in sorted(labels.items()) if k not in ("alertname",)
            )
            parts.append(
                f"{name}{{{extra}}} from +{first - self.start:.0f} s to +{last - self.start:.0f} s"
            )
        return f"alert {self.alert.label} fired: " + "; ".join(parts)


def worst_value(slo: SloSpec, values: Iterable[float]) -> float | None:
    """The value furthest on the wrong side: the highest for ``<``/``<=``, the lowest for
    ``>``/``>=``; for ``==``/``!=`` the first that misses (None if none does). NaN counts as
    missing the objective but is never the worst when a number missed too."""
    vals = list(values)
    if not vals:
        return None
    numbers = [v for v in vals if not math.isnan(v)]
    if slo.comparison in ("<", "<="):
        return max(numbers) if numbers else math.nan
    if slo.comparison in (">", ">="):
        return min(numbers) if numbers else math.nan
    missed = [v for v in vals if not slo.holds(v)]
    return missed[0] if missed else None


def breaches(slo: SloSpec, series: Sequence[Series], step: float) -> list[Breach]:
    """The stretches where a series missed the objective, at least ``for`` long. A gap of
    more than 1.5 steps without points ends a stretch."""
    out: list[Breach] = []
    for s in series:
        run: list[tuple[float, float]] = []

        def close(run: list[tuple[float, float]], name: str) -> None:
            if not run:
                return
            first, last = run[0][0], run[-1][0]
            if slo.for_ is None or last - first >= slo.for_:
                worst = worst_value(slo, (v for _, v in run))
                out.append(Breach(name, first, last, worst if worst is not None else math.nan))

        previous: float | None = None
        for t, v in s.points:
            gap = previous is not None and t - previous > 1.5 * step
            if gap or slo.holds(v):
                close(run, s.name)
                run = []
            if not slo.holds(v):
                run.append((t, v))
            previous = t
        close(run, s.name)
    out.sort(key=lambda b: b.start)
    return out


#: How long an SLO or alert step waits, at most, for Prometheus to scrape (and evaluate its
#: rules) past the end of the window it judges.
CATCH_UP_S = 30.0
#: How far around a window too short to hold a sample its samples are looked for.
AROUND_S = 15.0


@dataclass(frozen=True)
class CatchUp:
    """How long a step waited for Prometheus, and how far it had got."""

    end: float
    waited_s: float
    scraped: float | None
    evaluated: float | None
    complete: bool

    def message(self) -> str:
        if self.complete:
            return f"Prometheus had scraped past the window's end after {self.waited_s:.1f} s"
        got = ", ".join(
            f"{what} until {t - self.end:+.1f} s of the window's end"
            for what, t in (("scraped", self.scraped), ("rules evaluated", self.evaluated))
            if t is not None
        )
        return (
            f"Prometheus had not caught up after {self.waited_s:.1f} s ({got or 'no target'}): "
            "judged on what it had"
        )


def wait_caught_up(
    client: PrometheusClient,
    end: float,
    *,
    rules: bool,
    bound_s: float = CATCH_UP_S,
    poll_s: float = 0.25,
) -> CatchUp:
    """Wait, at most ``bound_s``, until every scrape target has a sample after ``end`` (and,
    with ``rules``, every rule group was evaluated after it), so that a window judged now
    holds everything Prometheus will know of it. No target or no rule group: nothing to
    wait for."""
    started = time.monotonic()
    while True:
        scraped, evaluated = client.caught_up()
        done = (scraped is None or scraped >= end) and (
            not rules or evaluated is None or evaluated >= end
        )
        waited = time.monotonic() - started
        if done or waited >= bound_s:
            return CatchUp(end, waited, scraped, evaluated, done)
        SYSTEM_CLOCK.sleep(poll_s)


def evaluate_slo(
    client: PrometheusClient, slo: SloSpec, start: float, end: float, *, step: float | None = None
) -> SloResult:
    """The SLO over [start, end] (unix seconds). Raises :class:`NoSeries` when the
    expression returns nothing and :class:`SloQueryRejected` when Prometheus refuses it.

    A window too short to hold a sample (shorter than :data:`AROUND_S`) that returns
    nothing is judged on the samples around it (``AROUND_S`` either side, not past now),
    and the result says so (``note``)."""
    step = step or slo.step
    try:
        series = [s for s in client.query_range(slo.expr, start, end, step) if s.points]
        note = ""
        if not series and end - start < AROUND_S:
            # evaluated up to the wide end exactly (the grid runs back from it), so that a
            # sample taken just after the window counts
            wide_end = min(end + AROUND_S, time.time())
            wide_start = wide_end - step * math.ceil((wide_end - start + AROUND_S) / step)
            wide = (wide_start, wide_end)
            series = [s for s in client.query_range(slo.expr, *wide, step) if s.points]
            note = (
                f"the {end - start:.1f} s window held no sample: judged on the samples from "
                f"{start - wide[0]:.0f} s before it to {wide[1] - end:.0f} s after it"
            )
    except QueryRejected as exc:
        raise SloQueryRejected(slo.name, exc) from None
    if not series:
        raise NoSeries(slo.name, slo.expr, start, end)
    return SloResult(slo, start, end, tuple(series), tuple(breaches(slo, series, step)), note)


def evaluate_alert(
    client: PrometheusClient,
    alert: AlertSpec,
    start: float,
    end: float,
    *,
    step: float = 5.0,
    rules: Mapping[str, object] | None = None,
) -> AlertResult:
    """Whether ``alert`` fired over [start, end]. An alert given by name must be one of
    Prometheus's alerting rules (``rules``, fetched when not given)."""
    if alert.name is not None:
        known = rules if rules is not None else client.alert_rules()
        if alert.name not in known:
            raise UnknownAlert(alert.name, known)
    series = client.query_range(f"ALERTS{{{alert.selector}}}", start, end, step)
    fired = []
    for s in series:
        if not s.points:
            continue
        labels = {k: v for k, v in s.labels.items() if k not in ("__name__", "alertstate")}
        fired.append((labels.get("alertname", "?"), labels, s.points[0][0], s.points[-1][0]))
    fired.sort(key=lambda f: f[2])
    return AlertResult(alert, start, end, tuple(fired))


def window_verdicts(
    client: PrometheusClient, slos: Sequence[SloSpec], start: float, end: float
) -> dict[str, dict[str, Any]]:
    """Each SLO over [start, end] in the form a longevity cycle records: ``held``, ``worst``
    (a number, or ``"nan"``/``"inf"``), ``breaches`` (how many) and the objective; an SLO
    that could not be evaluated gets ``held: None`` and its ``error``."""
    out: dict[str, dict[str, Any]] = {}
    for slo in slos:
        entry: dict[str, Any] = {"comparison": slo.comparison, "threshold": slo.threshold}
        try:
            result = evaluate_slo(client, slo, start, end)
        except PowercutError as exc:
            entry.update(held=None, worst=None, breaches=0, error=str(exc))
        else:
            entry.update(
                held=result.held,
                worst=_json_number(result.worst),
                breaches=len(result.breaches),
            )
        out[slo.name] = entry
    return out
