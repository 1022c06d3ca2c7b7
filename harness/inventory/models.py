"""The inventory's frozen pydantic models: the cluster, its nodes and their power, racks,
health checks, workloads, budgets, safety limits, and the :class:`Inventory` itself.
"""

from __future__ import annotations

import difflib
import enum
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness import budgets as _budgets
from harness.driver_registry import FieldError, load_plugin
from harness.errors import ConfigError
from harness.inventory import slo as _slo
from harness.inventory.fields import (
    HostPort,
    NonBlank,
    RelPath,
    check_namespace,
    check_node_name,
    check_selector,
    is_secret_key,
    parse_host_port,
    resolve_path,
    valid_host,
    walk_data,
)
from harness.inventory.secrets import InlinePasswordWarning, Secret
from harness.inventory.storage import StorageEndpoint, parse_endpoint


class NodeRole(enum.StrEnum):
    CONTROL_PLANE = "control-plane"
    WORKER = "worker"


class Driver(enum.StrEnum):
    """The built-in power drivers' names (any installed plugin's name is valid too)."""

    IPMI = "ipmi"
    REDFISH = "redfish"
    SSH = "ssh"
    KIND = "kind"


IPMI_DEFAULT_PORT: Final = 623


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class ClusterSpec(_Model):
    """The cluster under test."""

    kubeconfig: RelPath = Field(description="kubeconfig file; relative to the inventory file")
    context: str | None = Field(default=None, description="kubeconfig context; None: current")


class SshSpec(_Model):
    """How to reach the node's operating system over SSH."""

    host: NonBlank
    port: int = Field(default=22, ge=1, le=65535)
    user: str | None = None
    key_file: RelPath | None = None
    known_hosts: RelPath | None = None
    strict_host_key: bool = Field(
        default=True, description="refuse hosts missing from known_hosts (never auto-add)"
    )

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not valid_host(value):
            raise ValueError(f"{value!r} is not a valid host name or address")
        return value


class PowerSpec(_Model):
    """How to switch the node's power: one driver, its endpoint, credentials and options.

    ``driver`` is the name of an installed power driver (an entry point of the
    ``powercut.power_drivers`` group, :mod:`harness.driver_registry`); the driver says which
    of the other fields it reads and checks them, and its options model checks ``extra``.
    """

    driver: NonBlank = Field(
        description="an installed power driver: ipmi, redfish, ssh, kind, or a plugin's name"
    )
    endpoint: str | None = Field(
        default=None,
        description="ipmi: 'host:port' (port 623 by default); redfish: 'https://host:port' "
        "URL; ssh: unused (the node's ssh block); kind: the container (default: the node name)",
    )
    username: str | None = None
    password_env: str | None = Field(default=None, description="environment variable name")
    password_file: RelPath | None = Field(default=None, description="file holding the password")
    password: SecretStr | None = Field(
        default=None, repr=False, description="inline password: labs only, warns"
    )
    verify_tls: Annotated[bool | Path, BeforeValidator(_slo.tls_verification)] = Field(
        default=True, description="redfish: verify the BMC certificate; or a CA bundle path"
    )
    interface: Literal["ipmitool", "rmcpplus"] | None = Field(
        default=None, description="ipmi only; default ipmitool (lanplus)"
    )
    cipher_suite: Literal[17, 3] | None = Field(
        default=None,
        description="ipmi only: the RMCP+ cipher suite; default 17 (RAKP-HMAC-SHA256); "
        "3 (SHA-1) only where the BMC offers nothing better (docs/ipmi.md)",
    )
    privilege: Literal["user", "operator", "administrator"] | None = Field(
        default=None,
        description="ipmi only: the session's privilege; default operator (all that "
        "chassis power control needs)",
    )
    auth: Literal["basic", "session"] | None = Field(
        default=None, description="redfish only; default session"
    )
    system_id: str | None = Field(
        default=None, description="redfish: the ComputerSystem id; None: the only system"
    )
    extra: dict[str, Any] = Field(
        default_factory=dict,
        description="the driver's options, checked by its options model when the inventory "
        "loads (docs/your-repo.md lists the built-in drivers' options)",
    )

    _owner: str = PrivateAttr(default="")
    _options: BaseModel | None = PrivateAttr(default=None)

    @field_validator("driver")
    @classmethod
    def _installed(cls, value: str) -> str:
        try:
            load_plugin(value)
        except ConfigError as exc:
            # Not installed: what is. Installed but broken: why it does not load.
            raise ValueError(str(exc)) from None
        return value

    @field_validator("verify_tls", mode="after")
    @classmethod
    def _ca_bundle(cls, value: bool | Path, info: ValidationInfo) -> bool | Path:
        if isinstance(value, Path):
            path = resolve_path(value, info)
            if not path.is_file():
                raise ValueError(f"CA bundle {str(path)!r} does not exist")
            return path
        return value

    @field_validator("password_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError(f"{value!r} is not a valid environment variable name")
        return value

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Self:
        given = [k for k in ("password_env", "password_file", "password") if getattr(self, k)]
        if len(given) > 1:
            raise FieldError(
                (given[1],),
                f"give only one of password_env, password_file, password; got {', '.join(given)}",
            )
        plugin = load_plugin(self.driver)
        for name in sorted(self.model_fields_set):
            common = "password" if name in ("password_env", "password_file") else name
            if common in ("driver", "extra") or common in plugin.fields:
                continue
            if name == "verify_tls" and self.verify_tls is True:
                continue  # the default, written out
            uses = ", ".join(sorted(plugin.fields)) or "none of them"
            raise FieldError(
                (name,), f"does not apply to driver {self.driver} (it reads: {uses}, extra)"
            )
        plugin.check(self)
        try:
            self._options = plugin.options.model_validate(self.extra, context=info.context)
        except ValidationError as exc:
            raise _options_error(self.driver, plugin.options, self.extra, exc) from None
        return self

    @property
    def options(self) -> BaseModel:
        """``extra`` as validated by the driver's options model."""
        if self._options is None:  # pragma: no cover - set by the validator
            raise ConfigError(f"{self._owner or 'power'}: options were not validated")
        return self._options

    def driver_options(self) -> dict[str, Any]:
        """The options given in ``extra``, converted by the driver's options model (without
        the defaults it fills in)."""
        return self.options.model_dump(exclude_unset=True)

    @property
    def ipmi_interface(self) -> str:
        return self.interface or "ipmitool"

    @property
    def redfish_auth(self) -> str:
        return self.auth or "session"

    @property
    def address(self) -> HostPort:
        """IPMI endpoint as host and port (port 623 unless given)."""
        if self.endpoint is None:
            raise ConfigError(f"{self._owner or 'node'}: power.endpoint is not set")
        return parse_host_port(self.endpoint, default_port=IPMI_DEFAULT_PORT)

    @property
    def secret(self) -> Secret | None:
        """The BMC password, unresolved; ``None`` when none is configured."""
        owner = self._owner or "power"
        if self.password_env:
            return Secret(env=self.password_env, owner=owner)
        if self.password_file:
            return Secret(file=self.password_file, owner=owner)
        if self.password is not None:
            return Secret(value=self.password.get_secret_value(), owner=owner)
        return None


def _options_error(
    driver: str, model: type[BaseModel], extra: Mapping[str, Any], exc: ValidationError
) -> FieldError:
    """The first problem in ``power.extra``, as the driver's options model found it."""
    error = exc.errors(include_url=False, include_input=False)[0]
    loc: tuple[str | int, ...] = ("extra", *error["loc"])
    valid = [f.alias or n for n, f in model.model_fields.items()]
    if error["type"] == "extra_forbidden":
        key = str(error["loc"][-1])
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        keys = ", ".join(valid) or "none (the driver takes no options)"
        message = f"unknown option {key!r} for driver {driver}{hint}; valid keys: {keys}"
        return FieldError(loc, message)
    if error["type"] == "missing":
        return FieldError(loc, f"is required by driver {driver} but missing")
    found, value = walk_data(dict(extra), error["loc"])
    cause = (error.get("ctx") or {}).get("error")
    message = str(cause) if isinstance(cause, ValueError) else str(error["msg"])
    message = message[0].lower() + message[1:] if message else message
    if isinstance(cause, FieldError):
        return FieldError(loc + cause.subpath, cause.message)
    if not found or isinstance(value, dict | list) or any(is_secret_key(p) for p in loc):
        return FieldError(loc, message)
    return FieldError(loc, f"{value!r} is not valid; {message}")


def _check_redfish_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise FieldError(
            ("endpoint",), f"{url!r} is not a Redfish URL; expected 'https://host[:port]'"
        )
    if parts.username or parts.password:
        raise FieldError(
            ("endpoint",),
            "must not contain credentials; use username and password_env / password_file",
        )
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise FieldError(("endpoint",), f"{url!r} has an invalid port") from None


class NodeSpec(_Model):
    """One node: its Kubernetes name, role, rack, power control and optional SSH access."""

    name: Annotated[str, AfterValidator(check_node_name)]
    role: Literal["control-plane", "worker"]
    rack: str | None = Field(default=None, description="rack / zone; must be listed in racks")
    power: PowerSpec
    power_alternatives: list[PowerSpec] = Field(
        default_factory=list,
        description="other ways to switch the same node (a BMC speaking Redfish and IPMI)",
    )
    ssh: SshSpec | None = None
    api_endpoint: str | None = Field(
        default=None,
        description="control-plane nodes: this node's own API server, 'https://host:port' "
        "(the cluster endpoint may be a load balancer); lets a scenario check that this "
        "node's API server and etcd member are back",
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.api_endpoint is not None:
            if self.role != "control-plane":
                raise FieldError(("api_endpoint",), "is only for control-plane nodes")
            parts = urlsplit(self.api_endpoint)
            if parts.scheme != "https" or not parts.hostname:
                raise FieldError(
                    ("api_endpoint",),
                    f"{self.api_endpoint!r} is not an API server URL; expected 'https://host:port'",
                )
        seen = {self.power.driver: "power"}
        for i, alternative in enumerate(self.power_alternatives):
            if alternative.driver in seen:
                raise FieldError(
                    ("power_alternatives", i, "driver"),
                    f"driver {alternative.driver} is already given in {seen[alternative.driver]}",
                )
            seen[alternative.driver] = f"power_alternatives[{i}]"
        for power in (self.power, *self.power_alternatives):
            power._owner = f"node {self.name}"
            if power.password is not None:
                warnings.warn(InlinePasswordWarning(self.name), stacklevel=2)
        if "ssh" in seen and self.ssh is None:
            raise FieldError(("ssh",), "is required for power driver ssh (host, user, key_file)")
        return self

    def power_for(self, driver: str | None = None) -> PowerSpec:
        """The power spec of ``driver`` (the primary ``power`` when None)."""
        if driver is None:
            return self.power
        for power in (self.power, *self.power_alternatives):
            if power.driver == driver:
                return power
        available = ", ".join(p.driver for p in (self.power, *self.power_alternatives))
        raise ConfigError(f"node {self.name} has no power driver {driver!r}; it has: {available}")

    @property
    def node_role(self) -> NodeRole:
        return NodeRole(self.role)


class StorageNetworkSpec(_Model):
    """The storage network's endpoints (array ports, NFS servers): what a storage-network
    cut drops on a node, and nothing else (:mod:`harness.power.storage_cut`)."""

    endpoints: list[str] = Field(
        min_length=1,
        description="IPv4 addresses or networks with an optional TCP port: '10.0.20.5', "
        "'10.0.20.0/24', '10.0.20.5:3260'",
    )

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, value: list[str]) -> list[str]:
        for text in value:
            parse_endpoint(text)  # a ValueError names the entry and what is valid
        return value

    def parsed(self) -> list[StorageEndpoint]:
        return [parse_endpoint(text) for text in self.endpoints]


class RackSpec(_Model):
    """A rack (failure domain). ``zone`` is its ``topology.kubernetes.io/zone`` label."""

    name: NonBlank
    zone: str | None = Field(default=None, description="zone label value; default: the name")

    @property
    def zone_label(self) -> str:
        return self.zone or self.name


class HealthSpec(_Model):
    """How to probe a workload's service from outside: one of ``http`` or ``tcp``."""

    http: str | None = Field(default=None, description="URL answering 2xx while healthy")
    tcp: str | None = Field(default=None, description="'host:port' accepting connections")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if (self.http is None) == (self.tcp is None):
            raise ValueError("give exactly one of http (a URL) or tcp ('host:port')")
        if self.http is not None:
            parts = urlsplit(self.http)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise FieldError(
                    ("http",), f"{self.http!r} is not a URL; expected 'http(s)://host[:port]/path'"
                )
        if self.tcp is not None:
            try:
                parse_host_port(self.tcp)
            except ValueError as exc:
                raise FieldError(("tcp",), str(exc)) from None
        return self

    @property
    def tcp_address(self) -> HostPort | None:
        return parse_host_port(self.tcp) if self.tcp else None


class WorkloadSpec(_Model):
    """A workload whose availability the scenarios check."""

    namespace: Annotated[str, AfterValidator(check_namespace)]
    kind: Literal["Deployment", "StatefulSet", "DaemonSet"]
    name: str | None = None
    selector: Annotated[str | None, BeforeValidator(check_selector)] = Field(
        default=None, description="label selector: {app: web} or 'app=web,tier!=db'"
    )
    min_available: int = Field(default=1, ge=0)
    health: HealthSpec | None = None
    critical: bool = Field(default=True, description="a miss fails the scenario (else: warns)")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if (self.name is None) == (self.selector is None):
            raise ValueError("give exactly one of name or selector")
        return self

    @property
    def ref(self) -> str:
        """``Deployment default/web`` or ``Deployment default/{app=web}``, for messages."""
        return f"{self.kind} {self.namespace}/{self.name or '{' + str(self.selector) + '}'}"


class BudgetsSpec(_Model):
    """Which budget profile to use and which budgets to override.

    Override keys are budget names in any spelling ``harness.budgets`` accepts
    (``node-not-ready``); they are stored canonical (``node_not_ready``). Values are seconds
    or duration strings (``'90s'``, ``'6m'``), stored as seconds.
    """

    profile: str | None = Field(default=None, description="fast | upstream; default: timings")
    overrides: dict[str, float] = Field(default_factory=dict)

    @field_validator("profile")
    @classmethod
    def _profile(cls, value: str | None) -> str | None:
        if value is not None and value not in _budgets.PROFILES:
            raise ValueError(
                f"{value!r} is not a budget profile; must be one of: {', '.join(_budgets.PROFILES)}"
            )
        return value

    @field_validator("overrides", mode="before")
    @classmethod
    def _overrides(cls, value: object) -> object:
        if not isinstance(value, Mapping):
            return value  # pydantic reports the type error
        out: dict[str, float] = {}
        for key, raw in value.items():
            try:
                name = _budgets.canonical_budget_name(str(key))
                seconds = _budgets.parse_duration(raw)
            except ConfigError as exc:
                raise FieldError((str(key),), str(exc)) from None
            if str(key) != _budgets.dashed(name):
                warnings.warn(_budgets.BudgetSpellingWarning(str(key), name), stacklevel=2)
            if name in out:
                raise FieldError((str(key),), f"overrides {_budgets.dashed(name)!r} twice")
            out[name] = seconds
        return out


class SafetySpec(_Model):
    """Blast-radius limits checked before every disruption (see ``harness.safety``)."""

    max_nodes_down: int = Field(default=1, ge=1, description="nodes down at once, at most")
    max_rack_fraction: float = Field(
        default=0.55,
        gt=0.0,
        le=1.0,
        description="largest fraction of one rack's nodes down at once (partial outage)",
    )
    rack_fraction_policy: Literal["refuse", "warn"] = "refuse"
    allow_control_plane_majority: bool = Field(
        default=False, description="allow losing etcd/API quorum (never on a shared cluster)"
    )


class Inventory(_Model):
    """A whole inventory file.

    The YAML key ``racks`` is the field ``rack_specs`` (so that :meth:`racks` can list rack
    names); serialise with ``model_dump(by_alias=True)`` to get YAML keys back.
    """

    name: str | None = None
    timings: str | None = Field(
        default=None, description="timings the cluster runs with: fast | upstream"
    )
    cluster: ClusterSpec
    rack_specs: list[RackSpec] = Field(default_factory=list, alias="racks")
    nodes: list[NodeSpec] = Field(min_length=1)
    workloads: list[WorkloadSpec] = Field(default_factory=list)
    budgets: BudgetsSpec = Field(default_factory=BudgetsSpec)
    safety: SafetySpec = Field(default_factory=SafetySpec)
    prometheus: _slo.PrometheusSpec | None = Field(
        default=None, description="the Prometheus HTTP API the SLOs and alerts are read from"
    )
    slos: list[_slo.SloSpec] = Field(default_factory=list, description="service-level objectives")
    alerts: list[_slo.AlertSpec] = Field(default_factory=list, description="must not fire")
    stop_conditions: list[_slo.StopConditionSpec] = Field(
        default_factory=list, description="SLOs or alerts that abort a scenario on breach"
    )
    storage_network: StorageNetworkSpec | None = Field(
        default=None,
        description="the storage endpoints a storage-network cut drops (the 'storage' failure)",
    )

    _source: Path | None = PrivateAttr(default=None)
    #: "--context" when a command's ``--context`` replaced ``cluster.context``
    _context_from: str | None = PrivateAttr(default=None)
    _context_replaced: str | None = PrivateAttr(default=None)

    @field_validator("timings")
    @classmethod
    def _timings(cls, value: str | None) -> str | None:
        if value is not None and value not in _budgets.PROFILES:
            raise ValueError(
                f"{value!r} is not valid; must be one of: {', '.join(_budgets.PROFILES)}"
            )
        return value

    @model_validator(mode="after")
    def _check(self) -> Self:
        seen_racks: dict[str, int] = {}
        for i, rack in enumerate(self.rack_specs):
            if rack.name in seen_racks:
                raise FieldError(
                    ("racks", i, "name"),
                    f"duplicate rack {rack.name!r} (also racks[{seen_racks[rack.name]}])",
                )
            seen_racks[rack.name] = i
        seen_nodes: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            if node.name in seen_nodes:
                raise FieldError(
                    ("nodes", i, "name"),
                    f"duplicate node name {node.name!r} (also nodes[{seen_nodes[node.name]}])",
                )
            seen_nodes[node.name] = i
            if self.rack_specs and node.rack is not None and node.rack not in seen_racks:
                raise FieldError(
                    ("nodes", i, "rack"),
                    f"unknown rack {node.rack!r}; must be one of: {', '.join(seen_racks)} "
                    "(declared under racks)",
                )
        problem = _slo.check_references(
            self.prometheus, self.slos, self.alerts, self.stop_conditions
        )
        if problem is not None:
            raise FieldError(*problem)
        return self

    # -- queries ----------------------------------------------------------------------------

    @property
    def source(self) -> Path | None:
        """The file this inventory was loaded from, if any."""
        return self._source

    @property
    def context_from(self) -> str:
        """Where ``cluster.context`` comes from: ``--context`` (:meth:`with_context`),
        ``cluster.context`` (the inventory's own), or ``current-context`` (none given: the
        kubeconfig's current context, as kubectl picks it)."""
        if self._context_from:
            return self._context_from
        return "cluster.context" if self.cluster.context else "current-context"

    @property
    def context_replaced(self) -> str | None:
        """The inventory's own ``cluster.context`` that ``--context`` replaced (None: it
        named none, or nothing replaced it)."""
        return self._context_replaced

    def with_context(self, context: str) -> Inventory:
        """This inventory aimed at another context of its kubeconfig, as kubectl's
        ``--context`` overrides the current one; the copy says so (:attr:`context_from`).
        Whether that context's cluster holds these nodes is checked by the caller
        (:func:`harness.preflight.aim_at_context`)."""
        cluster = self.cluster.model_copy(update={"context": context})
        aimed = self.model_copy(update={"cluster": cluster})
        aimed._context_from = "--context"
        aimed._context_replaced = (
            self._context_replaced if self._context_from else self.cluster.context
        )
        return aimed

    def node(self, name: str) -> NodeSpec:
        """The node ``name``; ``ConfigError`` listing the known nodes otherwise."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise ConfigError(
            f"unknown node {name!r}; the inventory has: {', '.join(self.node_names())}",
            source=str(self._source or ""),
        )

    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def nodes_by_role(self, role: NodeRole | str) -> list[NodeSpec]:
        """Nodes with role ``control-plane`` or ``worker``, in inventory order."""
        try:
            wanted = NodeRole(role)
        except ValueError:
            raise ConfigError(
                f"unknown role {role!r}; must be one of: {', '.join(NodeRole)}"
            ) from None
        return [n for n in self.nodes if n.role == wanted.value]

    def racks(self) -> list[str]:
        """Rack names: declared racks (YAML ``racks``) in order, then racks only nodes mention."""
        names = [r.name for r in self.rack_specs]
        for node in self.nodes:
            if node.rack is not None and node.rack not in names:
                names.append(node.rack)
        return names

    def nodes_in_rack(self, rack: str | None) -> list[NodeSpec]:
        """Nodes of ``rack``; ``None`` gives the nodes without a rack."""
        if rack is not None and rack not in self.racks():
            raise ConfigError(
                f"unknown rack {rack!r}; must be one of: {', '.join(self.racks()) or '(none)'}",
                source=str(self._source or ""),
            )
        return [n for n in self.nodes if n.rack == rack]

    def timing_budgets(self) -> _budgets.Budgets:
        """The budgets to use: ``budgets.profile`` (else ``timings``, else upstream) with
        ``budgets.overrides`` applied."""
        name = self.budgets.profile or self.timings or "upstream"
        source = str(self._source or "")
        return _budgets.profile(name, source=source, field="budgets.profile").with_overrides(
            self.budgets.overrides, source=source, field="budgets.overrides"
        )
