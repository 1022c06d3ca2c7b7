"""The inventory's validated field types: host:port pairs, paths relative to the inventory
file, node names, namespaces, label selectors, and which keys hold secrets.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, NamedTuple

from pydantic import (
    AfterValidator,
    ValidationInfo,
)

# --------------------------------------------------------------------------------------------
# Small parsers and validated types
# --------------------------------------------------------------------------------------------


class HostPort(NamedTuple):
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


_HOST_LABEL = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_\-]{0,61}[A-Za-z0-9_])?$")


def valid_host(host: str) -> bool:
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
    if not host or not valid_host(host):
        raise ValueError(f"{text!r} has no valid host; expected 'host:port'")
    if port_text is None:
        if default_port is None:
            raise ValueError(f"{text!r} has no port; expected 'host:port'")
        return HostPort(host, default_port)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{text!r} has an invalid port; expected 'host:port', port 1-65535")
    return HostPort(host, int(port_text))


def resolve_path(value: Path, info: ValidationInfo) -> Path:
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


RelPath = Annotated[Path, AfterValidator(resolve_path)]
"""A path; relative values resolve against the directory of the inventory file."""

NonBlank = Annotated[str, AfterValidator(_not_blank)]

_DNS_SUBDOMAIN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def check_node_name(value: str) -> str:
    if not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes node name "
            "(lowercase letters, digits, '-' and '.', at most 253 characters)"
        )
    return value


def check_namespace(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a valid namespace "
            "(lowercase letters, digits and '-', at most 63 characters)"
        )
    return value


def check_selector(value: object) -> object:
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


def is_secret_key(key: object) -> bool:
    return (
        isinstance(key, str) and "password" in key.lower() and not key.endswith(("_env", "_file"))
    )


def walk_data(data: object, loc: Sequence[str | int]) -> tuple[bool, object]:
    current = data
    for part in loc:
        in_dict = isinstance(current, dict) and part in current
        in_list = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if not (in_dict or in_list):
            return False, None
        current = current[part]  # type: ignore[index]
    return True, current
