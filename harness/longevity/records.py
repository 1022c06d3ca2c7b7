"""What a longevity run writes down: phase budgets, one record per cycle, the JSONL file.

``DIR/cycles.jsonl`` holds one JSON object per line, appended, flushed and ``fsync``-ed when
a cycle has finished, so a crash loses at most the cycle in progress. Two record types::

    {"type": "run", "event": "start" | "resume" | "stop", "at": <epoch s>, ...}
    {"type": "cycle", "cycle": 7, "group": "g1", "nodes": [...], "status": "passed", ...}

A ``start`` record carries what ``--resume`` and ``--report`` need (inventory path, options,
groups, budgets), a ``stop`` record why the run stopped. A cycle record (schema
:data:`SCHEMA`) carries per phase its duration in seconds (``phases``; ``null`` when the
phase did not apply, e.g. no volume on the failed nodes), the budgets it was judged
against, which phases missed their budget, which did not complete (their value is then the
time waited, a lower bound), and the details per node, pod, workload, service and volume.

A crash can leave only the last line incomplete: readers ignore it and the next writer
trims it. Damage anywhere else is reported with its line number.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import orjson

from harness.budgets import Budgets, parse_duration
from harness.errors import ConfigError

__all__ = [
    "CYCLES_FILE",
    "PHASES",
    "PHASE_DOCS",
    "SCHEMA",
    "CycleLog",
    "CycleRecord",
    "PhaseBudgets",
    "RunLog",
    "read_log",
]

SCHEMA: Final = 1
CYCLES_FILE: Final = "cycles.jsonl"

#: The phases of a cycle, in the order they happen.
PHASES: Final[tuple[str, ...]] = (
    "not_ready",
    "evacuation",
    "recovery",
    "service_outage",
    "volume_reattach",
    "cleanup",
)
PHASE_DOCS: Final[Mapping[str, str]] = {
    "not_ready": "power-off acknowledged -> Node Ready False/Unknown (the slowest node)",
    "evacuation": "power-off acknowledged -> every protected pod on the failed nodes "
    "Terminating or deleted (the last pod)",
    "recovery": "workload pods back to their baseline Ready count (the slowest critical "
    "workload): a Deployment from the power-off, a StatefulSet or DaemonSet from the "
    "power-on (its lost pods can only come back with their node)",
    "service_outage": "longest run of failed HTTP/TCP probes of a critical service, from "
    "power-off to the end of cleanup",
    "volume_reattach": "VolumeAttachment on a failed node released -> the volume attached "
    "again (the slowest volume)",
    "cleanup": "power-on acknowledged -> nodes Ready, taints gone, stuck pods finalised, "
    "workloads at baseline and spread as before",
}

Status = Literal["passed", "missed", "failed"]


@dataclass(frozen=True, slots=True)
class PhaseBudgets:
    """The budget of each phase, in seconds, derived from the inventory's named budgets.

    * not_ready = ``node_not_ready``
    * evacuation = ``node_not_ready + taint_applied + pod_eviction``
    * recovery = evacuation + ``pod_rescheduled``
    * service_outage = ``service_outage``
    * volume_reattach = ``volume_reattach``
    * cleanup = ``recovery`` (undo started -> everything healthy again)

    ``--budget PHASE=DURATION`` overrides one.
    """

    not_ready: float
    evacuation: float
    recovery: float
    service_outage: float
    volume_reattach: float
    cleanup: float

    @classmethod
    def from_budgets(cls, b: Budgets) -> PhaseBudgets:
        evacuation = b.node_not_ready + b.taint_applied + b.pod_eviction
        return cls(
            not_ready=b.node_not_ready,
            evacuation=evacuation,
            recovery=evacuation + b.pod_rescheduled,
            service_outage=b.service_outage,
            volume_reattach=b.volume_reattach,
            cleanup=b.recovery,
        )

    def with_overrides(self, overrides: Mapping[str, object]) -> PhaseBudgets:
        changes: dict[str, float] = {}
        for name, value in overrides.items():
            key = name.strip().lower().replace("-", "_")
            if key not in PHASES:
                raise ConfigError(
                    f"unknown phase {name!r}; valid: {', '.join(PHASES)}", field="--budget"
                )
            changes[key] = parse_duration(value, field=f"--budget {name}")
        return dataclasses.replace(self, **changes)

    def get(self, phase: str) -> float:
        value: float = getattr(self, phase)
        return value

    def as_dict(self) -> dict[str, float]:
        return {p: self.get(p) for p in PHASES}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PhaseBudgets:
        return cls(**{p: float(data[p]) for p in PHASES})


@dataclass(slots=True)
class CycleRecord:
    """One finished cycle."""

    cycle: int
    group: str
    nodes: list[str]
    status: Status
    started_at: float  # wall clock, epoch seconds
    ended_at: float
    phases: dict[str, float | None]
    budgets: dict[str, float]
    misses: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    timeline: str | None = None  # path of the saved timeline, relative to the run directory

    @property
    def duration_s(self) -> float:
        return self.ended_at - self.started_at

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "cycle",
            "schema": SCHEMA,
            "cycle": self.cycle,
            "group": self.group,
            "nodes": self.nodes,
            "status": self.status,
            "started_at": round(self.started_at, 3),
            "ended_at": round(self.ended_at, 3),
            "duration_s": round(self.duration_s, 3),
            "phases": {p: (None if v is None else round(v, 3)) for p, v in self.phases.items()},
            "budgets": self.budgets,
            "misses": self.misses,
            "incomplete": self.incomplete,
            "reason": self.reason,
            "detail": self.detail,
            "timeline": self.timeline,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CycleRecord:
        phases = d.get("phases") or {}
        return cls(
            cycle=int(d["cycle"]),
            group=str(d["group"]),
            nodes=[str(n) for n in d.get("nodes") or ()],
            status=_status(d.get("status")),
            started_at=float(d["started_at"]),
            ended_at=float(d["ended_at"]),
            phases={str(p): (None if v is None else float(v)) for p, v in phases.items()},
            budgets={str(p): float(v) for p, v in (d.get("budgets") or {}).items()},
            misses=[str(m) for m in d.get("misses") or ()],
            incomplete=[str(m) for m in d.get("incomplete") or ()],
            reason=str(d.get("reason") or ""),
            detail=dict(d.get("detail") or {}),
            timeline=d.get("timeline"),
        )


def _status(value: object) -> Status:
    if value == "passed":
        return "passed"
    if value == "missed":
        return "missed"
    if value == "failed":
        return "failed"
    raise ValueError(f"unknown cycle status {value!r}")


# -- the file ----------------------------------------------------------------------------


def _iter_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, raw line without newline, complete) for each line of the file."""
    data = path.read_bytes()
    start = 0
    number = 0
    while start < len(data):
        number += 1
        end = data.find(b"\n", start)
        if end < 0:
            yield number, data[start:], False
            return
        yield number, data[start:end], True
        start = end + 1


@dataclass
class RunLog:
    """What a run directory's JSONL says: run records and cycles, in file order."""

    path: Path
    runs: list[dict[str, Any]] = field(default_factory=list)
    cycles: list[CycleRecord] = field(default_factory=list)
    incomplete_tail: bool = False

    @property
    def start(self) -> dict[str, Any] | None:
        """The first ``start`` record (the run's options)."""
        return next((r for r in self.runs if r.get("event") == "start"), None)

    @property
    def last_stop(self) -> dict[str, Any] | None:
        return next((r for r in reversed(self.runs) if r.get("event") == "stop"), None)

    @property
    def last_cycle(self) -> int:
        return max((c.cycle for c in self.cycles), default=0)


def read_log(path: Path) -> RunLog:
    """Parse ``cycles.jsonl``; an incomplete last line (a crash mid-write) is ignored."""
    log = RunLog(path)
    if not path.exists():
        raise ConfigError("no cycles file here (not a longevity run directory)", source=str(path))
    for number, raw, complete in _iter_lines(path):
        if not raw.strip():
            continue
        try:
            record = orjson.loads(raw)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
            kind = record.get("type")
            if kind == "cycle":
                log.cycles.append(CycleRecord.from_json(record))
            elif kind == "run":
                log.runs.append(record)
            else:
                raise ValueError(f"unknown record type {kind!r}")
        except (ValueError, KeyError, TypeError) as exc:
            if not complete:
                log.incomplete_tail = True
                break
            raise ConfigError(
                f"line {number} is damaged ({exc}); fix or delete that line",
                source=str(path),
            ) from None
    return log


class CycleLog:
    """Appends records to ``cycles.jsonl``: one line each, written whole, then ``fsync``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(
            path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644
        )
        # A crash mid-append leaves a line without its newline: that cycle never finished.
        size = os.fstat(self._fd).st_size
        if size:
            with path.open("rb") as f:
                data = f.read()
            keep = data.rfind(b"\n") + 1
            if keep < size:
                os.ftruncate(self._fd, keep)
                os.fsync(self._fd)

    def append(self, record: Mapping[str, Any]) -> None:
        if self._fd is None:
            raise ConfigError("the cycles file is closed", source=str(self.path))
        data = orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS) + b"\n"
        written = 0
        while written < len(data):
            written += os.write(self._fd, data[written:])
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> CycleLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
