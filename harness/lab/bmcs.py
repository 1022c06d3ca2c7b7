"""Wire the lab's nodes to their BMC endpoints: Redfish, IPMI and SSH on loopback.

Every node gets a Redfish system (one emulator for the lab), an IPMI 2.0 BMC on its own UDP
port and an SSH server on its own TCP port. All three act on the same switch: the node's
kwok process (and, on control-plane nodes, its etcd member and control-plane components).
Credentials are generated per lab under ``<state>/creds`` and referenced from the
inventory by file, never printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.lab.bmc.creds import BMC_USER, ensure_lab_credentials, known_hosts_line
from harness.power.base import PowerState

if TYPE_CHECKING:
    from harness.lab.supervisor import Lab


class NodeTarget:
    """A lab node's power switch, as its BMCs see it."""

    def __init__(self, lab: Lab, name: str) -> None:
        self.lab = lab
        self.name = name

    def power_state(self) -> PowerState:
        return self.lab.power_state(self.name)

    def power_on(self) -> None:
        self.lab.power_on(self.name)

    def power_off(self, graceful: bool) -> None:
        self.lab.power_off(self.name, graceful=graceful)

    def reset(self) -> None:
        self.lab.reset(self.name)

    # -- what the node's own OS can do (the SSH server's partition and kubelet commands) --

    def partition(self, *, heal_after_s: float) -> None:
        self.lab.cut_off(self.name, "partition", undo_after_s=heal_after_s)

    def heal(self) -> None:
        self.lab.reconnect(self.name, "partition")

    def stop_kubelet(self, *, restart_after_s: float) -> None:
        self.lab.cut_off(self.name, "kubelet", undo_after_s=restart_after_s)

    def start_kubelet(self) -> None:
        self.lab.reconnect(self.name, "kubelet")

    def cut_storage(self, *, heal_after_s: float) -> None:
        self.lab.cut_storage(self.name, undo_after_s=heal_after_s)

    def heal_storage(self) -> None:
        self.lab.heal_storage(self.name)


class NodeOs(NodeTarget):
    """The node as its own OS (its SSH server) sees it: up once booted, so the SSH server
    answers no connection while the node POSTs and boots, as on a real server."""

    def power_state(self) -> PowerState:
        return self.lab.os_state(self.name)


def start_bmcs(lab: Lab) -> list[Any]:
    # The protocol servers are imported here, in the supervisor only: sushy-tools builds
    # its Flask application at import time, and every other command (and an install
    # without the ``lab`` extra) must not pay for or need it.
    from harness.lab.bmc.ipmi import IpmiServer
    from harness.lab.bmc.profiles import PROFILES
    from harness.lab.bmc.redfish import RedfishServer
    from harness.lab.bmc.ssh import SshServer

    spec = lab.spec
    creds = ensure_lab_credentials(
        lab.root / "creds", username=BMC_USER, tls_hosts=spec.tls_hosts()
    )
    targets = {n.name: NodeTarget(lab, n.name) for n in lab.nodes}
    started: list[Any] = []
    try:
        redfish = RedfishServer(
            list(targets.values()),
            port=spec.ports.redfish,
            username=creds.username,
            password=creds.password,
            certfile=creds.tls_cert,
            keyfile=creds.tls_key,
            work_dir=lab.root,
            vendors=[
                (PROFILES[name], spec.ports.redfish_vendor(name))
                for name in spec.redfish_profiles_used()
            ],
        )
        redfish.start()
        started.append(redfish)
        ipmi = IpmiServer(
            {spec.ports.ipmi(n.index): targets[n.name] for n in lab.nodes},
            username=creds.username,
            password=creds.password,
        )
        ipmi.start()
        started.append(ipmi)
        lines = []
        for n in lab.nodes:
            ssh = SshServer(
                NodeOs(lab, n.name),
                port=spec.ports.ssh(n.index),
                host_key_path=creds.ssh_host_key,
                authorized_keys=[creds.ssh_client_public_key],
            )
            ssh.start()
            started.append(ssh)
            for host in ("127.0.0.1", *((spec.expose,) if spec.expose else ())):
                lines.append(
                    known_hosts_line(host, spec.ports.ssh(n.index), creds.ssh_host_public_key)
                )
        (creds.directory / "known_hosts").write_text("\n".join(lines) + "\n")
    except BaseException:
        for s in reversed(started):
            s.stop()
        raise
    return started
