"""The results history of a target cluster: one JSON line per run (schema_version 1).

A results store is a directory per target cluster::

    STORE/<target>/history.jsonl          one JSON object per run, appended at each run's end
    STORE/<target>/runs/<run_id>/         that run's report (index.html), allure-results/, ...
    STORE/<target>/allure-history.jsonl   Allure 3's historyPath for that target

One history line::

    {"schema_version": 1, "run_id": "20261126T154300Z-<6 hex>", "target": "<name>",
     "started": "<ISO8601 UTC>", "finished": "<ISO8601 UTC>", "powercut_version": "...",
     "inventory": "<path or name>", "seed": N, "verdict": "passed|failed|broken",
     "gates": [{"name": "...", "passed": true, "detail": "..."}],
     "scenarios": [{"name": "...", "feature": "...", "epic": "...", "severity": "...",
        "status": "passed|failed|broken|skipped", "duration_s": 12.3,
        "phases": {"<phase>": {"value_s": 1.2, "budget_s": 30.0, "complete": true,
                               "gap": false}},
        "slos": {"<slo name>": {"ok": true, "worst": 0.99}}, "data_ok": true}],
     "exit_code": 0, "restores_owed": 0}

``exit_code`` (``powercut run``'s exit status: 4 is "restore failed", never "a gate failed")
and ``restores_owed`` (disruptions still in place at the end) are optional: older lines lack
them.

Readers ignore keys they do not know (a later writer may add some); a line of a newer
``schema_version`` is skipped (and counted), a line that is not a JSON object of this shape
is an error naming the file and line. Appends are one ``write`` of one line under an
exclusive ``flock``, so two writers never interleave a line; a torn last line (a writer
killed mid-write) is reported as such, never silently dropped.

:func:`from_allure_results` builds a run's record from its allure-results directory: the
scenarios (the last attempt of a retried one), their epic, feature and severity labels,
their phases from the ``measurements.json`` attachment (else from the ``"<phase> (s)"``
parameters), their SLOs from the ``slo-<name>.json`` attachments, and whether their data
came back (a phase ``data read back``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import math
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

SCHEMA_VERSION = 1
HISTORY_FILE = "history.jsonl"
RUNS_DIR = "runs"
ALLURE_HISTORY_FILE = "allure-history.jsonl"
STATUSES = ("passed", "failed", "broken", "skipped")
VERDICTS = ("passed", "failed", "broken")
#: The phase whose measurement says a scenario's data came back
# (harness.scenario.expectations.data).
DATA_PHASE = "data read back"

_RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")
#: A target's name is one path component: letters, digits, ``.``, ``_``, ``-``.
_TARGET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class HistoryError(ConfigError):
    """A history file or line that is not schema_version 1 (file, line and what is wrong)."""


# -- the record ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    value_s: float
    budget_s: float | None = None
    complete: bool = True
    gap: bool = False

    @property
    def ratio(self) -> float | None:
        """value / budget (1.0: exactly on budget); None without a positive budget."""
        if self.budget_s is None or self.budget_s <= 0:
            return None
        return self.value_s / self.budget_s

    @property
    def over_budget(self) -> bool:
        return self.budget_s is not None and self.value_s > self.budget_s

    def to_json(self) -> dict[str, Any]:
        return {
            "value_s": self.value_s,
            "budget_s": self.budget_s,
            "complete": self.complete,
            "gap": self.gap,
        }


@dataclass(frozen=True)
class Slo:
    ok: bool
    worst: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "worst": self.worst}


@dataclass(frozen=True)
class Gate:
    name: str
    passed: bool
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass(frozen=True)
class Scenario:
    name: str
    status: str
    feature: str = ""
    epic: str = ""
    severity: str = ""
    duration_s: float | None = None
    phases: Mapping[str, Phase] = field(default_factory=dict)
    slos: Mapping[str, Slo] = field(default_factory=dict)
    #: None: the scenario checked no data.
    data_ok: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "feature": self.feature,
            "epic": self.epic,
            "severity": self.severity,
            "status": self.status,
            "duration_s": self.duration_s,
            "phases": {k: p.to_json() for k, p in self.phases.items()},
            "slos": {k: s.to_json() for k, s in self.slos.items()},
            "data_ok": self.data_ok,
        }


@dataclass(frozen=True)
class Run:
    run_id: str
    target: str
    started: str
    finished: str
    verdict: str
    powercut_version: str = ""
    inventory: str = ""
    seed: int | None = None
    gates: tuple[Gate, ...] = ()
    scenarios: tuple[Scenario, ...] = ()
    #: ``powercut run``'s exit status (4: restore failed), None where not recorded.
    exit_code: int | None = None
    #: Disruptions still in place when the run ended (its journal's owed undos).
    restores_owed: int | None = None

    def to_json(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.exit_code is not None:
            extra["exit_code"] = self.exit_code
        if self.restores_owed is not None:
            extra["restores_owed"] = self.restores_owed
        return {**self._core_json(), **extra}

    def _core_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "target": self.target,
            "started": self.started,
            "finished": self.finished,
            "powercut_version": self.powercut_version,
            "inventory": self.inventory,
            "seed": self.seed,
            "verdict": self.verdict,
            "gates": [g.to_json() for g in self.gates],
            "scenarios": [s.to_json() for s in self.scenarios],
        }

    def to_line(self) -> str:
        """One line of JSON (no NaN or infinity: those are not JSON) and a newline."""
        return json.dumps(self.to_json(), separators=(",", ":"), allow_nan=False) + "\n"

    def scenario(self, name: str) -> Scenario | None:
        return next((s for s in self.scenarios if s.name == name), None)


def verdict_of(scenarios: Iterable[Scenario], gates: Iterable[Gate] = ()) -> str:
    """``broken`` if any scenario broke (or there is none: nothing ran), else ``failed`` if
    any failed or a gate did not pass, else ``passed``."""
    statuses = [s.status for s in scenarios]
    if "broken" in statuses or not statuses:
        return "broken"
    if "failed" in statuses or any(not g.passed for g in gates):
        return "failed"
    return "passed"


# -- names and paths -----------------------------------------------------------------------


def new_run_id(now: dt.datetime | None = None) -> str:
    """``20261126T154300Z-1a2b3c``: the UTC start time (sorts in time order) and 6 random
    hex digits (two runs started in the same second differ)."""
    when = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return f"{when:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def utc_iso(when: dt.datetime | None = None) -> str:
    """ISO 8601 in UTC with a ``Z``, to the second: ``2026-11-26T15:43:00Z``."""
    moment = (when or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def check_target(name: str, *, field: str = "--target", source: str = "") -> str:
    """A target's name as a directory name, or a ConfigError saying what is allowed."""
    if not _TARGET.match(name or ""):
        raise ConfigError(
            f"target {name!r} is not a usable name: 1-63 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
            source=source,
            field=field,
        )
    return name


@dataclass(frozen=True)
class TargetStore:
    """The paths of one target in a results store."""

    root: Path
    target: str

    @property
    def dir(self) -> Path:
        return self.root / self.target

    @property
    def history(self) -> Path:
        return self.dir / HISTORY_FILE

    @property
    def allure_history(self) -> Path:
        return self.dir / ALLURE_HISTORY_FILE

    def run_dir(self, run_id: str) -> Path:
        if not _RUN_ID.match(run_id):
            raise ValueError(f"not a run id (YYYYMMDDTHHMMSSZ-xxxxxx): {run_id!r}")
        return self.dir / RUNS_DIR / run_id


def target_store(root: Path, target: str) -> TargetStore:
    return TargetStore(Path(root), check_target(target))


# -- reading -------------------------------------------------------------------------------


def _where(path: Path | str, line: int) -> str:
    return f"{path}:{line}"


def _num(value: Any, what: str, where: str, *, optional: bool = True) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise HistoryError(f"{where}: {what} must be a number, got {value!r}")
    return float(value)


def _obj(value: Any, what: str, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise HistoryError(f"{where}: {what} must be a JSON object, got {type(value).__name__}")
    return value


def _str(value: Any, what: str, where: str, *, allowed: Sequence[str] = ()) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise HistoryError(f"{where}: {what} must be a string, got {value!r}")
    if allowed and value not in allowed:
        raise HistoryError(f"{where}: {what} is {value!r}; valid: {', '.join(allowed)}")
    return value


def _bool(value: Any, what: str, where: str, default: bool | None) -> bool | None:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise HistoryError(f"{where}: {what} must be true or false, got {value!r}")
    return value


def scenario_from_json(doc: Any, where: str) -> Scenario:
    d = _obj(doc, "a scenario", where)
    name = _str(d.get("name"), "scenarios[].name", where)
    at = f"{where}: scenario {name!r}"
    phases: dict[str, Phase] = {}
    for key, p in _obj(d.get("phases") or {}, "phases", at).items():
        pd = _obj(p, f"phase {key!r}", at)
        value = _num(pd.get("value_s"), f"phase {key!r} value_s", at, optional=False)
        assert value is not None
        phases[key] = Phase(
            value_s=value,
            budget_s=_num(pd.get("budget_s"), f"phase {key!r} budget_s", at),
            complete=bool(_bool(pd.get("complete"), f"phase {key!r} complete", at, True)),
            gap=bool(_bool(pd.get("gap"), f"phase {key!r} gap", at, False)),
        )
    slos: dict[str, Slo] = {}
    for key, s in _obj(d.get("slos") or {}, "slos", at).items():
        sd = _obj(s, f"slo {key!r}", at)
        ok = _bool(sd.get("ok"), f"slo {key!r} ok", at, None)
        if ok is None:
            raise HistoryError(f"{at}: slo {key!r} has no 'ok' (true or false)")
        slos[key] = Slo(ok=ok, worst=_num(sd.get("worst"), f"slo {key!r} worst", at))
    return Scenario(
        name=name,
        status=_str(d.get("status"), "status", at, allowed=STATUSES),
        feature=_str(d.get("feature"), "feature", at),
        epic=_str(d.get("epic"), "epic", at),
        severity=_str(d.get("severity"), "severity", at),
        duration_s=_num(d.get("duration_s"), "duration_s", at),
        phases=phases,
        slos=slos,
        data_ok=_bool(d.get("data_ok"), "data_ok", at, None),
    )


def _opt_int(value: Any, name: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise HistoryError(f"{where}: {name} must be an integer or null, got {value!r}")
    return value


def run_from_json(doc: Any, where: str = "<history line>") -> Run:
    """A :class:`Run` from one parsed history line (schema_version 1; unknown keys ignored)."""
    d = _obj(doc, "a history line", where)
    if d.get("schema_version") != SCHEMA_VERSION:
        raise HistoryError(
            f"{where}: schema_version is {d.get('schema_version')!r}; this powercut reads "
            f"{SCHEMA_VERSION}"
        )
    run_id = _str(d.get("run_id"), "run_id", where)
    if not run_id:
        raise HistoryError(f"{where}: run_id is missing")
    seed = d.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise HistoryError(f"{where}: seed must be an integer or null, got {seed!r}")
    gates_raw = d.get("gates") or []
    scen_raw = d.get("scenarios") or []
    if not isinstance(gates_raw, list) or not isinstance(scen_raw, list):
        raise HistoryError(f"{where}: gates and scenarios must be JSON lists")
    gates = []
    for g in gates_raw:
        gd = _obj(g, "a gate", where)
        passed = _bool(gd.get("passed"), "gates[].passed", where, None)
        if passed is None:
            raise HistoryError(f"{where}: gate {gd.get('name')!r} has no 'passed'")
        gates.append(
            Gate(
                _str(gd.get("name"), "gates[].name", where),
                passed,
                _str(gd.get("detail"), "gates[].detail", where),
            )
        )
    return Run(
        run_id=run_id,
        target=_str(d.get("target"), "target", where),
        started=_str(d.get("started"), "started", where),
        finished=_str(d.get("finished"), "finished", where),
        verdict=_str(d.get("verdict"), "verdict", where, allowed=VERDICTS),
        powercut_version=_str(d.get("powercut_version"), "powercut_version", where),
        inventory=_str(d.get("inventory"), "inventory", where),
        seed=seed,
        gates=tuple(gates),
        scenarios=tuple(scenario_from_json(s, where) for s in scen_raw),
        exit_code=_opt_int(d.get("exit_code"), "exit_code", where),
        restores_owed=_opt_int(d.get("restores_owed"), "restores_owed", where),
    )


@dataclass(frozen=True)
class History:
    """The runs of one history file, oldest first, and how many lines were skipped."""

    path: Path
    runs: tuple[Run, ...]
    newer_schema: int = 0

    def before(self, run_id: str) -> tuple[Run, ...]:
        """The runs before ``run_id`` (all of them when it is not in the history)."""
        ids = [r.run_id for r in self.runs]
        return self.runs[: ids.index(run_id)] if run_id in ids else self.runs

    def find(self, run_id: str) -> Run | None:
        """The run ``run_id``, or the only one whose id starts with it."""
        exact = [r for r in self.runs if r.run_id == run_id]
        if exact:
            return exact[-1]
        prefix = [r for r in self.runs if r.run_id.startswith(run_id)]
        return prefix[0] if len(prefix) == 1 else None


def read_history(path: Path) -> History:
    """Every run of a history file; an empty history when the file does not exist.

    Raises:
        HistoryError: a line that is not JSON or not schema_version 1's shape (file:line).
    """
    path = Path(path)
    runs: list[Run] = []
    newer = 0
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return History(path, ())
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = _where(path, number)
        try:
            doc = json.loads(line)
        except ValueError as exc:
            torn = number == len(lines) and not text.endswith("\n")
            why = "a torn last line (a writer stopped mid-line?)" if torn else "not JSON"
            raise HistoryError(f"{where}: {why}: {exc}") from None
        version = doc.get("schema_version") if isinstance(doc, Mapping) else None
        if isinstance(version, int) and not isinstance(version, bool) and version > 1:
            newer += 1
            continue
        runs.append(run_from_json(doc, where))
    return History(path, tuple(runs), newer)


# -- writing -------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked_append(path: Path) -> Iterator[int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def append_run(path: Path, run: Run) -> None:
    """Append ``run`` as one line to the history file (created with its directory)."""
    data = run.to_line().encode("utf-8")
    with _locked_append(Path(path)) as fd:
        # A previous writer killed mid-line left no newline: start on a line of our own,
        # so that only the torn line is unreadable, not ours too.
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)


def _pruned_ids(lines: list[str], keep_runs: int, keep_days: float, now: dt.datetime) -> set[str]:
    """The run ids that retention removes: beyond the newest ``keep_runs``, or started more
    than ``keep_days`` before ``now``; never the newest run, never a line that cannot be read
    (it stays, to be seen)."""
    runs: list[tuple[str, float | None]] = []
    for line in lines:
        try:
            doc = json.loads(line)
            run_id = str(doc["run_id"])
        except (ValueError, KeyError, TypeError):
            continue
        try:
            when = dt.datetime.fromisoformat(str(doc.get("started")).replace("Z", "+00:00"))
            runs.append((run_id, when.timestamp()))
        except ValueError:
            runs.append((run_id, None))
    runs.sort(reverse=True)
    cutoff = now.timestamp() - keep_days * 86400
    out: set[str] = set()
    for n, (run_id, started_s) in enumerate(runs):
        if n == 0:
            continue
        if (keep_runs > 0 and n >= keep_runs) or (
            keep_days > 0 and started_s is not None and started_s < cutoff
        ):
            out.add(run_id)
    return out


def prune(
    store: TargetStore,
    *,
    keep_runs: int = 0,
    keep_days: float = 0,
    now: dt.datetime | None = None,
) -> list[str]:
    """Apply a target's retention: remove the runs :func:`_pruned_ids` picks from its history
    (rewritten whole, then renamed over the old file, under the append lock: only the
    target's own runner writes it) and their run directories. Returns the ids removed."""
    if (keep_runs <= 0 and keep_days <= 0) or not store.history.is_file():
        return []
    with _locked_append(store.history):
        lines = [ln for ln in store.history.read_text("utf-8").splitlines() if ln.strip()]
        gone = _pruned_ids(lines, keep_runs, keep_days, now or dt.datetime.now(dt.UTC))
        if not gone:
            return []
        kept = [ln for ln in lines if _line_run_id(ln) not in gone]
        tmp = store.history.with_name(store.history.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("".join(f"{ln}\n" for ln in kept))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, store.history)
    for run_id in sorted(gone):
        with contextlib.suppress(ValueError):
            shutil.rmtree(store.run_dir(run_id), ignore_errors=True)
    return sorted(gone)


def _line_run_id(line: str) -> str | None:
    try:
        return str(json.loads(line)["run_id"])
    except (ValueError, KeyError, TypeError):
        return None


# -- from allure-results -------------------------------------------------------------------

_PHASE_PARAM = re.compile(r"^(?P<phase>.+?) \(s\)$")
_BUDGET_PARAM = re.compile(r"^(?P<phase>.+?) budget \(s\)$")
_GAP_PARAM = re.compile(r"^(?P<phase>.+?) observation gap \(s\)$")


def _label(result: Mapping[str, Any], name: str) -> str:
    for lab in result.get("labels") or ():
        if isinstance(lab, Mapping) and lab.get("name") == name:
            return str(lab.get("value") or "")
    return ""


def _attachments(result: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    stack: list[Mapping[str, Any]] = [result]
    while stack:
        node = stack.pop()
        for a in node.get("attachments") or ():
            if isinstance(a, Mapping):
                yield a
        stack.extend(s for s in reversed(node.get("steps") or []) if isinstance(s, Mapping))


def _params(result: Mapping[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    stack: list[Mapping[str, Any]] = [result]
    while stack:
        node = stack.pop()
        for p in node.get("parameters") or ():
            if isinstance(p, Mapping) and isinstance(p.get("name"), str):
                out.append((p["name"], p.get("value")))
        stack.extend(s for s in reversed(node.get("steps") or []) if isinstance(s, Mapping))
    return out


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    text = str(value).strip().strip("'\"")
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def phases_of(result: Mapping[str, Any], results_dir: Path) -> dict[str, Phase]:
    """A result's phases: from its ``measurements.json`` attachment (with gaps), else from
    its ``"<phase> (s)"`` / ``"<phase> budget (s)"`` parameters."""
    phases: dict[str, Phase] = {}
    for a in _attachments(result):
        if a.get("name") != "measurements.json" or not a.get("source"):
            continue
        items = _read_json(results_dir / str(a["source"]))
        if not isinstance(items, list):
            continue
        for item in items:
            if not isinstance(item, Mapping) or "seconds" not in item:
                continue  # a note (a count), not a duration
            seconds = _float(item.get("seconds"))
            if seconds is None:
                continue
            detail = item.get("detail") if isinstance(item.get("detail"), Mapping) else {}
            assert isinstance(detail, Mapping)
            complete = item.get("complete", detail.get("complete"))
            phases.setdefault(
                str(item.get("phase")),
                Phase(
                    value_s=seconds,
                    budget_s=_float(item.get("budget_s")),
                    complete=complete is not False,
                    gap=bool(detail.get("gaps")),
                ),
            )
    if phases:
        return phases
    values: dict[str, float] = {}
    budgets: dict[str, float] = {}
    gapped: set[str] = set()
    for name, value in _params(result):
        num = _float(value)
        if num is None:
            continue
        if m := _GAP_PARAM.match(name):
            gapped.add(m["phase"])
        elif m := _BUDGET_PARAM.match(name):
            budgets.setdefault(m["phase"], num)
        elif m := _PHASE_PARAM.match(name):
            values.setdefault(m["phase"], num)
    return {
        k: Phase(value_s=v, budget_s=budgets.get(k), gap=k in gapped) for k, v in values.items()
    }


def slos_of(result: Mapping[str, Any], results_dir: Path) -> dict[str, Slo]:
    """A result's SLO verdicts, from its ``slo-<name>.json`` attachments."""
    slos: dict[str, Slo] = {}
    for a in _attachments(result):
        name = str(a.get("name") or "")
        if not (name.startswith("slo-") and name.endswith(".json")) or not a.get("source"):
            continue
        doc = _read_json(results_dir / str(a["source"]))
        if not isinstance(doc, Mapping) or not isinstance(doc.get("held"), bool):
            continue
        slos[str(doc.get("name") or name[4:-5])] = Slo(
            ok=doc["held"], worst=_float(doc.get("worst"))
        )
    return slos


def _data_ok(phases: Mapping[str, Phase], status: str) -> bool | None:
    data = phases.get(DATA_PHASE)
    if data is None:
        return None
    return data.complete and not data.over_budget and status != "broken"


def scenarios_from_allure_results(results_dir: Path) -> tuple[Scenario, ...]:
    """The scenarios of an allure-results directory; of a retried one, the last attempt."""
    results_dir = Path(results_dir)
    latest: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for path in sorted(results_dir.glob("*-result.json")):
        data = _read_json(path)
        if not isinstance(data, Mapping):
            raise HistoryError(f"{path}: not a readable Allure result")
        key = str(data.get("historyId") or data.get("uuid") or path.name)
        stop = data.get("stop") if isinstance(data.get("stop"), int) else 0
        assert isinstance(stop, int)
        if key not in latest or stop >= latest[key][0]:
            latest[key] = (stop, data)
    out = []
    for _, data in sorted(latest.values(), key=lambda kv: (kv[1].get("start") or 0, kv[0])):
        t0, t1 = data.get("start"), data.get("stop")
        duration = (t1 - t0) / 1000.0 if isinstance(t0, int) and isinstance(t1, int) else None
        status = str(data.get("status") or "broken")
        if status not in STATUSES:
            status = "broken"  # Allure's "unknown": the result never finished
        phases = phases_of(data, results_dir)
        out.append(
            Scenario(
                name=str(data.get("name") or data.get("fullName") or "?"),
                status=status,
                feature=_label(data, "feature"),
                epic=_label(data, "epic"),
                severity=_label(data, "severity") or "normal",
                duration_s=round(duration, 3) if duration is not None else None,
                phases=phases,
                slos=slos_of(data, results_dir),
                data_ok=_data_ok(phases, status),
            )
        )
    return tuple(out)


def seed_of_results(results_dir: Path) -> int | None:
    """The run's seed: the ``Seed`` of environment.properties, else a result's ``seed``."""
    from harness.report.allure_env import ENVIRONMENT_FILE, read_environment

    env = read_environment(Path(results_dir) / ENVIRONMENT_FILE)
    raw: Any = env.get("Seed")
    if raw is None:
        for path in sorted(Path(results_dir).glob("*-result.json")):
            data = _read_json(path)
            if isinstance(data, Mapping):
                raw = dict(_params(data)).get("seed")
                if raw is not None:
                    break
    number = _float(raw) if raw is not None else None
    return int(number) if number is not None and number.is_integer() else None


def from_allure_results(
    results_dir: Path,
    *,
    run_id: str,
    target: str,
    started: str,
    finished: str,
    powercut_version: str,
    inventory: str,
    seed: int | None = None,
    gates: Sequence[Gate] = (),
    verdict: str | None = None,
) -> Run:
    """The history record of a run from its allure-results directory. ``verdict`` defaults
    to :func:`verdict_of` the scenarios and gates."""
    scenarios = scenarios_from_allure_results(results_dir)
    return Run(
        run_id=run_id,
        target=target,
        started=started,
        finished=finished,
        verdict=verdict or verdict_of(scenarios, gates),
        powercut_version=powercut_version,
        inventory=inventory,
        seed=seed if seed is not None else seed_of_results(results_dir),
        gates=tuple(gates),
        scenarios=scenarios,
    )
