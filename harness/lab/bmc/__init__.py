"""The lab's BMC endpoints: real Redfish, IPMI and SSH servers on 127.0.0.1, acting on nodes.

- ``target``: ``PowerTarget`` (what a BMC acts on), ``CallbackTarget`` (wires one to
  callables) and ``MemoryTarget`` (for tests).
- ``redfish``: ``RedfishServer``, sushy-tools' emulator in-process over HTTPS (one per process).
- ``ipmi``: ``IpmiServer``, pyghmi BMCs (IPMI 2.0 lanplus, cipher suite 17 by default, an
  OPERATOR user), one port per node.
- ``ssh``: ``SshServer``, a paramiko server per node (publickey auth, power commands).
- ``creds``: the password, SSH keys and TLS certificates a lab needs, as 0600 files.

All servers run in the calling process (threads), start with ``start()`` (which returns
once they listen) and stop with ``stop()``; they are also context managers. The protocol
modules are imported on demand so that importing this package stays cheap (sushy-tools
builds its Flask application at import time).

In the lab supervisor (one long-lived process)::

    from harness.lab.bmc.creds import ensure_lab_credentials
    from harness.lab.bmc.ipmi import IpmiServer
    from harness.lab.bmc.redfish import RedfishServer
    from harness.lab.bmc.ssh import SshServer
    from harness.lab.bmc.target import CallbackTarget

    creds = ensure_lab_credentials(root / "bmc")
    targets = [CallbackTarget(n, state=..., on=..., off=..., reset=...) for n in nodes]
    servers = [
        RedfishServer(targets, "127.0.0.1", 8443, creds.username, creds.password,
                      creds.tls_cert, creds.tls_key),      # one per process, all nodes
        IpmiServer({6230 + i: t for i, t in enumerate(targets)}, "127.0.0.1",
                   creds.username, creds.password),        # one UDP port per node
        *(SshServer(t, "127.0.0.1", 2200 + i, creds.ssh_host_key,
                    [creds.ssh_client_public_key]) for i, t in enumerate(targets)),
    ]
    for server in servers:
        server.start()
    ...
    for server in reversed(servers):
        server.stop()
"""

from __future__ import annotations

from harness.lab.bmc.target import CallbackTarget, MemoryTarget, PowerCall, PowerTarget

__all__ = ["CallbackTarget", "MemoryTarget", "PowerCall", "PowerTarget"]
