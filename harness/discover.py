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

``probe(nodes)`` then asks each BMC host, read-only, what it offers (:func:`probe_redfish`):
the Redfish service root (open without credentials on Redfish services) gives the protocol,
its version, the vendor and whether it has a SessionService (then ``auth: session``); with
a user name and a password in the environment (``--password-env``), a GET of the Systems
collection gives the system ids (the one named after the node, or the only one, is filled
in as ``system_id``). An IPMI BMC whose host also serves Redfish is noted. What could not
be learnt is marked ``TODO`` with the reason. Nothing is ever sent but GETs.
"""

from __future__ import annotations

import os
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
class RedfishFacts:
    """What a read-only look at a Redfish service showed (:func:`probe_redfish`)."""

    url: str
    offered: bool
    version: str | None = None
    vendor: str | None = None
    sessions: bool = False
    #: (id, Name) of each ComputerSystem; None: not read (no credentials, or refused).
    systems: list[tuple[str, str]] | None = None
    problem: str | None = None  # why something could not be learnt

    def summary(self) -> str:
        if not self.offered:
            return f"no Redfish service at {self.url}" + (
                f" ({self.problem})" if self.problem else ""
            )
        parts = [f"Redfish {self.version or '?'} at {self.url}"]
        if self.vendor:
            parts.append(f"Vendor {self.vendor}")
        parts.append("SessionService: yes" if self.sessions else "SessionService: no")
        if self.systems is not None:
            listed = ", ".join(f"{i} ({n})" for i, n in self.systems) or "none"
            parts.append(f"Systems: {listed}")
        return "; ".join(parts)


@dataclass
class DiscoveredNode:
    name: str
    role: str
    rack: str | None
    address: str | None  # InternalIP, for the ssh block comment
    bmc: Bmc | None
    notes: list[str] = field(default_factory=list)
    redfish: RedfishFacts | None = None  # what probe() learnt


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


#: One probe request's budget (connect and read).
PROBE_TIMEOUT_S: Final = 5.0


def probe_redfish(
    url: str,
    *,
    verify: bool | str = True,
    username: str | None = None,
    password: str | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> RedfishFacts:
    """GET ``url``/redfish/v1/ (no credentials) and, given ``username`` and ``password``,
    its Systems collection and each system. Only GETs; never raises for what the BMC
    answers (the problem is in the facts)."""
    import requests

    base = url.rstrip("/")
    try:
        root = requests.get(f"{base}/redfish/v1/", verify=verify, timeout=timeout_s)
    except requests.exceptions.SSLError as exc:
        return RedfishFacts(base, False, problem=f"TLS verification failed: {_short(exc)}")
    except requests.exceptions.RequestException as exc:
        return RedfishFacts(base, False, problem=f"no answer: {_short(exc)}")
    doc = _json(root)
    if root.status_code != 200 or "RedfishVersion" not in doc:
        return RedfishFacts(base, False, problem=f"/redfish/v1/ answered HTTP {root.status_code}")
    facts = RedfishFacts(
        base,
        True,
        version=str(doc.get("RedfishVersion")),
        vendor=str(doc["Vendor"]) if doc.get("Vendor") else None,
        sessions="SessionService" in doc or "Sessions" in (doc.get("Links") or {}),
    )
    if not (username and password):
        facts.problem = "system ids not read: no credentials given (--password-env)"
        return facts
    systems_path = (doc.get("Systems") or {}).get("@odata.id", "/redfish/v1/Systems")
    try:
        facts.systems = _systems(base, systems_path, (username, password), verify, timeout_s)
    except (requests.exceptions.RequestException, ValueError) as exc:
        facts.problem = f"system ids not read: {_short(exc)}"
    return facts


def _systems(
    base: str, path: str, auth: tuple[str, str], verify: bool | str, timeout_s: float
) -> list[tuple[str, str]]:
    import requests

    def get(p: str) -> dict[str, Any]:
        answer = requests.get(base + p, auth=auth, verify=verify, timeout=timeout_s)
        if answer.status_code != 200:
            raise ValueError(f"GET {p} answered HTTP {answer.status_code}")
        return _json(answer)

    out = []
    for member in get(path).get("Members") or []:
        system = get(str(member.get("@odata.id")))
        out.append((str(system.get("Id")), str(system.get("Name", ""))))
    return out


def _json(response: Any) -> dict[str, Any]:
    try:
        doc = response.json()
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def probe(
    nodes: Sequence[DiscoveredNode],
    *,
    verify: bool | str = True,
    username: str | None = None,
    password_env: str = PASSWORD_ENV,
    probe_one: Callable[..., RedfishFacts] = probe_redfish,
) -> None:
    """Fill in what each node's BMC shows read-only (see the module docstring): Redfish
    offered or not, ``system_id``, ``auth``; notes say what was not learnt and why."""
    password = os.environ.get(password_env) or None
    cache: dict[str, RedfishFacts] = {}
    for n in nodes:
        if n.bmc is None:
            continue
        url = _redfish_url(n.bmc)
        user = n.bmc.username or username
        if url not in cache:
            cache[url] = probe_one(
                url,
                verify=verify if n.bmc.verify_tls else False,
                username=user,
                password=password,
            )
        n.redfish = cache[url]
        _apply(n, n.redfish)


def _redfish_url(bmc: Bmc) -> str:
    if bmc.driver == "redfish":
        return bmc.endpoint
    host = bmc.endpoint.rsplit(":", 1)[0]  # an IPMI BMC's host: does it serve Redfish too?
    return f"https://{host}"


def _apply(n: DiscoveredNode, facts: RedfishFacts) -> None:
    bmc = n.bmc
    if bmc is None:
        return
    if bmc.driver != "redfish":
        if facts.offered:
            n.notes.append(f"this BMC also offers {facts.summary()}: driver redfish may do")
        return
    if not facts.offered:
        n.notes.append(f"TODO: {facts.summary()}")
        return
    if facts.systems is not None and bmc.system_id is None:
        named = [i for i, name in facts.systems if name == n.name]
        only = [i for i, _name in facts.systems] if len(facts.systems) == 1 else []
        chosen = named or only
        if len(chosen) == 1:
            n.bmc = Bmc(**{**bmc.__dict__, "system_id": chosen[0]})
        else:
            n.notes.append(
                f"TODO system_id: {len(facts.systems)} systems, none (or several) named "
                f"{n.name!r}; choose one of: {', '.join(i for i, _ in facts.systems)}"
            )
    elif bmc.system_id is None and facts.problem:
        n.notes.append(f"TODO system_id: {facts.problem}")


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
            if b.driver == "redfish" and n.redfish is not None and n.redfish.offered:
                lines.append(f"    # probed: {n.redfish.summary()}")
                power["auth"] = "session" if n.redfish.sessions else "basic"
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
