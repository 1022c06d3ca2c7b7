"""Sign-off rules as code: the gates a run must pass, read from a sign-off file.

A sign-off file (YAML) lies beside the inventory: ``signoff.yaml`` in the inventory's
directory, or the file ``powercut run --signoff FILE`` names. Every key is optional; a
missing file means these defaults::

    gates:
      blocker_and_critical_passed: true   # every @blocker and @critical scenario passed
      no_phase_over_budget: true          # no measured phase beyond its budget
      no_slo_breached: true               # every SLO held in every scenario
      no_data_lost: true                  # every token written to a volume read back
      no_harness_error: true              # no scenario broken by the harness or a BMC
      max_skipped: null                   # at most N skipped scenarios (null: any number)
      no_regression: false                # no phase beyond its baseline (see trends)
    trends:
      runs: 10            # how many runs the report's trend charts show
      baseline_runs: 5    # a phase regresses beyond the p95 of its previous N runs' figures
      margin_percent: 20  # ... by more than this margin
      min_runs: 3         # and only once it has at least this many previous figures

:func:`evaluate` turns a run's record (:class:`harness.report.history.Run`) into
:class:`GateResult` s: whether each gate passed, in words, and the scenarios that broke it.
They go to the history line, to Allure 3's Quality Gates tab (see ``allure_generate.mjs``)
and to ``powercut run``'s exit code, which names every gate that failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.errors import ConfigError
from harness.report.history import Gate, Run, Scenario

SIGNOFF_FILE = "signoff.yaml"

BLOCKER_CRITICAL = "every blocker and critical scenario passed"
NO_OVER_BUDGET = "no phase over its budget"
NO_SLO_BREACH = "no SLO breached"
NO_DATA_LOST = "no data lost"
NO_HARNESS_ERROR = "no harness error"
MAX_SKIPPED = "at most {n} skipped"
NO_REGRESSION = "no phase regressed against its baseline"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GatesConfig(_Model):
    blocker_and_critical_passed: bool = True
    no_phase_over_budget: bool = True
    no_slo_breached: bool = True
    no_data_lost: bool = True
    no_harness_error: bool = True
    max_skipped: int | None = Field(default=None, ge=0)
    no_regression: bool = False


class TrendsConfig(_Model):
    runs: int = Field(default=10, ge=2, le=200)
    baseline_runs: int = Field(default=5, ge=1, le=200)
    margin_percent: float = Field(default=20.0, ge=0)
    min_runs: int = Field(default=3, ge=1, le=200)


class SignOff(_Model):
    gates: GatesConfig = GatesConfig()
    trends: TrendsConfig = TrendsConfig()
    #: Where it was read from ("" for the defaults).
    source: str = ""


def default_signoff_path(inventory: Path) -> Path:
    """``signoff.yaml`` beside the inventory file."""
    return Path(inventory).resolve().parent / SIGNOFF_FILE


def _valid_values(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    node: Any = model
    for part in loc[:-1]:
        field_info = node.model_fields.get(part) if isinstance(part, str) else None
        if field_info is None:
            return ""
        node = field_info.annotation
    if isinstance(node, type) and issubclass(node, BaseModel):
        return ", ".join(node.model_fields)
    return ""


def load_signoff(path: Path) -> SignOff:
    """Read and validate a sign-off file; every problem is one ConfigError naming the file,
    the field and what is valid there."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("sign-off file not found", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the sign-off file: {exc}", source=source) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ConfigError(f"{where}not valid YAML: {exc}", source=source) from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            "expected a mapping with 'gates' and/or 'trends'", source=source
        ) from None
    try:
        return SignOff.model_validate({**data, "source": source})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = list(err["loc"])
        dotted = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            valid = _valid_values(SignOff, loc)
            msg = f"unknown key; valid keys here: {valid}"
        else:
            msg = f"{err['msg']} (got {err.get('input')!r})"
        raise ConfigError(msg, source=source, field=dotted) from None


def signoff_for(inventory: Path, explicit: Path | None = None) -> SignOff:
    """The sign-off rules of a run: ``explicit`` (must exist), else ``signoff.yaml`` beside
    the inventory when there is one, else the defaults."""
    if explicit is not None:
        return load_signoff(explicit)
    beside = default_signoff_path(inventory)
    return load_signoff(beside) if beside.is_file() else SignOff()


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool
    detail: str
    #: The scenarios that broke it.
    scenarios: tuple[str, ...] = ()
    expected: str = ""
    actual: str = ""
    #: False when the run had nothing for it to judge (no data checks, no SLOs): it does not
    #: fail the run, and it reads "not judged (...)", never "passed, 0 of 0".
    judged: bool = True

    def to_gate(self) -> Gate:
        return Gate(self.name, self.passed, self.detail)

    def to_allure(self) -> dict[str, Any]:
        """What ``allure_generate.mjs`` turns into one Quality Gate rule."""
        return {
            "name": self.name,
            "passed": self.passed,
            "detail": self.detail,
            "scenarios": list(self.scenarios),
            "expected": self.expected,
            "actual": self.actual,
        }


@dataclass(frozen=True)
class Regression:
    scenario: str
    phase: str
    value_s: float
    baseline_p95_s: float
    limit_s: float
    runs: int

    def describe(self) -> str:
        return (
            f"{self.scenario}: {self.phase} {self.value_s:.1f}s > {self.limit_s:.1f}s "
            f"(p95 {self.baseline_p95_s:.1f}s of {self.runs} previous runs + margin)"
        )


def _names(scenarios: Sequence[Scenario]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s.name for s in scenarios))


def _listed(names: Sequence[str], limit: int = 3) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


@dataclass(frozen=True)
class Evaluation:
    results: tuple[GateResult, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failed(self) -> tuple[GateResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    def gates(self) -> tuple[Gate, ...]:
        return tuple(r.to_gate() for r in self.results)


def _not_judged(name: str, why: str) -> GateResult:
    return GateResult(name, True, f"not judged ({why})", (), "", "not judged", judged=False)


def evaluate(
    run: Run,
    signoff: SignOff,
    *,
    harness_errors: Sequence[str] = (),
    regressions: Sequence[Regression] = (),
) -> Evaluation:
    """The run's gates. ``harness_errors`` names the scenarios whose failure is the harness's
    or the infrastructure's (:data:`harness.report.allure_env.HARNESS_ERRORS`);
    ``regressions`` comes from :func:`harness.report.trends.regressions`."""
    g = signoff.gates
    out: list[GateResult] = []
    scenarios = run.scenarios
    if g.blocker_and_critical_passed:
        out.append(_blocker_and_critical(scenarios))
    if g.no_phase_over_budget:
        out.append(_over_budget(scenarios))
    if g.no_slo_breached:
        out.append(_slo_breached(scenarios))
    if g.no_data_lost:
        out.append(_data_lost(scenarios))
    if g.no_harness_error:
        out.append(_harness_error(harness_errors))
    if g.max_skipped is not None:
        out.append(_skipped(scenarios, g.max_skipped))
    if g.no_regression:
        out.append(_regressed(regressions))
    return Evaluation(tuple(out))


def _blocker_and_critical(scenarios: Sequence[Scenario]) -> GateResult:
    important = [s for s in scenarios if s.severity in ("blocker", "critical")]
    if not important:
        return _not_judged(BLOCKER_CRITICAL, "no blocker or critical scenarios")
    bad = [s for s in important if s.status != "passed"]
    return GateResult(
        BLOCKER_CRITICAL,
        not bad,
        f"{len(important) - len(bad)} of {len(important)} passed"
        + (f"; not passed: {_listed(_names(bad))}" if bad else ""),
        _names(bad),
        "0 not passed",
        f"{len(bad)} not passed",
    )


def _over_budget(scenarios: Sequence[Scenario]) -> GateResult:
    over = [(s, k, p) for s in scenarios for k, p in s.phases.items() if p.over_budget]
    total = sum(1 for s in scenarios for p in s.phases.values() if p.budget_s is not None)
    if not total:
        return _not_judged(NO_OVER_BUDGET, "no phases with a budget")
    worst = sorted(over, key=lambda x: -(x[2].ratio or 0))
    listed = _listed([f"{s.name}: {k} {p.value_s:.1f}s / {p.budget_s:g}s" for s, k, p in worst])
    return GateResult(
        NO_OVER_BUDGET,
        not over,
        f"{len(over)} of {total} phases with a budget over it" + (f"; {listed}" if over else ""),
        _names([s for s, _, _ in over]),
        "0 over budget",
        f"{len(over)} over budget",
    )


def _slo_breached(scenarios: Sequence[Scenario]) -> GateResult:
    breached = [(s, k) for s in scenarios for k, v in s.slos.items() if not v.ok]
    total = sum(len(s.slos) for s in scenarios)
    if not total:
        return _not_judged(NO_SLO_BREACH, "no SLO checks")
    return GateResult(
        NO_SLO_BREACH,
        not breached,
        f"{total - len(breached)} of {total} SLO checks held"
        + (f"; breached: {_listed([f'{s.name}: {k}' for s, k in breached])}" if breached else ""),
        _names([s for s, _ in breached]),
        "0 breached",
        f"{len(breached)} breached",
    )


def _data_lost(scenarios: Sequence[Scenario]) -> GateResult:
    checked = [s for s in scenarios if s.data_ok is not None]
    if not checked:
        return _not_judged(NO_DATA_LOST, "no data checks")
    lost = [s for s in checked if s.data_ok is False]
    return GateResult(
        NO_DATA_LOST,
        not lost,
        f"{len(checked) - len(lost)} of {len(checked)} data checks read their data back"
        + (f"; lost: {_listed(_names(lost))}" if lost else ""),
        _names(lost),
        "0 lost",
        f"{len(lost)} lost",
    )


def _harness_error(harness_errors: Sequence[str]) -> GateResult:
    errs = tuple(dict.fromkeys(harness_errors))
    return GateResult(
        NO_HARNESS_ERROR,
        not errs,
        f"{len(errs)} scenario(s) broken by the harness or the infrastructure"
        + (f": {_listed(errs)}" if errs else ""),
        errs,
        "0",
        str(len(errs)),
    )


def _skipped(scenarios: Sequence[Scenario], max_skipped: int) -> GateResult:
    skipped = [s for s in scenarios if s.status == "skipped"]
    return GateResult(
        MAX_SKIPPED.format(n=max_skipped),
        len(skipped) <= max_skipped,
        f"{len(skipped)} skipped" + (f": {_listed(_names(skipped))}" if skipped else ""),
        _names(skipped) if len(skipped) > max_skipped else (),
        f"<= {max_skipped}",
        str(len(skipped)),
    )


def _regressed(regressions: Sequence[Regression]) -> GateResult:
    return GateResult(
        NO_REGRESSION,
        not regressions,
        f"{len(regressions)} phase(s) beyond their baseline"
        + (f": {_listed([r.describe() for r in regressions], 2)}" if regressions else ""),
        tuple(dict.fromkeys(r.scenario for r in regressions)),
        "0 regressed",
        f"{len(regressions)} regressed",
    )
