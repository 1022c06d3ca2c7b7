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
"""

from __future__ import annotations

import difflib
import enum
import ipaddress
import os
import re
import types
import typing
import warnings
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, NamedTuple, Self
from urllib.parse import urlsplit

import yaml
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
from harness.slo import config as _slo

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


class InlinePasswordWarning(UserWarning):
    """A BMC password is written in the inventory itself instead of an env var or file.

    The message names the node, never the value.
    """

    def __init__(self, node: str) -> None:
        super().__init__(
            f"node {node}: power.password is written inline in the inventory; "
            "use power.password_env or power.password_file outside a lab"
        )
        self.node = node


# --------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------


class Secret:
    """A credential resolved only when needed, from an environment variable, a file or (labs
    only) an inline value.

    ``str()`` and ``repr()`` are ``***``; the value is returned only by :meth:`reveal`.
    Resolution errors name the owner (``node w1``) and the variable or file, never a value.
    """

    __slots__ = ("_env", "_file", "_owner", "_value")

    def __init__(
        self,
        *,
        env: str | None = None,
        file: Path | None = None,
        value: str | None = None,
        owner: str = "",
    ) -> None:
        if sum(x is not None for x in (env, file, value)) != 1:
            raise ValueError("a Secret needs exactly one of env, file or value")
        self._env = env
        self._file = file
        self._value = value
        self._owner = owner

    @property
    def source(self) -> str:
        """Where the value comes from, safe to print: ``env BMC_PW``, ``file /x``, ``inline``."""
        if self._env is not None:
            return f"env {self._env}"
        if self._file is not None:
            return f"file {self._file}"
        return "inline"

    def reveal(self) -> str:
        """The secret value. Reads the environment or the file on every call (rotation)."""
        who = f"{self._owner}: " if self._owner else ""
        if self._value is not None:
            return self._value
        if self._env is not None:
            value = os.environ.get(self._env)
            if value is None:
                raise ConfigError(f"{who}environment variable {self._env} is not set")
            if not value:
                raise ConfigError(f"{who}environment variable {self._env} is empty")
            return value
        assert self._file is not None
        try:
            text = self._file.read_text(encoding="utf-8")
        except OSError as exc:
            # strerror only: the exception text of a read error holds no content
            raise ConfigError(
                f"{who}cannot read password file {self._file}: {exc.strerror or type(exc).__name__}"
            ) from None
        except UnicodeDecodeError:
            raise ConfigError(f"{who}password file {self._file} is not UTF-8 text") from None
        value = text.rstrip("\r\n")
        if not value:
            raise ConfigError(f"{who}password file {self._file} is empty")
        return value

    def __str__(self) -> str:
        return "***"

    def __repr__(self) -> str:
        return "***"

    def __format__(self, format_spec: str) -> str:
        return "***"

    def __reduce__(self) -> Any:
        raise TypeError("a Secret cannot be pickled")


# --------------------------------------------------------------------------------------------
# Small parsers and validated types
# --------------------------------------------------------------------------------------------


#: A validation error that knows the sub-path of the bad value below the validated model,
#: raised inside model validators so that the loader can report ``nodes[2].power.endpoint``
#: rather than ``nodes[2].power``.
_FieldError = FieldError


class HostPort(NamedTuple):
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


_HOST_LABEL = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_\-]{0,61}[A-Za-z0-9_])?$")


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        labels = host.removesuffix(".").split(".")
        return len(host) <= 253 and all(_HOST_LABEL.match(label) for label in labels)
    return True


def parse_host_port(text: str, *, default_port: int | None = None) -> HostPort:
    """``host:port``, ``[v6addr]:port`` or (with ``default_port``) a bare host.

    Raises ``ValueError`` with a message saying what was expected.
    """
    text = text.strip()
    host: str
    port_text: str | None
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise ValueError(f"{text!r} has no closing ']'; expected '[v6addr]:port'")
        host, rest = text[1:close], text[close + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r} is not '[v6addr]:port'")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif text.count(":") > 1:
        host, port_text = text, None  # a bare IPv6 address
    else:
        host, port_text = text, None
    if not host or not _valid_host(host):
        raise ValueError(f"{text!r} has no valid host; expected 'host:port'")
    if port_text is None:
        if default_port is None:
            raise ValueError(f"{text!r} has no port; expected 'host:port'")
        return HostPort(host, default_port)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{text!r} has an invalid port; expected 'host:port', port 1-65535")
    return HostPort(host, int(port_text))


def _resolve_path(value: Path, info: ValidationInfo) -> Path:
    """Expand ``~``; make relative paths relative to the inventory file's directory."""
    path = value.expanduser()
    base = info.context.get("base_dir") if isinstance(info.context, dict) else None
    if not path.is_absolute() and isinstance(base, Path):
        path = base / path
    return path


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


RelPath = Annotated[Path, AfterValidator(_resolve_path)]
"""A path; relative values resolve against the directory of the inventory file."""

NonBlank = Annotated[str, AfterValidator(_not_blank)]

_DNS_SUBDOMAIN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _node_name(value: str) -> str:
    if not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes node name "
            "(lowercase letters, digits, '-' and '.', at most 253 characters)"
        )
    return value


def _namespace(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid namespace "
            "(lowercase letters, digits and '-', at most 63 characters)"
        )
    return value


def _selector(value: object) -> object:
    """A label selector as a mapping (``{app: web}``) or a string (``app=web,tier!=db``)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        parts = []
        for key, val in value.items():
            if not isinstance(key, str) or not isinstance(val, str | int | bool):
                raise ValueError(
                    f"{key!r}: {val!r} is not a label; selector values must be strings"
                )
            text = str(val).lower() if isinstance(val, bool) else str(val)
            parts.append(f"{key}={text}")
        if not parts:
            raise ValueError("selector must not be empty")
        return ",".join(parts)
    raise ValueError(f"{value!r} is not valid; must be a mapping of labels or a string")


def _is_secret_key(key: object) -> bool:
    return (
        isinstance(key, str) and "password" in key.lower() and not key.endswith(("_env", "_file"))
    )


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
        if not _valid_host(value):
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
            path = _resolve_path(value, info)
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
            raise _FieldError(
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
            raise _FieldError(
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
    found, value = _walk(dict(extra), error["loc"])
    cause = (error.get("ctx") or {}).get("error")
    message = str(cause) if isinstance(cause, ValueError) else str(error["msg"])
    message = message[0].lower() + message[1:] if message else message
    if isinstance(cause, FieldError):
        return FieldError(loc + cause.subpath, cause.message)
    if not found or isinstance(value, dict | list) or any(_is_secret_key(p) for p in loc):
        return FieldError(loc, message)
    return FieldError(loc, f"{value!r} is not valid; {message}")


def _check_redfish_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise _FieldError(
            ("endpoint",), f"{url!r} is not a Redfish URL; expected 'https://host[:port]'"
        )
    if parts.username or parts.password:
        raise _FieldError(
            ("endpoint",),
            "must not contain credentials; use username and password_env / password_file",
        )
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise _FieldError(("endpoint",), f"{url!r} has an invalid port") from None


class NodeSpec(_Model):
    """One node: its Kubernetes name, role, rack, power control and optional SSH access."""

    name: Annotated[str, AfterValidator(_node_name)]
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
                raise _FieldError(("api_endpoint",), "is only for control-plane nodes")
            parts = urlsplit(self.api_endpoint)
            if parts.scheme != "https" or not parts.hostname:
                raise _FieldError(
                    ("api_endpoint",),
                    f"{self.api_endpoint!r} is not an API server URL; expected 'https://host:port'",
                )
        seen = {self.power.driver: "power"}
        for i, alternative in enumerate(self.power_alternatives):
            if alternative.driver in seen:
                raise _FieldError(
                    ("power_alternatives", i, "driver"),
                    f"driver {alternative.driver} is already given in {seen[alternative.driver]}",
                )
            seen[alternative.driver] = f"power_alternatives[{i}]"
        for power in (self.power, *self.power_alternatives):
            power._owner = f"node {self.name}"
            if power.password is not None:
                warnings.warn(InlinePasswordWarning(self.name), stacklevel=2)
        if "ssh" in seen and self.ssh is None:
            raise _FieldError(("ssh",), "is required for power driver ssh (host, user, key_file)")
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
                raise _FieldError(
                    ("http",), f"{self.http!r} is not a URL; expected 'http(s)://host[:port]/path'"
                )
        if self.tcp is not None:
            try:
                parse_host_port(self.tcp)
            except ValueError as exc:
                raise _FieldError(("tcp",), str(exc)) from None
        return self

    @property
    def tcp_address(self) -> HostPort | None:
        return parse_host_port(self.tcp) if self.tcp else None


class WorkloadSpec(_Model):
    """A workload whose availability the scenarios check."""

    namespace: Annotated[str, AfterValidator(_namespace)]
    kind: Literal["Deployment", "StatefulSet", "DaemonSet"]
    name: str | None = None
    selector: Annotated[str | None, BeforeValidator(_selector)] = Field(
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
                raise _FieldError((str(key),), str(exc)) from None
            if str(key) != _budgets.dashed(name):
                warnings.warn(_budgets.BudgetSpellingWarning(str(key), name), stacklevel=2)
            if name in out:
                raise _FieldError((str(key),), f"overrides {_budgets.dashed(name)!r} twice")
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

    _source: Path | None = PrivateAttr(default=None)

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
                raise _FieldError(
                    ("racks", i, "name"),
                    f"duplicate rack {rack.name!r} (also racks[{seen_racks[rack.name]}])",
                )
            seen_racks[rack.name] = i
        seen_nodes: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            if node.name in seen_nodes:
                raise _FieldError(
                    ("nodes", i, "name"),
                    f"duplicate node name {node.name!r} (also nodes[{seen_nodes[node.name]}])",
                )
            seen_nodes[node.name] = i
            if self.rack_specs and node.rack is not None and node.rack not in seen_racks:
                raise _FieldError(
                    ("nodes", i, "rack"),
                    f"unknown rack {node.rack!r}; must be one of: {', '.join(seen_racks)} "
                    "(declared under racks)",
                )
        problem = _slo.check_references(
            self.prometheus, self.slos, self.alerts, self.stop_conditions
        )
        if problem is not None:
            raise _FieldError(*problem)
        return self

    # -- queries ----------------------------------------------------------------------------

    @property
    def source(self) -> Path | None:
        """The file this inventory was loaded from, if any."""
        return self._source

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


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Hashable, Any]:
    loader.flatten_mapping(node)
    seen: dict[Hashable, yaml.Mark] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if isinstance(key, Hashable) and key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r} (first at line {seen[key].line + 1})",
                key_node.start_mark,
            )
        if isinstance(key, Hashable):
            seen[key] = key_node.start_mark
    return loader.construct_mapping(node)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_inventory(path: str | os.PathLike[str]) -> Inventory:
    """Read and validate an inventory file. Every problem raises one ``ConfigError``."""
    file = Path(path)
    source = str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("inventory file not found", source=source) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not an inventory file", source=source) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read inventory: {exc.strerror or type(exc).__name__}", source=source
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text (byte {exc.start})", source=source) from None
    inventory = parse_inventory(text, source=source, base_dir=file.resolve().parent)
    inventory._source = file
    return inventory


def parse_inventory(
    text: str, *, source: str = "<string>", base_dir: Path | None = None
) -> Inventory:
    """Validate inventory YAML ``text``; ``source`` names it in errors and warnings.

    Relative paths resolve against ``base_dir`` (default: the current directory).
    """
    tree, data = _parse_yaml(text, source)
    if data is None:
        raise ConfigError(
            f"inventory is empty; expected a mapping with keys: {', '.join(_keys(Inventory))}",
            source=source,
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"the top level is a {type(data).__name__}; expected a mapping with keys: "
            f"{', '.join(_keys(Inventory))}",
            source=source,
        )
    context = {"base_dir": base_dir or Path.cwd()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InlinePasswordWarning)
        warnings.simplefilter("always", _budgets.BudgetSpellingWarning)
        try:
            inventory = Inventory.model_validate(data, context=context)
        except ValidationError as exc:
            raise _config_error(exc, data, tree, source) from None
    # Re-issue warnings pointing at the inventory line rather than at pydantic's internals.
    for caught_warning in caught:
        message = caught_warning.message
        if isinstance(message, InlinePasswordWarning):
            index = inventory.node_names().index(message.node)
            node = inventory.nodes[index]
            where: tuple[str | int, ...] = ("nodes", index, "power", "password")
            if node.power.password is None:
                alternative = next(
                    i for i, p in enumerate(node.power_alternatives) if p.password is not None
                )
                where = ("nodes", index, "power_alternatives", alternative, "password")
            warnings.warn_explicit(message, InlinePasswordWarning, source, _line_of(tree, where))
        elif isinstance(message, _budgets.BudgetSpellingWarning):
            where = ("budgets", "overrides", message.written)
            warnings.warn_explicit(
                message, _budgets.BudgetSpellingWarning, source, _line_of(tree, where)
            )
        else:
            warnings.warn_explicit(
                message, caught_warning.category, caught_warning.filename, caught_warning.lineno
            )
    return inventory


def _parse_yaml(text: str, source: str) -> tuple[yaml.Node | None, object]:
    loader = _Loader(text)
    try:
        tree = loader.get_single_node()
        data = loader.construct_document(tree) if tree is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "syntax error"
        raise ConfigError(f"invalid YAML{where}: {problem}", source=source) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", source=source) from None
    finally:
        loader.dispose()
    return tree, data


# -- error rendering -------------------------------------------------------------------------


def _yaml_path(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_\-]+", part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


def _walk(data: object, loc: Sequence[str | int]) -> tuple[bool, object]:
    current = data
    for part in loc:
        in_dict = isinstance(current, dict) and part in current
        in_list = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if not (in_dict or in_list):
            return False, None
        current = current[part]  # type: ignore[index]
    return True, current


def _line_of(tree: yaml.Node | None, loc: Sequence[str | int]) -> int:
    """1-based line of the deepest YAML node on ``loc`` (0 when unknown)."""
    node = tree
    line = node.start_mark.line + 1 if node is not None else 0
    for part in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == part:
                    child = value_node
                    line = key_node.start_mark.line + 1
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


def _unwrap(annotation: object) -> list[object]:
    """The model classes an annotation can hold (through Optional, list, dict, Annotated)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, dict):
        out: list[object] = []
        for arg in typing.get_args(annotation):
            out.extend(_unwrap(arg))
        return out
    return [annotation]


def _keys(model: type[BaseModel]) -> list[str]:
    """The YAML keys of ``model`` (aliases where a field has one)."""
    return [field.alias or name for name, field in model.model_fields.items()]


def _model_at(loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` (None for a plain value)."""
    model: type[BaseModel] = Inventory
    for part in loc:
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        field = fields.get(part)
        if field is None:
            return None
        candidates = [
            c for c in _unwrap(field.annotation) if isinstance(c, type) and issubclass(c, BaseModel)
        ]
        if not candidates:
            return None
        model = candidates[0]
    return model


def _show(value: object) -> str:
    if isinstance(value, dict | list):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return repr(value)


def _valid_values(expected: str) -> str:
    """``"'a', 'b' or 'c'"`` (pydantic's literal_error ctx) -> ``"a, b, c"``."""
    values = re.findall(r"'([^']*)'", expected)
    return ", ".join(values) if values else expected


def _describe(error: Mapping[str, Any], data: object) -> tuple[tuple[str | int, ...], str]:
    loc: tuple[str | int, ...] = tuple(error["loc"])
    kind = error["type"]
    ctx = error.get("ctx") or {}
    secret = any(_is_secret_key(p) for p in loc)
    found, value = _walk(data, loc)
    shown = "the value" if secret else _show(value)
    exc = ctx.get("error")
    if isinstance(exc, _FieldError):
        loc = loc + exc.subpath
        return loc, exc.message
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        valid = _keys(parent) if parent else []
        key = str(loc[-1])
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return loc, f"unknown key {key!r}{hint}; valid keys: {', '.join(valid)}"
    if kind == "missing":
        return loc, "is required but missing"
    if kind in ("literal_error", "enum"):
        return (
            loc,
            f"{shown} is not valid; must be one of: {_valid_values(str(ctx.get('expected')))}",
        )
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        parent = _model_at(loc)
        keys = f" with keys: {', '.join(_keys(parent))}" if parent else ""
        return loc, f"{shown} is not valid; expected a mapping{keys}"
    if kind == "list_type":
        return loc, f"{shown} is not valid; expected a list"
    if kind == "too_short" and ctx.get("min_length") == 1:
        return loc, "must not be empty"
    scalar = found and not secret and not isinstance(value, dict | list)
    if kind == "value_error" and isinstance(exc, ValueError):
        message = str(exc)
        return loc, f"{shown}: {message}" if scalar and repr(value) not in message else message
    message = str(error["msg"])
    message = message[0].lower() + message[1:]
    return loc, f"{shown} is not valid: {message}" if scalar else message


def _config_error(
    exc: ValidationError, data: object, tree: yaml.Node | None, source: str
) -> ConfigError:
    errors = exc.errors(include_url=False, include_input=False)
    # A misspelt key shows up twice: as an unknown key and as a missing one. The unknown key
    # is the cause, so it goes first.
    errors.sort(key=lambda e: e["type"] != "extra_forbidden")
    described = [_describe(e, data) for e in errors]
    loc, message = described[0]
    where = []
    if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
        found, name = _walk(data, ("nodes", loc[1], "name"))
        if found and isinstance(name, str):
            where.append(f"node {name!r}")
    line = _line_of(tree, loc)
    if line:
        where.append(f"line {line}")
    text = f"{message} ({', '.join(where)})" if where else message
    others = [f"{_yaml_path(lo) or '(top level)'}: {m}" for lo, m in described[1:5]]
    if len(described) > 5:
        others.append(f"... and {len(described) - 5} more")
    if others:
        text += "\n  also " + "\n  also ".join(others)
    return ConfigError(text, source=source, field=_yaml_path(loc))
