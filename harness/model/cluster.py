"""The cluster's own model of its timings: read once at the start of a run, kept with the
run's results (:data:`MODEL_FILE`), and used to refuse impossible budgets, derive budgets and
judge each measured phase (docs/budgets.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from harness.budgets import Budgets, dashed
from harness.errors import ConfigError
from harness.model.bounds import Bound, compute_bounds
from harness.model.facts import WorkloadModel
from harness.model.read import Api, WorkloadRef, read_settings, read_workloads, zone_sizes
from harness.model.settings import Setting

__all__ = ["MODEL_FILE", "ClusterModel", "ImpossibleBudget", "load_model", "read_model"]

#: The model's file in a run's results directory (beside the scenarios' measurements).
MODEL_FILE: Final = "powercut-model.json"


@dataclass(frozen=True)
class ImpossibleBudget:
    """A budget below what the model allows: it cannot hold on this cluster."""

    budget: str
    budget_s: float
    bound: Bound

    def __str__(self) -> str:
        return (
            f"{self.bound.why}, so {dashed(self.budget)} {self.budget_s:g} s cannot hold "
            f"(it takes at least {self.bound.low_s:g} s; {self.bound.setting}: "
            f"{self.bound.source}); lower {self.bound.setting} or raise the budget"
        )


@dataclass(frozen=True)
class ClusterModel:
    """Settings, workloads and the bounds they predict, by budget name."""

    version: str
    settings: Mapping[str, Setting]
    workloads: Sequence[WorkloadModel]
    bounds: Mapping[str, Bound]
    zones: Sequence[int] = field(default_factory=tuple)
    #: The run's budgets (by field name), kept so that a phase judged later finds the
    #: budget it was measured against (see harness.model.judge).
    budgets: Mapping[str, float] = field(default_factory=dict)

    def bound(self, budget: str) -> Bound | None:
        return self.bounds.get(budget)

    def impossible(
        self, budgets: Budgets, names: Sequence[str] | None = None
    ) -> list[ImpossibleBudget]:
        """The budgets (``names``: only these field names) below the model's least time. Only
        bounds from settings read from the cluster refuse a budget: one that rests on a default
        assumed (the credentials could not read where the setting is, or the cluster does not
        show it) is shown beside the measurement, never a reason to refuse a run."""
        out = []
        for name, seconds in budgets.as_dict().items():
            if names is not None and name not in names:
                continue
            b = self.bounds.get(name)
            if b is not None and not b.assumed and seconds < b.low_s:
                out.append(ImpossibleBudget(name, seconds, b))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "settings": {k: s.to_json() for k, s in self.settings.items()},
            "workloads": [w.to_json() for w in self.workloads],
            "zones": list(self.zones),
            "bounds": {k: b.to_json() for k, b in self.bounds.items()},
            "budgets": dict(self.budgets),
        }

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> ClusterModel:
        return ClusterModel(
            version=str(doc.get("version", "")),
            settings={k: Setting.from_json(v) for k, v in (doc.get("settings") or {}).items()},
            workloads=[WorkloadModel.from_json(w) for w in doc.get("workloads") or []],
            bounds={k: Bound.from_json(v) for k, v in (doc.get("bounds") or {}).items()},
            zones=tuple(doc.get("zones") or ()),
            budgets={str(k): float(v) for k, v in (doc.get("budgets") or {}).items()},
        )

    def save(self, directory: Path) -> Path:
        path = directory / MODEL_FILE
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        return path


def read_model(api: Api, workloads: Sequence[WorkloadRef]) -> ClusterModel:
    """Read the model from the cluster ``api`` (read-only): settings, the inventory's
    ``workloads`` and the bounds they predict."""
    nodes = api.list("/api/v1/nodes")[0]
    settings, version = read_settings(api, nodes)
    models = read_workloads(
        api,
        workloads,
        settings["default-unreachable-toleration-seconds"],
        settings["default-not-ready-toleration-seconds"],
    )
    zones = zone_sizes(nodes)
    return ClusterModel(
        version="unknown" if version is None else f"{version[0]}.{version[1]}",
        settings=settings,
        workloads=models,
        bounds=compute_bounds(settings, models, zones),
        zones=tuple(zones),
    )


def load_model(path: Path) -> ClusterModel | None:
    """The model kept in ``path`` (a results directory or the file), None if there is none."""
    file = path / MODEL_FILE if path.is_dir() else path
    if not file.is_file():
        return None
    try:
        return ClusterModel.from_json(json.loads(file.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"not a powercut model: {exc}", source=str(file)) from None
