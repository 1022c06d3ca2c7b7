"""Build a node's power driver from its inventory entry.

Every driver, the built-in ones (ipmi, redfish, ssh, kind) included, is a plugin of the
``powercut.power_drivers`` entry-point group (:mod:`harness.driver_registry`,
:class:`harness.power.plugin.DriverPlugin`): the inventory checked the node's ``driver``
and its ``extra`` options against the plugin when it loaded, and the plugin builds the
driver here. Vendor quirks are plugins, not ``if vendor:``.

Given the inventory's ``budgets``, a built-in driver's ``timeout_s`` (the deadline of one
whole power action: request, acknowledgement and read-back of the new state) is the
``power_ack`` + ``power_state_verify`` budgets, the limit the scenarios hold a power
action to, unless the node's ``extra`` or the caller sets ``timeout_s``. A driver with a
deadline of its own (kind) keeps it. Keyword ``options`` given by the caller win over
``extra``.
"""

from __future__ import annotations

from typing import Any

from harness.budgets import Budgets
from harness.driver_registry import ENTRY_POINT_GROUP, load_plugin
from harness.errors import ConfigError
from harness.inventory import NodeSpec, PowerSpec
from harness.power.base import PowerDriver
from harness.power.plugin import power_timeout_s

__all__ = ["ENTRY_POINT_GROUP", "available_protocols", "driver_for", "power_timeout_s"]


def available_protocols(node: NodeSpec) -> list[str]:
    names: list[str] = [p.driver for p in (node.power, *node.power_alternatives)]
    if node.ssh is not None and "ssh" not in names:
        names.append("ssh")
    return names


def driver_for(
    node: NodeSpec,
    protocol: str | None = None,
    *,
    budgets: Budgets | None = None,
    **options: Any,
) -> PowerDriver:
    """The driver for ``protocol`` (the node's primary ``power`` when None)."""
    specs = [p for p in (node.power, *node.power_alternatives) if p.driver == protocol]
    if protocol == "ssh" and not specs:
        # The node's ssh block is a way in even when no power block names ssh.
        spec = PowerSpec.model_validate({"driver": "ssh"})
    else:
        spec = node.power_for(protocol)
    plugin = load_plugin(spec.driver)
    driver = plugin.build(node, spec, spec.options, budgets=budgets, overrides=options)
    if not isinstance(driver, PowerDriver):
        raise ConfigError(
            f"node {node.name}: power driver {spec.driver} built a {type(driver).__name__}, "
            "not a PowerDriver"
        )
    return driver
