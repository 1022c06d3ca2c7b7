"""Build a node's power driver from its inventory entry.

Built-in drivers (ipmi, redfish, ssh) are built here, with the node's ``power.extra``
options (``POWER_EXTRA_OPTIONS`` in :mod:`harness.inventory`, checked when the inventory
loads) as keyword arguments; any other driver name is looked up in the
``powercut.power_drivers`` entry-point group and must offer ``from_inventory(node, spec)``,
which reads ``extra`` itself: vendor quirks are plugins, not ``if vendor:``. Keyword
``options`` given by the caller win over ``extra``.

Given the inventory's ``budgets``, a built-in driver's ``timeout_s`` (the deadline of one
whole power action: request, acknowledgement and read-back of the new state) is the
``power_ack`` + ``power_state_verify`` budgets, the limit the scenarios hold a power
action to, unless the node's ``extra`` or the caller sets ``timeout_s``. Plugin drivers
keep the deadline they document (``extra.timeout_s`` of kind).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from harness.budgets import Budgets
from harness.errors import ConfigError
from harness.inventory import NodeSpec, PowerSpec
from harness.power.base import PowerDriver

ENTRY_POINT_GROUP = "powercut.power_drivers"


def available_protocols(node: NodeSpec) -> list[str]:
    names: list[str] = [p.driver for p in (node.power, *node.power_alternatives)]
    if node.ssh is not None and "ssh" not in names:
        names.append("ssh")
    return names


def _password(node: NodeSpec, spec: PowerSpec) -> str:
    secret = spec.secret
    if secret is None:
        raise ConfigError(f"node {node.name}: power driver {spec.driver} has no password source")
    return secret.reveal()


def power_timeout_s(budgets: Budgets) -> float:
    """The deadline of one power action: the BMC acknowledges, then reports the new state."""
    return budgets.power_ack + budgets.power_state_verify


def driver_for(
    node: NodeSpec,
    protocol: str | None = None,
    *,
    budgets: Budgets | None = None,
    **options: Any,
) -> PowerDriver:
    """The driver for ``protocol`` (the node's primary ``power`` when None)."""
    defaults: dict[str, Any] = {}
    if budgets is not None:
        defaults["timeout_s"] = power_timeout_s(budgets)
    if protocol == "ssh" or (protocol is None and node.power.driver == "ssh"):
        specs = [p for p in (node.power, *node.power_alternatives) if p.driver == "ssh"]
        extra = specs[0].driver_options() if specs else {}
        return _ssh(node, **{**defaults, **extra, **options})
    spec = node.power_for(protocol)
    if spec.driver in ("ipmi", "redfish"):
        options = {**defaults, **spec.driver_options(), **options}
    if spec.driver == "ipmi":
        from harness.power.ipmi import IpmiDriver

        host, port = spec.address
        return IpmiDriver(
            node.name,
            host,
            port,
            spec.username or "",
            _password(node, spec),
            interface="rmcpplus" if spec.ipmi_interface == "rmcpplus" else "ipmitool",
            **options,
        )
    if spec.driver == "redfish":
        from harness.power.redfish import RedfishDriver

        verify = spec.verify_tls if isinstance(spec.verify_tls, bool) else str(spec.verify_tls)
        return RedfishDriver(
            node.name,
            spec.endpoint or "",
            spec.username or "",
            _password(node, spec),
            verify=verify,
            auth="basic" if spec.redfish_auth == "basic" else "session",
            system_id=spec.system_id,
            **options,
        )
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == spec.driver:
            cls = ep.load()
            if not hasattr(cls, "from_inventory"):
                raise ConfigError(
                    f"power driver plugin {ep.value} has no from_inventory(node, spec)"
                )
            driver: PowerDriver = cls.from_inventory(node, spec, **options)
            return driver
    valid = ", ".join(
        sorted({"ipmi", "redfish", "ssh"} | {e.name for e in entry_points(group=ENTRY_POINT_GROUP)})
    )
    raise ConfigError(
        f"node {node.name}: no power driver {spec.driver!r} is installed; valid: {valid}"
    )


def _ssh(node: NodeSpec, **options: Any) -> PowerDriver:
    from harness.power.ssh import SshDriver

    ssh = node.ssh
    if ssh is None or not ssh.user or not ssh.key_file:
        raise ConfigError(
            f"node {node.name}: SSH power needs an ssh block with host, user and key_file",
            field="ssh",
        )
    return SshDriver(
        node.name,
        ssh.host,
        ssh.port,
        ssh.user,
        str(ssh.key_file),
        known_hosts=str(ssh.known_hosts) if ssh.known_hosts else None,
        strict_host_key=ssh.strict_host_key,
        **options,
    )
