"""Failure groups: disjoint sets of workers, one failed per cycle, rotated every cycle.

``auto_groups(inventory, fraction)`` splits the workers into ``ceil(1 / fraction)`` disjoint
groups (``1/3`` gives three groups, each a third of the workers) by dealing every rack's
workers out in turn, so each group is spread across the racks. Every group is then checked:

* no rack loses more than ``safety.max_rack_fraction`` (55% by default) of its nodes, control
  planes included, in one cycle: above that Kubernetes treats the zone as partially
  disrupted and stops evicting from it (see :mod:`harness.safety`);
* the inventory's blast-radius rules (``safety.max_nodes_down``, control-plane majority)
  through :func:`harness.safety.plan_disruption`.

A groups file gives the groups by hand, as a list or a mapping::

    groups:
      - name: left              # or just a list of node names (named g1, g2, ...)
        nodes: [w-a1, w-b1]
      - [w-a2, w-b2]

    groups: {left: [w-a1, w-b1], right: [w-a2, w-b2]}

Cycle ``n`` (counted from 1) fails group ``(n - 1) % len(groups)``, so a resumed run keeps
the rotation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ConfigError
from harness.inventory import Inventory
from harness.safety import NO_RACK, plan_disruption
from harness.scenario.targets.select import Amount

__all__ = [
    "Group",
    "auto_groups",
    "group_for_cycle",
    "groups_from_json",
    "load_groups",
    "parse_fraction",
    "rack_shares",
    "validate_groups",
]


@dataclass(frozen=True, slots=True)
class Group:
    """One set of nodes failed together in a cycle."""

    name: str
    nodes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": list(self.nodes)}

    def __str__(self) -> str:
        return f"{self.name} ({', '.join(self.nodes)})"


_FRACTION = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_fraction(text: str | float) -> float:
    """``"1/3"``, ``"0.33"``, ``"33%"``, a number, or the scenario grammar's fraction words
    (``one-third``, ``one-half``, ``all``): a fraction in (0, 1]."""
    value: float | None = None
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    elif isinstance(text, str):
        s = text.strip()
        try:
            if m := _FRACTION.match(s):
                value = float(Fraction(int(m[1]), int(m[2]))) if int(m[2]) else None
            elif s.endswith("%"):
                value = float(s[:-1]) / 100
            else:
                value = float(s)
        except ValueError:
            value = _fraction_words(s)
    if value is None or not math.isfinite(value) or not 0 < value <= 1:
        raise ConfigError(
            f"{text!r} is not a fraction of the workers; write 1/3, 0.33, 33% or one-third "
            "(more than 0, at most 1)",
            field="--fraction",
        )
    return value


def _fraction_words(text: str) -> float | None:
    """``one-third``, ``two-thirds``, ``all``: the target grammar's fractions (see
    :mod:`harness.scenario.targets.select`), else None."""
    try:
        amount = Amount.parse(text)
    except ConfigError:
        return None
    return float(amount.fraction) if amount.fraction is not None else None


def _racks_in_order(inventory: Inventory) -> list[str | None]:
    racks: list[str | None] = list(inventory.racks())
    if any(n.rack is None for n in inventory.nodes):
        racks.append(None)
    return racks


def auto_groups(inventory: Inventory, fraction: float) -> list[Group]:
    """Split the workers into ``ceil(1/fraction)`` disjoint groups spread across racks."""
    workers = inventory.nodes_by_role("worker")
    if not workers:
        raise ConfigError(
            "the inventory has no worker nodes to fail", source=str(inventory.source or "")
        )
    count = max(1, math.ceil(1 / fraction - 1e-9))
    if count > len(workers):
        raise ConfigError(
            f"a fraction of {fraction:.3g} needs {count} groups but there are only "
            f"{len(workers)} workers; use a larger fraction",
            field="--fraction",
        )
    members: list[list[str]] = [[] for _ in range(count)]
    dealt = 0
    for rack in _racks_in_order(inventory):
        for node in workers:
            if node.rack == rack:
                members[dealt % count].append(node.name)
                dealt += 1
    groups = [Group(f"g{i + 1}", tuple(names)) for i, names in enumerate(members)]
    validate_groups(inventory, groups)
    return groups


def rack_shares(inventory: Inventory, nodes: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Per rack touched by ``nodes``: (nodes of the rack in ``nodes``, nodes in the rack)."""
    chosen = set(nodes)
    out: dict[str, tuple[int, int]] = {}
    for rack in _racks_in_order(inventory):
        members = [n.name for n in inventory.nodes if n.rack == rack]
        down = sum(1 for n in members if n in chosen)
        if down:
            out[rack or NO_RACK] = (down, len(members))
    return out


def validate_groups(inventory: Inventory, groups: Sequence[Group]) -> None:
    """Known nodes, disjoint groups, the rack rule and the inventory's blast-radius rules.

    Raises ``ConfigError`` (or ``SafetyViolation``) naming the group and the rule.
    """
    if not groups:
        raise ConfigError("no failure groups given")
    limit = inventory.safety.max_rack_fraction
    seen: dict[str, str] = {}
    names: set[str] = set()
    known = set(inventory.node_names())
    for group in groups:
        if group.name in names:
            raise ConfigError(f"duplicate group name {group.name!r}", field="groups")
        names.add(group.name)
        if not group.nodes:
            raise ConfigError(f"group {group.name} has no nodes", field="groups")
        for node in group.nodes:
            if node not in known:
                raise ConfigError(
                    f"group {group.name}: unknown node {node!r}; the inventory has: "
                    f"{', '.join(inventory.node_names())}",
                    field="groups",
                )
            if node in seen:
                raise ConfigError(
                    f"node {node} is in groups {seen[node]} and {group.name}; groups must be "
                    "disjoint",
                    field="groups",
                )
            seen[node] = group.name
        for rack, (down, total) in rack_shares(inventory, group.nodes).items():
            if down / total > limit + 1e-9:
                raise ConfigError(
                    f"group {group.name} would take {down} of the {total} nodes of rack {rack} "
                    f"down ({down / total:.0%} > {limit:.0%}, safety.max_rack_fraction): "
                    "Kubernetes stops evicting from a zone that loses more than 55% of its "
                    "nodes. Use a smaller --fraction or a groups file",
                    field="groups",
                )
        plan_disruption(inventory, group.nodes, action=f"fail group {group.name}")


def _group_entry(entry: object, index: int, source: str) -> Group:
    where = f"groups[{index}]"
    name = f"g{index + 1}"
    nodes: object = entry
    if isinstance(entry, dict):
        unknown = set(entry) - {"name", "nodes"}
        if unknown:
            raise ConfigError(
                f"unknown key {sorted(unknown)[0]!r}; valid keys: name, nodes",
                source=source,
                field=where,
            )
        name = str(entry.get("name") or name)
        nodes = entry.get("nodes")
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise ConfigError(
            "expected a list of node names (or {name: ..., nodes: [...]})",
            source=source,
            field=where,
        )
    return Group(name, tuple(nodes))


def load_groups(path: Path, inventory: Inventory) -> list[Group]:
    """Groups from a YAML file (see the module docstring), validated against the inventory."""
    source = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("groups file not found", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the groups file: {exc}", source=source) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", source=source) from None
    raw = data.get("groups") if isinstance(data, dict) else data
    groups: list[Group]
    if isinstance(raw, dict):
        groups = [
            _group_entry({"name": str(k), "nodes": v}, i, source)
            for i, (k, v) in enumerate(raw.items())
        ]
    elif isinstance(raw, list):
        groups = [_group_entry(e, i, source) for i, e in enumerate(raw)]
    else:
        raise ConfigError(
            "expected 'groups:' with a list of groups or a mapping of name to nodes",
            source=source,
            field="groups",
        )
    validate_groups(inventory, groups)
    return groups


def groups_from_json(data: object) -> list[Group]:
    """Groups as stored in a run record (``[{"name": ..., "nodes": [...]}]``)."""
    if not isinstance(data, list):
        raise ConfigError("the run record has no list of groups", field="groups")
    return [Group(str(g["name"]), tuple(str(n) for n in g["nodes"])) for g in data]


def group_for_cycle(groups: Sequence[Group], cycle: int) -> Group:
    """The group failed in ``cycle`` (counted from 1)."""
    if cycle < 1:
        raise ValueError(f"cycles count from 1, got {cycle}")
    return groups[(cycle - 1) % len(groups)]
