"""The inventory: which cluster, which nodes, how to reach their BMCs, what to watch.

``load_inventory(path)`` reads a YAML file into frozen pydantic models. Every problem in the
file raises one ``ConfigError`` whose message names the file, the YAML path of the bad value
(``nodes[2].power.driver``), the value, what would have been valid and the line, e.g.::

    lab.yaml:nodes[2].power.driver: 'ipmii' is not an installed power driver (did you mean
    'ipmi'?); installed: ipmi, kind, redfish, ssh (node 'w3', line 31)

A node's ``power.driver`` is any installed power driver (:mod:`harness.driver_registry`);
the driver's plugin checks the fields it reads and, with its options model, ``extra``.

Credentials are never stored in the models as plain strings: a node's BMC password is a
:class:`Secret` that reads its environment variable or file only when a driver asks for it,
and whose ``str()``/``repr()`` is ``***``. An inline ``password`` is accepted for labs but
warns (naming the node, never the value).

Relative paths (kubeconfig, password files, CA bundles, SSH keys) resolve against the
directory of the inventory file.

The package, one concern a module: :mod:`~harness.inventory.models` (the pydantic models),
:mod:`~harness.inventory.fields` (validated field types and parsers),
:mod:`~harness.inventory.secrets` (credentials), :mod:`~harness.inventory.slo` (the
``prometheus``, ``slos``, ``alerts`` and ``stop_conditions`` sections, which
:mod:`harness.slo` reads), :mod:`~harness.inventory.loading` (YAML with
line numbers) and :mod:`~harness.inventory.render` (how an error reads). Import from
``harness.inventory``.
"""

from __future__ import annotations

from harness.inventory.fields import HostPort, parse_host_port
from harness.inventory.loading import load_inventory, parse_inventory
from harness.inventory.models import (
    BudgetsSpec,
    ClusterSpec,
    Driver,
    HealthSpec,
    Inventory,
    NodeRole,
    NodeSpec,
    PowerSpec,
    RackSpec,
    SafetySpec,
    SshSpec,
    WorkloadSpec,
)
from harness.inventory.secrets import InlinePasswordWarning, Secret

__all__ = [
    "BudgetsSpec",
    "ClusterSpec",
    "Driver",
    "HealthSpec",
    "HostPort",
    "InlinePasswordWarning",
    "Inventory",
    "NodeRole",
    "NodeSpec",
    "PowerSpec",
    "RackSpec",
    "SafetySpec",
    "Secret",
    "SshSpec",
    "WorkloadSpec",
    "load_inventory",
    "parse_host_port",
    "parse_inventory",
]
