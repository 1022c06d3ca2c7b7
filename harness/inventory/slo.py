"""The inventory's SLO sections: ``prometheus``, ``slos``, ``alerts`` and ``stop_conditions``.

::

    prometheus:
      url: https://prometheus.example:9090
      bearer_token_file: secrets/prom-token      # or bearer_token_env, or username +
      verify_tls: ca.crt                         # password_env / password_file (basic auth)
    slos:
      - name: web-availability
        expr: min(powercut_service_up{service="web"})
        comparison: ">="
        threshold: 1
        step: 5s
        for: 10s                                 # a breach counts once it lasts this long
    alerts:
      - name: APIServerDown                      # an alerting rule that must not fire
      - matcher: 'severity="critical"'           # or every alert whose labels match
    stop_conditions:
      - slo: web-availability                    # abort the scenario the moment it breaches
      - alert: APIServerDown

This module imports nothing of the harness but ``errors`` and ``budgets``: the inventory
imports it, and sits below everything else. Secrets are only named here (an environment
variable or a file); :mod:`harness.slo.client` reads them when it connects.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Final, Literal, Self
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.budgets import parse_duration
from harness.errors import ConfigError

__all__ = [
    "COMPARISONS",
    "AlertSpec",
    "PrometheusSpec",
    "SloSpec",
    "StopConditionSpec",
    "check_references",
]

Comparison = Literal["<", "<=", ">", ">=", "==", "!="]

#: What an SLO's ``comparison`` means: the objective holds at a point when
#: ``COMPARISONS[comparison](value, threshold)`` is true.
COMPARISONS: Final[dict[str, Callable[[float, float], bool]]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$")
_ALERT_NAME = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")
# One label matcher: name, operator, double-quoted value (escapes allowed).
_MATCHER = re.compile(r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*')
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _resolve_path(value: Path, info: ValidationInfo) -> Path:
    """Expand ``~``; relative paths resolve against the inventory file's directory."""
    path = value.expanduser()
    base = info.context.get("base_dir") if isinstance(info.context, dict) else None
    if not path.is_absolute() and isinstance(base, Path):
        path = base / path
    return path


def _duration(value: object) -> float:
    try:
        return parse_duration(value)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def tls_verification(value: object) -> object:
    """``true``/``false`` or a path to a CA bundle; anything else says what is valid (the
    inventory's BMC and Prometheus ``verify_tls`` alike)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip():
        if value.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
            raise ValueError(
                f"{value!r} is a quoted string; write true or false without quotes, "
                "or give the path of a CA bundle"
            )
        return Path(value.strip())
    if isinstance(value, Path):
        return value
    raise ValueError(f"{value!r} is not valid; must be true, false or the path of a CA bundle")


def _env_name(value: str | None) -> str | None:
    if value is not None and not _ENV_NAME.match(value):
        raise ValueError(f"{value!r} is not a valid environment variable name")
    return value


Seconds = Annotated[float, BeforeValidator(_duration)]
EnvName = Annotated[str | None, AfterValidator(_env_name)]
RelPath = Annotated[Path, AfterValidator(_resolve_path)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class PrometheusSpec(_Model):
    """Where the Prometheus HTTP API is and how to authenticate to it."""

    url: str = Field(description="base URL, 'http(s)://host:port[/prefix]'")
    bearer_token_env: EnvName = Field(default=None, description="env var holding a token")
    bearer_token_file: RelPath | None = Field(default=None, description="file holding a token")
    username: str | None = Field(default=None, description="basic auth user")
    password_env: EnvName = Field(default=None, description="basic auth: env var")
    password_file: RelPath | None = Field(default=None, description="basic auth: file")
    verify_tls: Annotated[bool | Path, BeforeValidator(tls_verification)] = Field(
        default=True, description="verify the server certificate; or a CA bundle path"
    )
    timeout: Seconds = Field(default=10.0, description="per request, seconds or '10s'")

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not a URL; expected 'http(s)://host:port'")
        if parts.username or parts.password:
            raise ValueError(
                "must not contain credentials; use username and password_env / "
                "password_file, or bearer_token_env / bearer_token_file"
            )
        try:
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            raise ValueError(f"{value!r} has an invalid port") from None
        if parts.query or parts.fragment:
            raise ValueError(f"{value!r} must not have a query or fragment")
        return value.rstrip("/")

    @field_validator("verify_tls", mode="after")
    @classmethod
    def _ca_bundle(cls, value: bool | Path, info: ValidationInfo) -> bool | Path:
        if isinstance(value, Path):
            path = _resolve_path(value, info)
            if not path.is_file():
                raise ValueError(f"CA bundle {str(path)!r} does not exist")
            return path
        return value

    @model_validator(mode="after")
    def _auth(self) -> Self:
        tokens = [k for k in ("bearer_token_env", "bearer_token_file") if getattr(self, k)]
        passwords = [k for k in ("password_env", "password_file") if getattr(self, k)]
        if len(tokens) > 1:
            raise ValueError("give only one of bearer_token_env, bearer_token_file")
        if len(passwords) > 1:
            raise ValueError("give only one of password_env, password_file")
        if tokens and (passwords or self.username):
            raise ValueError("give either a bearer token or basic auth (username), not both")
        if passwords and not self.username:
            raise ValueError("basic auth needs username as well as password_env / password_file")
        if self.username and not passwords:
            raise ValueError("basic auth needs password_env or password_file for username")
        return self


class SloSpec(_Model):
    """A service-level objective: a PromQL expression that must stay on the right side of a
    threshold at every evaluation step of a scenario's window."""

    name: str = Field(description="referred to by steps and stop_conditions")
    expr: str = Field(description="PromQL expression; every series it returns must hold")
    comparison: Comparison = Field(description="value <comparison> threshold must hold")
    threshold: float
    step: Seconds = Field(default=5.0, description="evaluation step, seconds or '5s'")
    for_: Seconds | None = Field(
        default=None,
        alias="for",
        description="a breach counts only once it lasts this long (like an alerting rule's for)",
    )
    description: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"{value!r} is not a valid SLO name (letters, digits, '_', '.', ':', '-'; "
                "at most 63 characters)"
            )
        return value

    @field_validator("expr")
    @classmethod
    def _expr(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    @property
    def objective_text(self) -> str:
        """``min(up) >= 1``, for step titles."""
        return f"{self.expr} {self.comparison} {self.threshold:g}"

    @property
    def objective(self) -> str:
        """``value >= 1``, for messages."""
        return f"value {self.comparison} {self.threshold:g}"

    def holds(self, value: float) -> bool:
        """Whether ``value`` meets the objective (NaN never does)."""
        return value == value and COMPARISONS[self.comparison](value, self.threshold)


class AlertSpec(_Model):
    """Alerts that must not fire: one alerting rule by ``name``, or every alert whose labels
    match ``matcher`` (PromQL label matchers, ``severity="critical",team=~"db.*"``)."""

    name: str | None = None
    matcher: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _ALERT_NAME.match(value):
            raise ValueError(f"{value!r} is not a valid alert name (a Prometheus metric name)")
        return value

    @field_validator("matcher")
    @classmethod
    def _matcher(cls, value: str | None) -> str | None:
        if value is None:
            return value
        text = value.strip().removeprefix("{").removesuffix("}")
        rest = text
        while rest:
            m = _MATCHER.match(rest)
            if m is None:
                raise ValueError(
                    f"{value!r} is not a list of label matchers; expected e.g. "
                    '\'severity="critical",team=~"db.*"\''
                )
            rest = rest[m.end() :].lstrip()
            if rest.startswith(","):
                rest = rest[1:]
            elif rest:
                raise ValueError(f"{value!r}: matchers must be separated by ','")
        if not text.strip():
            raise ValueError("must not be empty")
        return text.strip()

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.name is None) == (self.matcher is None):
            raise ValueError("give exactly one of name (an alerting rule) or matcher (labels)")
        return self

    @property
    def label(self) -> str:
        """How the report and messages name it: the alert name, or ``{matcher}``."""
        return self.name or "{" + str(self.matcher) + "}"

    @property
    def selector(self) -> str:
        """The label matchers selecting its firing samples in ``ALERTS``."""
        own = f'alertname="{self.name}"' if self.name else str(self.matcher)
        return f'alertstate="firing",{own}'


class StopConditionSpec(_Model):
    """An SLO or an alert that aborts a scenario the moment it breaches."""

    slo: str | None = Field(default=None, description="an SLO name from slos")
    alert: str | None = Field(
        default=None, description="an alert name or matcher, as written under alerts"
    )

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.slo is None) == (self.alert is None):
            raise ValueError("give exactly one of slo (an SLO name) or alert (an alert name)")
        return self

    @property
    def label(self) -> str:
        return f"SLO {self.slo}" if self.slo is not None else f"alert {self.alert}"


def check_references(
    prometheus: PrometheusSpec | None,
    slos: Sequence[SloSpec],
    alerts: Sequence[AlertSpec],
    stop_conditions: Sequence[StopConditionSpec],
) -> tuple[tuple[str | int, ...], str] | None:
    """The first cross-reference problem of the four sections, as (YAML path, message)."""
    for key, items in (("slos", slos), ("alerts", alerts), ("stop_conditions", stop_conditions)):
        if items and prometheus is None:
            return (key,), "needs a prometheus section (url and credentials)"
    seen: dict[str, int] = {}
    for i, slo in enumerate(slos):
        if slo.name in seen:
            return ("slos", i, "name"), f"duplicate SLO {slo.name!r} (also slos[{seen[slo.name]}])"
        seen[slo.name] = i
    alert_labels = {a.name or str(a.matcher) for a in alerts}
    for i, cond in enumerate(stop_conditions):
        if cond.slo is not None and cond.slo not in seen:
            valid = ", ".join(seen) or "(none: the inventory has no slos)"
            return ("stop_conditions", i, "slo"), (
                f"unknown SLO {cond.slo!r}; must be one of: {valid}"
            )
        if cond.alert is not None and cond.alert not in alert_labels:
            valid = ", ".join(sorted(alert_labels)) or "(none: the inventory has no alerts)"
            return ("stop_conditions", i, "alert"), (
                f"unknown alert {cond.alert!r}; must be one of those under alerts: {valid}"
            )
    return None


def slo_by_name(slos: Sequence[SloSpec], name: str) -> SloSpec:
    """The SLO ``name``; ``ConfigError`` naming the valid ones otherwise."""
    for slo in slos:
        if slo.name == name:
            return slo
    valid = ", ".join(s.name for s in slos) or "(none: the inventory has no slos)"
    raise ConfigError(f"unknown SLO {name!r}; the inventory's slos are: {valid}")


def alert_by_label(alerts: Sequence[AlertSpec], label: str) -> AlertSpec:
    for alert in alerts:
        if label in (alert.name, alert.matcher):
            return alert
    raise ConfigError(f"unknown alert {label!r}")
