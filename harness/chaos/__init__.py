"""powercut as a chaostoolkit extension: the same drivers, checks and journal, as activities.

Actions (``harness.chaos.actions``) power nodes off and on through their BMCs (or kind
containers), drain, cordon, delete nodes, force-delete pods, set the out-of-service taint,
restart pods and partition kind nodes; each disruption is journaled with its undo before
it happens, so ``powercut recover`` cleans up after an aborted ``chaos run``. Probes
(``harness.chaos.probes``) read node readiness, workload availability, service health,
pods on a node, volume attachments, power state and the journal. The inventory is the
experiment's configuration key ``powercut_inventory`` or the ``POWERCUT_INVENTORY``
environment variable.

chaostoolkit discovers extensions by distribution name and looks for ``discover`` in the
distribution's top-level package, which for powercut is the library itself (``harness``),
and the library does not import its consumers. So ``chaos discover powercut`` is not the
way here; ``python -m harness.chaos discover`` writes the same discovery document for
``chaos init --discovery-path``. See docs/chaos.md.

This package is a consumer of the library, like the Gherkin steps: nothing in the library
imports it (checked by import-linter).
"""

from __future__ import annotations

import collections.abc
import importlib
import types
import typing
from typing import Any

from harness import __version__

__all__ = ["__version__", "discover"]

EXTENSION_NAME = "powercut"


def discover(discover_system: bool = True) -> dict[str, Any]:
    """The chaostoolkit discovery document of this extension: its activities, and with
    ``discover_system`` the nodes of the ``POWERCUT_INVENTORY`` inventory (no cluster
    access)."""
    from chaoslib.discovery.discover import (
        discover_actions,
        discover_probes,
        initialize_discovery_result,
    )

    discovery: dict[str, Any] = initialize_discovery_result(
        EXTENSION_NAME, __version__, "kubernetes"
    )
    discovery["activities"].extend(discover_actions("harness.chaos.actions"))
    discovery["activities"].extend(discover_probes("harness.chaos.probes"))
    for activity in discovery["activities"]:
        _resolve_types(activity)
    from harness.settings import from_environment

    path = from_environment().inventory
    if discover_system and path:
        from harness.inventory import load_inventory

        inventory = load_inventory(path)
        discovery["system"] = {
            "inventory": str(path),
            "cluster": inventory.name,
            "nodes": [
                {"name": n.name, "role": n.role, "rack": n.rack, "power": n.power.driver}
                for n in inventory.nodes
            ],
            "workloads": [w.ref for w in inventory.workloads],
        }
    return discovery


def _portable(hint: Any) -> str:
    """chaostoolkit's portable type name of an annotation (``str | None`` -> ``string``)."""
    from chaoslib.discovery.discover import portable_type_name

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        return _portable(members[0]) if members else "null"
    base = origin if origin is not None else hint
    if isinstance(base, type) and base is not str:
        if issubclass(base, collections.abc.Mapping):
            return "mapping"
        if issubclass(base, collections.abc.Sequence):
            return "list"
    name: str = portable_type_name(base)
    return name


def _resolve_types(activity: dict[str, Any]) -> None:
    """Argument and return types from the real annotations: chaoslib reads them with
    ``inspect.signature``, which leaves postponed annotations as strings."""
    func = getattr(importlib.import_module(activity["mod"]), activity["name"])
    hints = typing.get_type_hints(func)
    for arg in activity.get("arguments", []):
        if arg["name"] in hints:
            arg["type"] = _portable(hints[arg["name"]])
    if "return" in hints:
        activity["return_type"] = _portable(hints["return"])
