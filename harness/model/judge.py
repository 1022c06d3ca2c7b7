"""A measured phase against the model: which bound judges it, and whether it deviates from
Kubernetes' own behaviour (beyond the model's upper bound) apart from missing its budget.

A phase measured against a named budget (``within the node-not-ready budget``) keeps that
budget's name (``"budget": "node_not_ready"`` in ``measurements.json``,
:class:`harness.scenario.report.Measurements`): the model's bound is looked up by it, where
that budget's bound models this kind of phase (the NotReady of a worker or of a
control-plane node, a volume released by its node or after the out-of-service taint). A
bound never judges a phase of another kind: a taint's removal measured within the
taint-applied budget is no NoExecute taint of the node lifecycle controller. A phase
measured against a limit in seconds, or recorded before the name was kept, names only its
phase in words (``"w-b3 unreachable taint"``): its budget is then the one whose phase those
words end with (and, where two fit, whose figure equals the measurement's budget).
docs/budgets.md lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from harness.model.bounds import Bound
from harness.model.cluster import ClusterModel

__all__ = [
    "PHASE_BUDGETS",
    "Judged",
    "budget_of_item",
    "budget_of_phase",
    "budgets_of_phase",
    "judge",
]

#: A phase's last words -> the budgets that judge it (the first when no figure decides).
PHASE_BUDGETS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    (" NotReady", ("node_not_ready", "control_plane_node_not_ready")),
    (" unreachable taint", ("taint_applied",)),
    (" pods Terminating", ("pod_eviction",)),
    (" Terminating", ("pod_eviction",)),
    (" deleted", ("pod_gc",)),
    (" released after the out-of-service taint", ("volume_detach_out_of_service",)),
    (" re-attached", ("volume_reattach",)),
    (" rescheduled", ("pod_rescheduled",)),
    (" replaced by a Ready pod", ("pod_rescheduled",)),
    (" longest outage", ("service_outage",)),
    (" Ready after power-on", ("node_ready_after_power_on",)),
)


def budgets_of_phase(phase: str) -> tuple[str, ...]:
    """The budgets whose phase is of ``phase``'s kind, by its words (the default first)."""
    if " released by " in phase:
        return ("volume_detach", "volume_detach_out_of_service")
    for suffix, names in PHASE_BUDGETS:
        if phase.endswith(suffix):
            return names
    return ()


def budget_of_phase(
    phase: str, budget_s: float | None, budgets: Mapping[str, float] | None = None
) -> str | None:
    """The budget (field name) that judges ``phase``, or None."""
    names = budgets_of_phase(phase)
    if budgets and budget_s is not None:
        for n in names:
            if budgets.get(n) == budget_s:
                return n
    return names[0] if names else None


def budget_of_item(
    item: Mapping[str, Any], budgets: Mapping[str, float] | None = None
) -> str | None:
    """The budget (field name) that judges a ``measurements.json`` item: the one it names
    where that budget's phase is of the item's kind, else the one its phase's words fit
    (:func:`budget_of_phase`); None for a phase no budget's bound models."""
    named = item.get("budget")
    if isinstance(named, str) and named in budgets_of_phase(str(item.get("phase", ""))):
        return named
    budget_s = item.get("budget_s")
    return budget_of_phase(
        str(item.get("phase", "")), budget_s if isinstance(budget_s, int | float) else None, budgets
    )


@dataclass(frozen=True)
class Judged:
    """One phase: measured, the model's bound and the budget, and the verdicts apart."""

    phase: str
    seconds: float
    budget_s: float | None
    bound: Bound | None

    @property
    def deviation(self) -> bool:
        """Beyond the model's upper bound: Kubernetes did not behave as configured."""
        return (
            self.bound is not None
            and self.bound.high_s is not None
            and self.seconds > self.bound.high_s
        )

    @property
    def model_text(self) -> str:
        if self.bound is None:
            return "-"
        high = "-" if self.bound.high_s is None else f"{self.bound.high_s:g}"
        return f"{self.bound.low_s:g}-{high}"

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "seconds": self.seconds,
            "budget_s": self.budget_s,
            "model": None if self.bound is None else self.bound.to_json(),
            "deviation": self.deviation,
        }


def judge(
    model: ClusterModel | None, item: Mapping[str, Any], budgets: Mapping[str, float] | None = None
) -> Judged | None:
    """A ``measurements.json`` item judged against ``model``; None for a non-duration."""
    if "seconds" not in item:
        return None
    if budgets is None and model is not None:
        budgets = model.budgets
    name = budget_of_item(item, budgets)
    bound = model.bound(name) if model is not None and name else None
    return Judged(str(item.get("phase", "")), float(item["seconds"]), item.get("budget_s"), bound)
