"""Blast-radius checks: may these nodes go down now, given those already down?

Pure functions over an :class:`~harness.inventory.Inventory`; no cluster access. (The
pre-flight checks, which need the API and the BMCs, are in :mod:`harness.preflight`; the
cluster lock is in :mod:`harness.kube.lock`.)

Rules, each named after the inventory setting that controls it:

``safety.max_nodes_down``
    Nodes down at once (already down + to take down), at most.
``safety.allow_control_plane_majority``
    Unless allowed, the control-plane nodes left up must stay a strict majority of all
    control-plane nodes: etcd (and with it the API server) needs a quorum. With 3 nodes, 1
    may go down; with 4, still only 1.
``safety.max_rack_fraction``
    The node lifecycle controller stops evicting pods from a zone in which more than 55%
    of the nodes (and at least 3) are NotReady ("partial disruption": the secondary eviction
    rate, 0 in clusters under 50 nodes). A scenario that takes down more than that fraction
    of a rack would wait for rescheduling that never comes. A rack that is *wholly* down is a
    full disruption, which Kubernetes evicts from normally, so losing a whole rack is allowed
    (losing every rack is not: then eviction stops everywhere). The check applies once at
    least 3 nodes of the rack are down, as in Kubernetes; nodes without a rack count as one
    zone, as Kubernetes does with nodes without a zone label. ``rack_fraction_policy: warn``
    turns this rule into a warning.

:func:`plan_disruption` returns a :class:`Plan` or raises :class:`SafetyViolation` (a
``PermanentError``) naming every rule broken. :func:`dry_run` never raises for a broken rule:
it returns text lines saying what would be done and what would be refused.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Final

from harness.errors import ConfigError, PermanentError
from harness.inventory import Inventory, NodeSpec

__all__ = [
    "ZONE_UNHEALTHY_MIN_NODES",
    "Plan",
    "RackImpact",
    "SafetyViolation",
    "Violation",
    "dry_run",
    "plan_disruption",
]

log = logging.getLogger(__name__)

RULE_MAX_NODES_DOWN: Final = "safety.max_nodes_down"
RULE_CONTROL_PLANE: Final = "safety.allow_control_plane_majority"
RULE_RACK_FRACTION: Final = "safety.max_rack_fraction"
RULE_ALREADY_DOWN: Final = "target already down"

ZONE_UNHEALTHY_MIN_NODES: Final = 3
"""Kubernetes treats a zone as partially disrupted only with more than 2 NotReady nodes."""

NO_RACK: Final = "(no rack)"

_EVICTION_NOTE: Final = (
    "Kubernetes stops evicting pods from a zone in which more than 55% of the nodes "
    "(at least 3) are NotReady, so pods there would not be rescheduled"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


class SafetyViolation(PermanentError):
    """The disruption would break one or more blast-radius rules."""

    def __init__(self, violations: Iterable[Violation]) -> None:
        self.violations = tuple(violations)
        self.rule = self.violations[0].rule
        super().__init__("refused: " + "; ".join(str(v) for v in self.violations))


@dataclasses.dataclass(frozen=True, slots=True)
class RackImpact:
    """How one rack fares during the disruption."""

    rack: str
    total: int
    down: int

    @property
    def fraction(self) -> float:
        return self.down / self.total if self.total else 0.0

    @property
    def fully_down(self) -> bool:
        return self.total > 0 and self.down == self.total


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """An accepted disruption: what goes down and what the cluster looks like meanwhile."""

    action: str
    targets: tuple[NodeSpec, ...]
    already_down: frozenset[str]
    down_after: frozenset[str]
    max_nodes_down: int
    control_plane_total: int
    control_plane_down: int
    racks: tuple[RackImpact, ...]
    max_rack_fraction: float
    warnings: tuple[str, ...] = ()
    refused: tuple[Violation, ...] = ()

    @property
    def target_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.targets)

    def describe(self) -> list[str]:
        """What would be done, as text lines (the dry run)."""
        lines = [f"{self.action} {len(self.targets)} node(s):"]
        for node in self.targets:
            where = f", rack {node.rack}" if node.rack else ""
            via: str = node.power.driver
            if node.power.endpoint:
                via += f" {node.power.endpoint}"
            elif node.ssh is not None:
                via += f" {node.ssh.host}"
            lines.append(f"  - {node.name} ({node.role}{where}) via {via}")
        if self.already_down:
            lines.append(f"already down: {', '.join(sorted(self.already_down))}")
        lines.append(
            f"nodes down during the disruption: {len(self.down_after)} "
            f"(limit {self.max_nodes_down})"
        )
        if self.control_plane_total:
            up = self.control_plane_total - self.control_plane_down
            lines.append(
                f"control-plane nodes up: {up} of {self.control_plane_total} "
                f"(quorum needs {self.control_plane_total // 2 + 1})"
            )
        for rack in self.racks:
            if rack.down:
                state = ", whole rack" if rack.fully_down else ""
                lines.append(
                    f"rack {rack.rack}: {rack.down} of {rack.total} nodes down "
                    f"({rack.fraction:.0%}{state}; limit {self.max_rack_fraction:.0%})"
                )
        lines.extend(f"warning: {w}" for w in self.warnings)
        lines.extend(f"REFUSED by {v.rule}: {v.message}" for v in self.refused)
        lines.append("verdict: refused" if self.refused else "verdict: allowed")
        return lines


def _names(inventory: Inventory, names: Iterable[str], what: str) -> list[str]:
    known = set(inventory.node_names())
    out: list[str] = []
    for name in names:
        if name not in known:
            raise ConfigError(
                f"unknown node {name!r} in {what}; the inventory has: "
                f"{', '.join(inventory.node_names())}",
                source=str(inventory.source or ""),
            )
        if name not in out:
            out.append(name)
    return out


def _evaluate(
    inventory: Inventory,
    targets: Iterable[str],
    already_down: Iterable[str],
    action: str,
) -> Plan:
    target_names = _names(inventory, targets, "the targets")
    down_before = frozenset(_names(inventory, already_down, "the nodes already down"))
    if not target_names:
        raise PermanentError(f"{action}: no target nodes given")
    safety = inventory.safety
    down_after = down_before | set(target_names)
    violations: list[Violation] = []
    warnings: list[str] = []

    overlap = [n for n in target_names if n in down_before]
    if overlap:
        violations.append(Violation(RULE_ALREADY_DOWN, f"{', '.join(overlap)} already down"))

    if len(down_after) > safety.max_nodes_down:
        violations.append(
            Violation(
                RULE_MAX_NODES_DOWN,
                f"{len(down_after)} nodes would be down at once "
                f"({len(down_before)} already down + {len(target_names) - len(overlap)} more); "
                f"the limit is {safety.max_nodes_down}",
            )
        )

    control_plane = [n.name for n in inventory.nodes_by_role("control-plane")]
    cp_down = sum(1 for n in control_plane if n in down_after)
    cp_up = len(control_plane) - cp_down
    if control_plane and cp_down and cp_up * 2 <= len(control_plane):
        message = (
            f"only {cp_up} of {len(control_plane)} control-plane nodes would stay up; etcd "
            f"and the API server need a majority ({len(control_plane) // 2 + 1})"
        )
        if safety.allow_control_plane_majority:
            warnings.append(message + " (allowed by safety.allow_control_plane_majority)")
        else:
            violations.append(Violation(RULE_CONTROL_PLANE, message))

    impacts: list[RackImpact] = []
    rack_keys: list[str | None] = [*inventory.racks(), None]
    for rack in rack_keys:
        members = [n.name for n in inventory.nodes if n.rack == rack]
        if not members:
            continue
        impacts.append(
            RackImpact(rack or NO_RACK, len(members), sum(1 for n in members if n in down_after))
        )
    rack_problems: list[str] = []
    for impact in impacts:
        if (
            impact.down >= ZONE_UNHEALTHY_MIN_NODES
            and not impact.fully_down
            and impact.fraction > safety.max_rack_fraction
        ):
            rack_problems.append(
                f"rack {impact.rack} would have {impact.down} of {impact.total} nodes down "
                f"({impact.fraction:.0%} > {safety.max_rack_fraction:.0%}); {_EVICTION_NOTE}"
            )
    if len(impacts) > 1 and all(i.fully_down for i in impacts):
        rack_problems.append(
            "every rack would be wholly down; Kubernetes stops all eviction when every zone "
            "is fully disrupted"
        )
    for problem in rack_problems:
        if safety.rack_fraction_policy == "warn":
            warnings.append(problem)
        else:
            violations.append(Violation(RULE_RACK_FRACTION, problem))

    return Plan(
        action=action,
        targets=tuple(inventory.node(n) for n in target_names),
        already_down=down_before,
        down_after=frozenset(down_after),
        max_nodes_down=safety.max_nodes_down,
        control_plane_total=len(control_plane),
        control_plane_down=cp_down,
        racks=tuple(impacts),
        max_rack_fraction=safety.max_rack_fraction,
        warnings=tuple(warnings),
        refused=tuple(violations),
    )


def plan_disruption(
    inventory: Inventory,
    targets: Iterable[str],
    *,
    already_down: Iterable[str] = (),
    action: str = "power off",
) -> Plan:
    """Check taking ``targets`` down while ``already_down`` are down.

    Returns the :class:`Plan` (its ``warnings`` are also logged) or raises
    :class:`SafetyViolation` naming every rule broken. Unknown node names raise
    ``ConfigError`` listing the inventory's nodes.
    """
    plan = _evaluate(inventory, targets, already_down, action)
    if plan.refused:
        raise SafetyViolation(plan.refused)
    for warning in plan.warnings:
        log.warning("%s %s: %s", action, ", ".join(plan.target_names), warning)
    return plan


def dry_run(
    inventory: Inventory,
    targets: Iterable[str],
    *,
    already_down: Iterable[str] = (),
    action: str = "power off",
) -> list[str]:
    """What :func:`plan_disruption` would do, as text lines; broken rules are listed, not
    raised."""
    return _evaluate(inventory, targets, already_down, action).describe()
