"""What a lab is made of: nodes, racks, ports and timings, decided before anything starts."""

from __future__ import annotations

import errno
import ipaddress
import json
import socket
import string
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.errors import ConfigError
from harness.kube.names import (
    LAB_VOLUME_GATE,
    LABEL_CONTROL_PLANE,
    LABEL_HOSTNAME,
    LABEL_LAB,
    LABEL_WORKER,
    LABEL_ZONE,
    NO_SCHEDULE,
    TAINT_CONTROL_PLANE,
)
from harness.lab.bmc.profiles import PROFILES
from harness.settings import Settings, or_environment

TimingName = Literal["fast", "upstream"]
TIMING_NAMES: tuple[str, ...] = ("fast", "upstream")
CSI_DRIVER = "lab.csi.powercut.io"
# Pods annotated "waiting" are held back from Ready until their volumes are attached to
# their node (harness/lab/storage.py releases them; the pod-ready stage checks it).
VOLUME_GATE = LAB_VOLUME_GATE
LAB_NAMESPACE = "lab"
PORT_SLOTS = 400  # IPMI at base + 200 + i, SSH at base + 200 + slots + i (slots >= 400)
# Every node's pod CIDR is a /24 of the cluster's: 1,024 of them (10.244.0.0/24 ..
# 10.247.255.0/24), so node 256 gets 10.245.0.0/24 where a /16 ran out.
CLUSTER_CIDR = "10.244.0.0/14"
NODE_CIDR_MASK = 24
MAX_NODES = 1000  # within the 1,024 node CIDRs
#: The issuer of the lab's own ServiceAccount tokens (an authentication config's JWT
#: issuers must differ from it: kube-apiserver refuses the overlap).
LAB_SA_ISSUER = "https://kubernetes.default.svc"
#: The AuthenticationConfiguration versions kube-apiserver v1.36 reads.
AUTHN_VERSIONS = ("apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1")
#: Where ``lab up --authentication-config`` keeps its copy (kube-apiserver re-reads it when
#: it changes).
AUTHN_FILE = "authentication-config.yaml"
MAX_BOOT_S = 3600.0


@dataclass(frozen=True)
class Timings:
    """Component flags that set how fast the cluster reacts to a dead node."""

    name: str
    node_monitor_grace_s: int
    node_monitor_period_s: int
    node_lease_s: int
    toleration_s: int
    leader_lease_s: int
    leader_renew_s: int
    leader_retry_s: int
    #: Default seconds from a power-on to the node's processes (kubelet first) starting:
    #: a server's POST and boot. Longer than the grace period plus the monitor period, so a
    #: reboot (off and on again at once) makes the node NotReady, as a real one does.
    boot_s: int

    @staticmethod
    def named(name: str) -> Timings:
        if name == "fast":
            # A whole node-loss scenario fits in about a minute. The grace period (12 s)
            # outlasts etcd's stall when its leader dies with a control-plane node: requests
            # in flight wait out etcd's request timeout (~7 s), so healthy nodes' lease
            # renewals stall ~9 s; with 8 s, a rack outage that took the etcd leader marked
            # healthy nodes NotReady for an instant (seen in CI, 2026-11-25).
            # Boot 15 s: NotReady comes at most grace + monitor period (13 s) after the
            # last heartbeat, so a reboot is seen for about 2 s or more.
            return Timings("fast", 12, 1, 8, 10, 8, 6, 2, 15)
        if name == "upstream":
            # Kubernetes 1.36 defaults: grace 50 s, monitor period 5 s, lease 40 s,
            # not-ready/unreachable tolerations 300 s, leader election 15/10/2 s.
            # Boot 60 s, as a small server's POST and boot at the least.
            return Timings("upstream", 50, 5, 40, 300, 15, 10, 2, 60)
        raise ConfigError(
            f"unknown timing profile {name!r}; valid: {', '.join(TIMING_NAMES)}",
            field="--timings",
        )


@dataclass(frozen=True)
class NodeSpec:
    name: str
    role: Literal["control-plane", "worker"]
    rack: str
    index: int  # position among all nodes: decides its ports and addresses
    cp_index: int | None = None  # position among control-plane nodes

    @property
    def pod_cidr(self) -> str:
        return node_pod_cidr(self.index)

    @property
    def node_ip(self) -> str:
        # Loopback, so nothing that ever tries to reach a "kubelet" leaves this machine.
        return f"127.10.{self.index // 250}.{self.index % 250 + 1}"


def node_pod_cidr(index: int) -> str:
    """The ``index``-th /24 of the cluster CIDR (node 0: 10.244.0.0/24, node 256: 10.245.0.0/24)."""
    net = ipaddress.ip_network(CLUSTER_CIDR)
    size = 2 ** (32 - NODE_CIDR_MASK)
    if not 0 <= index < net.num_addresses // size:
        raise ValueError(f"node index {index} outside {CLUSTER_CIDR} in /{NODE_CIDR_MASK}s")
    return f"{net.network_address + index * size}/{NODE_CIDR_MASK}"


def port_span(nodes: int) -> int:
    """Ports a lab of ``nodes`` nodes takes from its base: 1000 up to 400 nodes (the plan
    labs always had), then 200 + two per node, rounded up to a thousand."""
    slots = max(PORT_SLOTS, nodes)
    return -(-(200 + 2 * slots) // 1000) * 1000


@dataclass(frozen=True)
class Ports:
    base: int
    slots: int = PORT_SLOTS  # IPMI and SSH ports per lab: max(400, nodes)

    @property
    def cluster(self) -> int:  # HAProxy front end (or the single API server)
        return self.base

    @property
    def redfish(self) -> int:
        return self.base + 1

    def redfish_vendor(self, profile: str) -> int:
        """The port of a vendor profile's Redfish BMC (docs/bmc.md): base + 2 onwards, in
        the order of :data:`~harness.lab.bmc.profiles.PROFILES`."""
        return self.base + 2 + list(PROFILES).index(profile)

    def etcd_client(self, cp: int) -> int:
        return self.base + 10 + cp * 10

    def etcd_peer(self, cp: int) -> int:
        return self.base + 11 + cp * 10

    def apiserver(self, cp: int) -> int:
        return self.base + 12 + cp * 10

    def controller_manager(self, cp: int) -> int:
        return self.base + 13 + cp * 10

    def scheduler(self, cp: int) -> int:
        return self.base + 14 + cp * 10

    def health(self, i: int) -> int:
        return self.base + 100 + i

    @property
    def metrics(self) -> int:  # the lab's exporter: service probes and power as metrics
        return self.base + 120

    @property
    def prometheus(self) -> int:
        return self.base + 121

    def ipmi(self, node: int) -> int:
        return self.base + 200 + node

    def ssh(self, node: int) -> int:
        return self.base + 200 + self.slots + node


def node_labels_and_taints(n: NodeSpec) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The labels and taints of a lab node's Node object (the rack is its zone)."""
    labels = {
        LABEL_HOSTNAME: n.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        LABEL_ZONE: n.rack,
        "type": "kwok",
        LABEL_LAB: "true",
    }
    taints = []
    if n.role == "control-plane":
        labels[LABEL_CONTROL_PLANE] = ""
        taints.append({"key": TAINT_CONTROL_PLANE, "effect": NO_SCHEDULE})
    else:
        labels[LABEL_WORKER] = ""
    return labels, taints


@dataclass
class LabSpec:
    state_dir: str
    racks: int = 3
    workers_per_rack: int = 3
    control_planes: int = 3
    timings: str = "fast"
    base_port: int = 21000
    workloads: bool = False
    binaries: dict[str, str] = field(default_factory=dict)
    services: list[str] = field(default_factory=list)
    prometheus: str = ""  # the prometheus binary, when the lab runs one
    #: Seconds from a power-on to the node's processes starting (its POST and boot), for
    #: every node; None: the timing profile's ``boot_s``.
    boot_seconds: float | None = None
    #: The same per node (node name -> seconds), over ``boot_seconds``.
    node_boot_seconds: dict[str, float] = field(default_factory=dict)
    expose: str = ""  # one more address serving the runner-facing endpoints (expose.py)
    #: The Redfish vendor profile of a node's BMC (node name, or ``*`` for every node ->
    #: profile name; docs/bmc.md); a node not named gets the lab's own BMC.
    redfish_profiles: dict[str, str] = field(default_factory=dict)
    #: Let the ports overlap the kernel's ephemeral range (``lab up --allow-ephemeral-ports``).
    allow_ephemeral_ports: bool = False
    #: The API servers' ``--authentication-config`` (the copy in the state directory, made
    #: by ``lab up --authentication-config``), or "" for none.
    authentication_config: str = ""

    def __post_init__(self) -> None:
        checks: list[tuple[str, bool, str]] = [
            ("--racks", 1 <= self.racks <= 26, "an integer from 1 to 26"),
            (
                "--workers-per-rack",
                0 <= self.workers_per_rack <= MAX_NODES,
                f"an integer 0-{MAX_NODES}",
            ),
            ("--control-planes", self.control_planes in (1, 3, 5), "1, 3 or 5"),
        ]
        for flag, ok, valid in checks:
            if not ok:
                value = getattr(self, flag.lstrip("-").replace("-", "_"))
                raise ConfigError(f"invalid value {value!r}; valid: {valid}", field=flag)
        Timings.named(self.timings)
        if self.node_count > MAX_NODES:
            raise ConfigError(
                f"{self.node_count} nodes; valid: at most {MAX_NODES} nodes per lab (racks x "
                f"workers-per-rack + control planes; each gets a /{NODE_CIDR_MASK} of "
                f"{CLUSTER_CIDR})",
                field="--workers-per-rack",
            )
        valid_s = f"seconds from 0 to {MAX_BOOT_S:g}"
        if self.boot_seconds is not None and not _seconds_ok(self.boot_seconds):
            raise ConfigError(
                f"invalid value {self.boot_seconds!r}; valid: {valid_s}", field="--boot-seconds"
            )
        names = [n.name for n in self.nodes()]
        for node, seconds in self.node_boot_seconds.items():
            if node not in names:
                raise ConfigError(
                    f"no node {node!r} in this lab; valid: {', '.join(names)}",
                    field="--node-boot-seconds",
                )
            if not _seconds_ok(seconds):
                raise ConfigError(
                    f"invalid value {seconds!r} for {node}; valid: {valid_s}",
                    field="--node-boot-seconds",
                )
        for node, name in self.redfish_profiles.items():
            if node != "*" and node not in names:
                raise ConfigError(
                    f"no node {node!r} in this lab; valid: *, {', '.join(names)}",
                    field="--redfish-profile",
                )
            if name not in PROFILES:
                raise ConfigError(
                    f"unknown Redfish profile {name!r} for {node}; valid: {', '.join(PROFILES)}",
                    field="--redfish-profile",
                )
        span = self.port_span
        if not 1024 <= self.base_port <= 65535 - span:
            raise ConfigError(
                f"invalid value {self.base_port!r}; valid: a port from 1024 to {65535 - span} "
                f"(a lab of {self.node_count} nodes takes {span} ports)",
                field="--base-port",
            )
        low, high = ephemeral_port_range()
        if (
            self.base_port <= high
            and self.base_port + span >= low
            and not self.allow_ephemeral_ports
        ):
            raise ConfigError(
                f"ports {self.base_port}-{self.base_port + span - 1} overlap the kernel's "
                f"ephemeral range {low}-{high}, where outgoing connections would take lab "
                f"ports; valid: a base port from 1024 to {low - span - 1} (or "
                "--allow-ephemeral-ports)",
                field="--base-port",
            )

    @property
    def node_count(self) -> int:
        return self.racks * self.workers_per_rack + self.control_planes

    @property
    def port_span(self) -> int:
        """The ports this lab takes: base .. base + span - 1."""
        return port_span(self.node_count)

    @property
    def root(self) -> Path:
        return Path(self.state_dir)

    @property
    def ports(self) -> Ports:
        return Ports(self.base_port, max(PORT_SLOTS, self.node_count))

    @property
    def timing(self) -> Timings:
        return Timings.named(self.timings)

    def boot_s(self, node: str) -> float:
        """Seconds from a power-on of ``node`` to its processes starting."""
        if node in self.node_boot_seconds:
            return float(self.node_boot_seconds[node])
        if self.boot_seconds is not None:
            return float(self.boot_seconds)
        return float(self.timing.boot_s)

    def rack_names(self) -> list[str]:
        return [f"rack-{string.ascii_lowercase[i]}" for i in range(self.racks)]

    def nodes(self) -> list[NodeSpec]:
        racks = self.rack_names()
        out: list[NodeSpec] = []
        for c in range(self.control_planes):
            out.append(NodeSpec(f"cp-{c + 1}", "control-plane", racks[c % len(racks)], len(out), c))
        for r, rack in enumerate(racks):
            for w in range(self.workers_per_rack):
                letter = string.ascii_lowercase[r]
                out.append(NodeSpec(f"w-{letter}{w + 1}", "worker", rack, len(out)))
        return out

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes():
            if n.name == name:
                return n
        raise KeyError(name)

    def redfish_profile(self, node: str) -> str | None:
        """The vendor profile of ``node``'s Redfish BMC, or None (the lab's own)."""
        return self.redfish_profiles.get(node, self.redfish_profiles.get("*"))

    def redfish_profiles_used(self) -> list[str]:
        """The vendor profiles some node's BMC plays, in :data:`PROFILES` order."""
        used = {self.redfish_profile(n.name) for n in self.nodes()}
        return [name for name in PROFILES if name in used]

    def all_ports(self) -> dict[int, str]:
        """Every TCP port the lab will listen on, with what listens there."""
        p = self.ports
        out = {p.cluster: "cluster endpoint", p.redfish: "Redfish BMC"}
        for name in self.redfish_profiles_used():
            out[p.redfish_vendor(name)] = f"Redfish BMC, {name} profile"
        for c in range(self.control_planes):
            out[p.etcd_client(c)] = f"etcd cp-{c + 1} client"
            out[p.etcd_peer(c)] = f"etcd cp-{c + 1} peer"
            out[p.apiserver(c)] = f"kube-apiserver cp-{c + 1}"
            out[p.controller_manager(c)] = f"kube-controller-manager cp-{c + 1}"
            out[p.scheduler(c)] = f"kube-scheduler cp-{c + 1}"
        for n in self.nodes():
            out[p.ipmi(n.index)] = f"IPMI BMC of {n.name} (udp)"
            out[p.ssh(n.index)] = f"SSH of {n.name}"
        for i in range(8):
            out[p.health(i)] = "service health endpoint"
        out[p.metrics] = "lab metrics exporter"
        out[p.prometheus] = "Prometheus"
        return out

    def exposed_ports(self) -> tuple[list[int], list[int]]:
        """The TCP and UDP ports a runner uses: API servers, BMCs, SSH, services' health
        endpoints, Prometheus (what ``--expose`` forwards)."""
        p = self.ports
        tcp = [p.cluster, p.redfish, *(p.apiserver(c) for c in range(self.control_planes))]
        tcp += [p.redfish_vendor(name) for name in self.redfish_profiles_used()]
        tcp += [p.ssh(n.index) for n in self.nodes()]
        tcp += [p.health(i) for i in range(len(self.services))]
        if self.prometheus:
            tcp.append(p.prometheus)
        return tcp, [p.ipmi(n.index) for n in self.nodes()]

    def tls_hosts(self) -> tuple[str, ...]:
        """The names the lab's server certificates carry."""
        return ("127.0.0.1", "localhost", *((self.expose,) if self.expose else ()))

    def save(self) -> None:
        (self.root / "lab.json").write_text(json.dumps(asdict(self), indent=2))

    @staticmethod
    def load(state_dir: Path) -> LabSpec:
        data: dict[str, Any] = json.loads((state_dir / "lab.json").read_text())
        return LabSpec(**data)


def check_authentication_config(path: Path) -> str:
    """The text of an AuthenticationConfiguration file for the lab's API servers, checked
    before anything starts: its kind and version, and each JWT authenticator's issuer
    (https, not the lab's own ServiceAccount issuer), audiences and username mapping.
    kube-apiserver checks the rest (CEL expressions, the CA) and refuses to start on it."""
    import yaml

    flag = "--authentication-config"
    try:
        text = path.read_text()
        doc = yaml.safe_load(text)
    except OSError as exc:
        raise ConfigError(f"cannot read it: {exc.strerror}", source=str(path), field=flag) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"not YAML: {exc}", source=str(path), field=flag) from None
    if not isinstance(doc, dict) or doc.get("kind") != "AuthenticationConfiguration":
        raise ConfigError(
            "not an AuthenticationConfiguration; valid: kind: AuthenticationConfiguration",
            source=str(path),
            field="kind",
        )
    if doc.get("apiVersion") not in AUTHN_VERSIONS:
        raise ConfigError(
            f"apiVersion {doc.get('apiVersion')!r}; valid: {', '.join(AUTHN_VERSIONS)}",
            source=str(path),
            field="apiVersion",
        )
    jwt = doc.get("jwt") or []
    if not isinstance(jwt, list):
        raise ConfigError("must be a list of JWT authenticators", source=str(path), field="jwt")
    for i, auth in enumerate(jwt):
        _check_jwt(auth if isinstance(auth, dict) else {}, f"jwt[{i}]", str(path))
    return text


def _check_jwt(auth: dict[str, Any], where: str, source: str) -> None:
    issuer = auth.get("issuer")
    if not isinstance(issuer, dict):
        issuer = {}
    url = str(issuer.get("url") or "")
    if not url.startswith("https://"):
        raise ConfigError(
            f"{url!r}; valid: an https:// URL, the iss claim of the tokens",
            source=source,
            field=f"{where}.issuer.url",
        )
    if url.rstrip("/") == LAB_SA_ISSUER:
        raise ConfigError(
            f"{url!r} is the lab's own ServiceAccount issuer; valid: another issuer",
            source=source,
            field=f"{where}.issuer.url",
        )
    audiences = issuer.get("audiences")
    if not isinstance(audiences, list) or not audiences or not all(audiences):
        raise ConfigError(
            "valid: a non-empty list of audiences (the tokens' aud claim)",
            source=source,
            field=f"{where}.issuer.audiences",
        )
    mappings = auth.get("claimMappings")
    if not isinstance(mappings, dict) or not isinstance(mappings.get("username"), dict):
        raise ConfigError(
            "missing; valid: {claim: sub, prefix: ...} or {expression: ...}",
            source=source,
            field=f"{where}.claimMappings.username",
        )


def _seconds_ok(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= MAX_BOOT_S
    )


def ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux default if unknown)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def default_state_dir(settings: Settings | None = None) -> Path:
    """POWERCUT_LAB_DIR (docs/settings.md), from ``settings`` or the environment now."""
    return or_environment(settings).lab_dir


def busy_ports(ports: dict[int, str]) -> list[str]:
    """Ports someone else already holds (TCP, or UDP for the IPMI BMCs)."""
    busy = []
    for port, what in sorted(ports.items()):
        kind = socket.SOCK_DGRAM if "(udp)" in what else socket.SOCK_STREAM
        with socket.socket(socket.AF_INET, kind) as s:
            if kind == socket.SOCK_STREAM:
                # As servers do: connections lingering in TIME_WAIT do not hold the port.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    busy.append(f"{port} ({what})")
                else:
                    raise
    return busy
