"""A one-screen text summary of a run, from allure-results or a JUnit XML file.

For each scenario: its verdict, how long it took, and its slowest phase against its budget
when the results carry timings as parameters (allure) or properties (JUnit, pytest's
``record_property``) named ``"<phase> (s)"`` and ``"<phase> budget (s)"``, e.g.
``"evacuation (s)" = 42.1`` and ``"evacuation budget (s)" = 90``. "Slowest" means closest to
(or furthest over) its budget; phases without a budget rank by duration after those with one.
Failed and broken scenarios also show their category (see
:mod:`harness.report.allure_env`) and the first line of their message; skipped ones why
they were skipped.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.report.allure_env import CATEGORIES, classify

VERDICT_ORDER = {"broken": 0, "failed": 1, "unknown": 2, "skipped": 3, "passed": 4}
_PHASE = re.compile(r"^(?P<phase>.+?) \(s\)$")
_BUDGET = re.compile(r"^(?P<phase>.+?) budget \(s\)$")


@dataclass(frozen=True)
class PhaseTiming:
    name: str
    seconds: float
    budget_s: float | None = None

    @property
    def ratio(self) -> float | None:
        """seconds / budget (1.0 = exactly on budget); None without a (positive) budget."""
        if self.budget_s is None or self.budget_s <= 0:
            return None
        return self.seconds / self.budget_s

    @property
    def over_budget(self) -> bool:
        return self.budget_s is not None and self.seconds > self.budget_s

    def describe(self) -> str:
        if self.budget_s is None:
            return f"{self.name} {self.seconds:.1f}s (no budget)"
        ratio = self.ratio
        pct = f" ({ratio * 100:.0f}%)" if ratio is not None else ""
        over = " OVER" if self.over_budget else ""
        return f"{self.name} {self.seconds:.1f}s / {self.budget_s:g}s{pct}{over}"


@dataclass(frozen=True)
class ScenarioResult:
    name: str
    verdict: str  # passed / failed / broken / skipped / unknown
    duration_s: float | None = None
    message: str = ""
    phases: tuple[PhaseTiming, ...] = ()
    retries: int = 0

    @property
    def category(self) -> str | None:
        return classify(self.verdict, self.message)

    @property
    def slowest_phase(self) -> PhaseTiming | None:
        """The phase closest to or furthest over its budget (else the longest)."""
        if not self.phases:
            return None
        return max(
            self.phases,
            key=lambda p: (p.ratio is not None, p.ratio or 0.0, p.seconds, p.name),
        )


@dataclass(frozen=True)
class RunSummary:
    source: str
    scenarios: tuple[ScenarioResult, ...] = field(default_factory=tuple)

    def count(self, verdict: str) -> int:
        return sum(1 for s in self.scenarios if s.verdict == verdict)

    @property
    def verdict(self) -> str:
        """``passed`` (nothing failed, something passed), ``failed``, or ``no results``."""
        if not self.scenarios:
            return "no results"
        if any(s.verdict in ("failed", "broken", "unknown") for s in self.scenarios):
            return "failed"
        return "passed" if self.count("passed") else "no results"

    @property
    def ok(self) -> bool:
        return self.verdict == "passed"


# -- reading -------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1].strip()
    try:
        return float(text)
    except ValueError:
        return None


def phases_from(params: Iterable[tuple[str, Any]]) -> tuple[PhaseTiming, ...]:
    """Phases from ``(name, value)`` pairs named ``"<phase> (s)"``/``"<phase> budget (s)"``."""
    seconds: dict[str, float] = {}
    budgets: dict[str, float] = {}
    for name, value in params:
        num = _number(value)
        if num is None:
            continue
        if m := _BUDGET.match(name):
            budgets.setdefault(m["phase"], num)
        elif m := _PHASE.match(name):
            seconds.setdefault(m["phase"], num)
    return tuple(PhaseTiming(ph, s, budgets.get(ph)) for ph, s in seconds.items())


def _allure_params(result: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Test-level parameters first, then those of steps (depth-first)."""
    out: list[tuple[str, Any]] = []

    def take(node: Mapping[str, Any]) -> None:
        for p in node.get("parameters") or ():
            if isinstance(p, Mapping) and isinstance(p.get("name"), str):
                out.append((p["name"], p.get("value")))

    take(result)
    stack = list(reversed(result.get("steps") or []))
    while stack:
        step = stack.pop()
        if isinstance(step, Mapping):
            take(step)
            stack.extend(reversed(step.get("steps") or []))
    return out


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def load_allure_results(results_dir: Path) -> RunSummary:
    """Scenarios from ``*-result.json`` files; of retried tests the last attempt counts."""
    latest: dict[str, tuple[int, Mapping[str, Any]]] = {}
    attempts: dict[str, int] = {}
    for path in sorted(results_dir.glob("*-result.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable Allure result: {exc}") from None
        if not isinstance(data, Mapping):
            continue
        key = str(data.get("historyId") or data.get("uuid") or path.name)
        raw_stop = data.get("stop")
        stop = raw_stop if isinstance(raw_stop, int) else 0
        attempts[key] = attempts.get(key, 0) + 1
        if key not in latest or stop >= latest[key][0]:
            latest[key] = (stop, data)
    scenarios = []
    for key, (_, data) in latest.items():
        t0, t1 = data.get("start"), data.get("stop")
        duration = (t1 - t0) / 1000.0 if isinstance(t0, int) and isinstance(t1, int) else None
        details = data.get("statusDetails") or {}
        message = str(details.get("message") or "") if isinstance(details, Mapping) else ""
        scenarios.append(
            ScenarioResult(
                name=str(data.get("name") or data.get("fullName") or key),
                verdict=str(data.get("status") or "unknown"),
                duration_s=duration,
                message=message.strip(),
                phases=phases_from(_allure_params(data)),
                retries=attempts[key] - 1,
            )
        )
    return RunSummary(f"allure-results {results_dir}", tuple(scenarios))


def load_junit(path: Path) -> RunSummary:
    """Scenarios from a JUnit XML file (pytest ``--junitxml``)."""
    # The file is written by our own pytest run; Python's expat refuses entity expansion
    # bombs (expat >= 2.4), so the stdlib parser is adequate here.
    root = ET.parse(path).getroot()  # noqa: S314
    scenarios = []
    for case in root.iter("testcase"):
        verdict, message = "passed", ""
        for tag, name in (("error", "broken"), ("failure", "failed"), ("skipped", "skipped")):
            el = case.find(tag)
            if el is not None:
                verdict = name
                message = el.get("message") or (el.text or "")
                break
        props = [
            (p.get("name") or "", p.get("value")) for p in case.iterfind("properties/property")
        ]
        classname = case.get("classname") or ""
        name = case.get("name") or ""
        try:
            duration: float | None = float(case.get("time") or "")
        except ValueError:
            duration = None
        scenarios.append(
            ScenarioResult(
                name=f"{classname}::{name}" if classname else name,
                verdict=verdict,
                duration_s=duration,
                message=message.strip(),
                phases=phases_from(props),
            )
        )
    return RunSummary(f"junit {path}", tuple(scenarios))


def load(path: Path) -> RunSummary:
    """allure-results (a directory) or a JUnit XML file."""
    path = Path(path)
    if path.is_dir():
        return load_allure_results(path)
    if path.is_file() and path.suffix.lower() == ".xml":
        return load_junit(path)
    raise ValueError(f"{path}: expected an allure-results directory or a JUnit .xml file")


# -- formatting ----------------------------------------------------------------------------


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 3)] + "..."


def format_summary(summary: RunSummary, *, width: int = 100, max_rows: int = 20) -> str:
    """A few dozen lines at most: headline, one row per scenario, messages of failures."""
    counts = ", ".join(
        f"{summary.count(v)} {v}"
        for v in ("passed", "failed", "broken", "skipped", "unknown")
        if summary.count(v)
    )
    n = len(summary.scenarios)
    lines = [
        _clip(
            f"powercut: {summary.verdict.upper()}  {n} scenario{'s' if n != 1 else ''}"
            + (f": {counts}" if counts else ""),
            width,
        ),
        _clip(f"  from {summary.source}", width),
    ]
    cats: dict[str, int] = {}
    for s in summary.scenarios:
        if s.category:
            cats[s.category] = cats.get(s.category, 0) + 1
    if cats:
        known = list(dict.fromkeys(c.name for c in CATEGORIES))
        names = [n for n in known if n in cats] + sorted(n for n in cats if n not in known)
        lines.append(_clip("  " + ", ".join(f"{cats[n]} {n.lower()}" for n in names), width))
    if not summary.scenarios:
        return "\n".join(lines) + "\n"
    ordered = sorted(summary.scenarios, key=lambda s: (VERDICT_ORDER.get(s.verdict, 2), s.name))
    name_w = max(20, min(44, max(len(s.name) for s in ordered)))
    lines.append("")
    lines.append(
        _clip(
            f"  {'verdict':<8} {'scenario':<{name_w}} {'time':>8}  slowest phase vs budget", width
        )
    )
    for s in ordered[:max_rows]:
        took = f"{s.duration_s:.1f}s" if s.duration_s is not None else "-"
        slowest = s.slowest_phase
        phase = slowest.describe() if slowest else "-"
        retried = f" [{s.retries} retr{'y' if s.retries == 1 else 'ies'}]" if s.retries else ""
        row = f"  {s.verdict.upper():<8} {_clip(s.name, name_w):<{name_w}} {took:>8}  {phase}"
        lines.append(_clip(row + retried, width))
        if s.verdict in ("failed", "broken") and s.message:
            cat = f"{s.category}: " if s.category else ""
            lines.append(_clip(f"           {cat}{_first_line(s.message)}", width))
        elif s.verdict == "skipped" and s.message:  # why: nothing in the cluster fitted it
            lines.append(_clip(f"           {_first_line(s.message)}", width))
    if len(ordered) > max_rows:
        lines.append(f"  ... and {len(ordered) - max_rows} more")
    return "\n".join(lines) + "\n"


def summarize(path: Path, *, width: int = 100, max_rows: int = 20) -> str:
    """:func:`load` then :func:`format_summary`."""
    return format_summary(load(path), width=width, max_rows=max_rows)
