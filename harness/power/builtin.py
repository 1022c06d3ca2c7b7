"""The built-in power drivers as plugins: ipmi, redfish, ssh and kind.

They come through the ``powercut.power_drivers`` entry points like any third-party driver
(pyproject.toml); each has its options model, the model of ``power.extra``. The drivers'
own modules (pyipmi, sushy, paramiko) are imported only when a driver is built, so loading
an inventory stays cheap.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field

from harness.errors import ConfigError
from harness.inventory import NodeSpec, PowerSpec, parse_host_port
from harness.inventory.models import IPMI_DEFAULT_PORT
from harness.power.base import PowerDriver
from harness.power.plugin import (
    Command,
    DriverOptions,
    DriverPlugin,
    FieldError,
    Seconds,
    WholeSeconds,
)

__all__ = ["IPMI", "KIND", "REDFISH", "SSH"]


class IpmiOptions(DriverOptions):
    timeout_s: Seconds | None = Field(default=None, description="deadline of one power action")
    poll_s: Seconds | None = Field(default=None, description="interval of state reads")
    keepalive_s: WholeSeconds | None = Field(default=None, description="session keep-alive")


class RedfishOptions(DriverOptions):
    timeout_s: Seconds | None = Field(default=None, description="deadline of one power action")
    poll_s: Seconds | None = Field(default=None, description="interval of state reads")


class SshOptions(DriverOptions):
    timeout_s: Seconds | None = Field(default=None, description="deadline of one power action")
    poll_s: Seconds | None = Field(default=None, description="interval of reachability probes")
    probe_timeout_s: Seconds | None = Field(default=None, description="one probe's deadline")
    command_off: Command | None = Field(default=None, description="default systemctl poweroff")
    command_off_forced: Command | None = Field(
        default=None, description="default systemctl poweroff --force --force"
    )
    command_reboot: Command | None = Field(default=None, description="default systemctl reboot")
    command_partition: Command | None = Field(
        default=None, description="arms the heal on the node (systemd-run), then cuts it off"
    )
    command_heal: Command | None = Field(default=None, description="heals a partition now")
    command_kubelet_stop: Command | None = Field(
        default=None, description="arms the kubelet's restart on the node, then stops it"
    )
    command_kubelet_start: Command | None = Field(
        default=None, description="starts the kubelet now"
    )


def _docker(value: object) -> object:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be the name or path of the docker CLI")
    return value.strip()


class KindOptions(DriverOptions):
    docker: Annotated[str, BeforeValidator(_docker)] | None = Field(
        default=None, description="the docker CLI (default: docker)"
    )
    stop_timeout_s: int | None = Field(
        default=None, ge=0, description="graceful stop: seconds before docker kills"
    )
    timeout_s: Seconds | None = Field(default=None, description="deadline of one power action")
    poll_s: Seconds | None = Field(default=None, description="interval of state reads")


class IpmiPlugin(DriverPlugin[IpmiOptions]):
    options = IpmiOptions
    fields = frozenset(
        {"endpoint", "username", "password", "interface", "cipher_suite", "privilege"}
    )
    budget_timeout: ClassVar[bool] = True

    def check(self, spec: PowerSpec) -> None:
        if not spec.endpoint:
            raise FieldError(("endpoint",), "is required for driver ipmi ('host:port')")
        try:
            parse_host_port(spec.endpoint, default_port=IPMI_DEFAULT_PORT)
        except ValueError as exc:
            raise FieldError(("endpoint",), str(exc)) from None
        self.require(spec, "username", "password")

    def make(
        self, node: NodeSpec, spec: PowerSpec, options: IpmiOptions, settings: dict[str, Any]
    ) -> PowerDriver:
        from harness.power.ipmi import IpmiDriver

        host, port = spec.address
        interface: Literal["ipmitool", "rmcpplus"] = (
            "rmcpplus" if spec.ipmi_interface == "rmcpplus" else "ipmitool"
        )
        return IpmiDriver(
            node.name,
            host,
            port,
            spec.username or "",
            self.password(node, spec),
            interface=interface,
            cipher_suite=spec.cipher_suite or 17,
            privilege=spec.privilege or "operator",
            **settings,
        )


class RedfishPlugin(DriverPlugin[RedfishOptions]):
    options = RedfishOptions
    fields = frozenset({"endpoint", "username", "password", "verify_tls", "auth", "system_id"})
    budget_timeout: ClassVar[bool] = True

    def check(self, spec: PowerSpec) -> None:
        from harness.inventory.models import _check_redfish_url

        if not spec.endpoint:
            raise FieldError(("endpoint",), "is required for driver redfish ('https://host:port')")
        _check_redfish_url(spec.endpoint)
        self.require(spec, "username", "password")

    def make(
        self, node: NodeSpec, spec: PowerSpec, options: RedfishOptions, settings: dict[str, Any]
    ) -> PowerDriver:
        from harness.power.redfish import RedfishDriver

        verify = spec.verify_tls if isinstance(spec.verify_tls, bool) else str(spec.verify_tls)
        auth: Literal["basic", "session"] = "basic" if spec.redfish_auth == "basic" else "session"
        return RedfishDriver(
            node.name,
            spec.endpoint or "",
            spec.username or "",
            self.password(node, spec),
            verify=verify,
            auth=auth,
            system_id=spec.system_id,
            **settings,
        )


class SshPlugin(DriverPlugin[SshOptions]):
    """``systemctl poweroff`` over the node's ``ssh`` block (it cannot power a node on)."""

    options = SshOptions
    # The endpoint is unused (the node's ssh block says where); accepted for old inventories.
    fields = frozenset({"endpoint"})
    budget_timeout: ClassVar[bool] = True

    def make(
        self, node: NodeSpec, spec: PowerSpec, options: SshOptions, settings: dict[str, Any]
    ) -> PowerDriver:
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
            **settings,
        )


class KindPlugin(DriverPlugin[KindOptions]):
    """A kind node's container through the docker CLI (docs/kind.md); the endpoint names
    the container (default: the node name). Keeps its own documented deadline."""

    options = KindOptions
    fields = frozenset({"endpoint"})

    def make(
        self, node: NodeSpec, spec: PowerSpec, options: KindOptions, settings: dict[str, Any]
    ) -> PowerDriver:
        from harness.power.kind import KindDriver

        return KindDriver(node.name, spec.endpoint or node.name, **settings)


IPMI = IpmiPlugin()
REDFISH = RedfishPlugin()
SSH = SshPlugin()
KIND = KindPlugin()
