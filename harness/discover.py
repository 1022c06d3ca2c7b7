"""An inventory from what the cluster knows: nodes, their roles and racks, and their BMCs.

``discover(client)`` reads the Node objects and, where the cluster has them, Metal3
``BareMetalHost`` objects, and ``render(...)`` writes an inventory a person finishes:

- **role**: ``control-plane`` when the node has the ``node-role.kubernetes.io/control-plane``
  (or the older ``master``) label, else ``worker``;
- **rack**: the ``topology.kubernetes.io/zone`` label (or the label given);
- **BMC**, first match wins:
  1. the node's annotation ``powercut.io/bmc`` (:data:`BMC_ANNOTATION`): a BMC address as
     Metal3 writes them, ``ipmi://10.0.0.11:623``, ``redfish://10.0.0.12`` (HTTPS),
     ``redfish+http://...``, ``idrac-redfish://...``; ``powercut.io/bmc-username`` may give
     the user name;
  2. the ``BareMetalHost`` that provisioned it (matched by the node's
     ``spec.providerID``, ``metal3://<namespace>/<host>/...`` or ``metal3://<uid>``, else by
     name): ``spec.bmc.address``, with ``disableCertificateVerification``; the credentials
     Secret is *named* in a comment, never read;
  3. none: a placeholder endpoint under ``.invalid`` marked ``TODO`` (preflight fails on it
     until it is filled in).

Credentials are left as references to fill in: ``password_env`` variables per BMC group,
``username: FILL-IN`` unless the annotation gives one. No secret is read or written.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

import yaml

from harness.clock import SYSTEM_CLOCK
from harness.errors import ConfigError, TemporaryError
from harness.kube.client import KubeClient
from harness.kube.names import (
    ANNOTATION_BMC,
    ANNOTATION_BMC_USERNAME,
    LABEL_CONTROL_PLANE,
    LABEL_MASTER,
    LABEL_ZONE,
)

__all__ = [
    "BMC_ANNOTATION",
    "BMC_USERNAME_ANNOTATION",
    "DiscoveredNode",
    "bmc_from_address",
    "discover",
    "render",
]

BMC_ANNOTATION: Final = ANNOTATION_BMC
BMC_USERNAME_ANNOTATION: Final = ANNOTATION_BMC_USERNAME
ZONE_LABEL: Final = LABEL_ZONE
CONTROL_PLANE_LABELS: Final = (LABEL_CONTROL_PLANE, LABEL_MASTER)
BMH_PATH: Final = "/apis/metal3.io/v1alpha1/baremetalhosts"
RETRY_S: Final = 30.0
T = TypeVar("T")
FILL_IN: Final = "FILL-IN"
PASSWORD_ENV: Final = "BMC_PASSWORD"  # noqa: S105 - a variable name, not a password

# Metal3's BMC address schemes (baremetal-operator pkg/hardwareutils/bmc) -> powercut driver.
_REDFISH_SCHEMES: Final = (
    "redfish",
    "redfish-virtualmedia",
    "redfish-uefihttp",
    "idrac-redfish",
    "idrac-virtualmedia",
    "ilo5-redfish",
)


@dataclass(frozen=True)
class Bmc:
    """A BMC as the inventory's power block needs it."""

    driver: str  # ipmi | redfish
    endpoint: str
    source: str  # where it was found, for the comment
    verify_tls: bool = True
    system_id: str | None = None
    username: str | None = None
    credentials: str | None = None  # "namespace/secret" holding them (never read)


@dataclass
class DiscoveredNode:
    name: str
    role: str
    rack: str | None
    address: str | None  # InternalIP, for the ssh block comment
    bmc: Bmc | None
    notes: list[str] = field(default_factory=list)


def bmc_from_address(address: str, source: str) -> Bmc:
    """``ipmi://host:623`` / ``redfish://host/redfish/v1/Systems/1`` / ... as a :class:`Bmc`.

    Raises ``ValueError`` naming the address and the schemes understood.
    """
    parts = urlsplit(address.strip())
    scheme = parts.scheme.lower()
    transport = "https"
    if "+" in scheme:
        scheme, transport = scheme.split("+", 1)
    if not parts.hostname:
        raise ValueError(f"{address!r} has no host; expected e.g. ipmi://10.0.0.11:623")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if scheme in ("ipmi", "libvirt"):
        return Bmc("ipmi", f"{host}:{parts.port or 623}", source)
    if scheme in _REDFISH_SCHEMES:
        if transport not in ("http", "https"):
            raise ValueError(f"{address!r}: transport {transport!r} is not http or https")
        port = f":{parts.port}" if parts.port else ""
        system = re.search(r"/Systems/([^/]+)", parts.path or "")
        return Bmc(
            "redfish",
            f"{transport}://{host}{port}",
            source,
            system_id=system.group(1) if system else None,
        )
    raise ValueError(
        f"{address!r}: scheme {parts.scheme!r} is not understood; expected ipmi://, "
        f"redfish://, redfish+http:// or one of {', '.join(_REDFISH_SCHEMES[1:])}"
    )


def _bmh_index(hosts: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each BareMetalHost under the keys a node can name it by: ``ns/name``, uid, name."""
    index: dict[str, Mapping[str, Any]] = {}
    for host in hosts:
        meta = host.get("metadata") or {}
        name, ns, uid = meta.get("name", ""), meta.get("namespace", ""), meta.get("uid", "")
        for key in (f"{ns}/{name}", uid, name):
            if key:
                index.setdefault(key, host)
    return index


def _bmh_for(node: Mapping[str, Any], index: Mapping[str, Mapping[str, Any]]) -> Any:
    provider = str((node.get("spec") or {}).get("providerID") or "")
    if provider.startswith("metal3://"):
        rest = provider.removeprefix("metal3://").strip("/").split("/")
        keys = ["/".join(rest[:2])] if len(rest) >= 2 else [rest[0]]
        for key in keys:
            if key in index:
                return index[key]
    return index.get(str((node.get("metadata") or {}).get("name", "")))


def _from_bmh(host: Mapping[str, Any]) -> Bmc:
    meta = host.get("metadata") or {}
    bmc = (host.get("spec") or {}).get("bmc") or {}
    where = f"BareMetalHost {meta.get('namespace')}/{meta.get('name')}"
    address = bmc.get("address")
    if not address:
        raise ValueError(f"{where} has no spec.bmc.address")
    found = bmc_from_address(str(address), where)
    secret = bmc.get("credentialsName")
    return Bmc(
        found.driver,
        found.endpoint,
        where,
        verify_tls=not bool(bmc.get("disableCertificateVerification")),
        system_id=found.system_id,
        credentials=f"{meta.get('namespace')}/{secret}" if secret else None,
    )


def _retrying(call: Callable[[], T], what: str, timeout_s: float = RETRY_S) -> T:
    """``call()``, retried on what may pass (429, 5xx, an unreachable server) until
    ``timeout_s``: a CRD just installed answers 429 while each API server initialises it."""
    deadline = time.monotonic() + timeout_s
    pause = 0.2
    while True:
        try:
            return call()
        except TemporaryError as exc:
            if time.monotonic() + pause > deadline:
                raise TemporaryError(f"could not {what} within {timeout_s:.0f}s: {exc}") from None
            SYSTEM_CLOCK.sleep(pause)
            pause = min(pause * 2, 2.0)


def discover(client: KubeClient, *, rack_label: str = ZONE_LABEL) -> list[DiscoveredNode]:
    """The cluster's nodes, sorted by role (control planes first) and name."""
    nodes, _ = _retrying(lambda: client.list("/api/v1/nodes"), "list the nodes")
    hosts_doc = _retrying(lambda: client.get_or_none(BMH_PATH), "list the BareMetalHosts")
    hosts = list((hosts_doc or {}).get("items") or []) if isinstance(hosts_doc, dict) else []
    index = _bmh_index(hosts)
    found: list[DiscoveredNode] = []
    for node in nodes:
        meta = node.get("metadata") or {}
        labels: Mapping[str, str] = meta.get("labels") or {}
        annotations: Mapping[str, str] = meta.get("annotations") or {}
        name = str(meta.get("name"))
        role = "control-plane" if any(k in labels for k in CONTROL_PLANE_LABELS) else "worker"
        addresses = (node.get("status") or {}).get("addresses") or []
        internal = next(
            (a.get("address") for a in addresses if a.get("type") == "InternalIP"), None
        )
        item = DiscoveredNode(name, role, labels.get(rack_label), internal, None)
        annotated = annotations.get(BMC_ANNOTATION)
        try:
            if annotated:
                bmc = bmc_from_address(annotated, f"annotation {BMC_ANNOTATION}")
                user = annotations.get(BMC_USERNAME_ANNOTATION)
                item.bmc = Bmc(**{**bmc.__dict__, "username": user}) if user else bmc
            else:
                host = _bmh_for(node, index)
                if host is not None:
                    item.bmc = _from_bmh(host)
        except ValueError as exc:
            item.notes.append(f"BMC not usable: {exc}")
        found.append(item)
    found.sort(key=lambda n: (n.role != "control-plane", n.name))
    return found


def render(
    nodes: Sequence[DiscoveredNode],
    *,
    kubeconfig: Path,
    context: str | None,
    name: str | None = None,
) -> str:
    """The inventory's YAML, with comments saying where each value came from and what is
    left to fill in. It loads as is (``powercut preflight`` then says what is missing)."""
    if not nodes:
        raise ConfigError("the cluster has no nodes: nothing to write")
    racks = sorted({n.rack for n in nodes if n.rack})
    lines = [
        "# powercut inventory, written by `powercut inventory discover` from the cluster.",
        "# Fill in what is marked FILL-IN or TODO, then check it: powercut preflight -i FILE",
        "# Credentials stay references: set BMC_PASSWORD (or use password_file) per BMC group.",
    ]
    head: dict[str, Any] = {}
    if name:
        head["name"] = name
    cluster: dict[str, Any] = {"kubeconfig": str(kubeconfig)}
    if context:
        cluster["context"] = context
    head["cluster"] = cluster
    lines.append(yaml.safe_dump(head, sort_keys=False).rstrip())
    if racks:
        lines.append("racks:")
        lines.extend("  - " + yaml.safe_dump({"name": r}).strip() for r in racks)
    lines.append("nodes:")
    for n in nodes:
        entry: dict[str, Any] = {"name": n.name, "role": n.role}
        if n.rack:
            entry["rack"] = n.rack
        lines.append("  - " + _block(entry, 4).lstrip())
        power: dict[str, Any]
        if n.bmc is None:
            lines.append(
                f"    # TODO: no BMC known (no {ANNOTATION_BMC} annotation, no BareMetalHost);"
            )
            lines.append("    # write its address here, or use driver: ssh with an ssh block.")
            power = {
                "driver": "ipmi",
                "endpoint": f"{n.name}.bmc.invalid:623",
                "username": FILL_IN,
                "password_env": PASSWORD_ENV,
            }
        else:
            b = n.bmc
            lines.append(f"    # BMC from {b.source}")
            if b.credentials:
                lines.append(
                    f"    # credentials: Secret {b.credentials} (username, password); not read"
                )
            power = {"driver": b.driver, "endpoint": b.endpoint, "username": b.username or FILL_IN}
            power["password_env"] = PASSWORD_ENV
            if b.driver == "redfish" and not b.verify_tls:
                power["verify_tls"] = False
            if b.system_id:
                power["system_id"] = b.system_id
        for note in n.notes:
            lines.append(f"    # {note}")
        lines.append("    power:")
        lines.append(_block(power, 6))
        if n.address:
            lines.append(f"    # ssh: {{host: {n.address}, user: FILL-IN, key_file: FILL-IN}}")
    return "\n".join(lines) + "\n"


def _block(value: Mapping[str, Any], indent: int) -> str:
    text = yaml.safe_dump(dict(value), sort_keys=False, default_flow_style=False).rstrip()
    return "\n".join(" " * indent + line for line in text.splitlines())
