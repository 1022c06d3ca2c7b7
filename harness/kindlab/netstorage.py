"""The kind cluster's storage network (``kind up --storage csi``): volumes that travel over
the kind network, so a node cut off its storage really loses its pods' I/O.

A storage server runs as a container of its own on the kind network (``<cluster>-storage``:
OpenSSH's sshd, SFTP only, public-key login) serving the shared storage directory; the
CSI node plugin (``harness/kindlab/csi``) mounts each volume from it with sshfs (FUSE over
SSH: the kernel here has FUSE, not NFS, iSCSI or NBD), host key checked against the
known_hosts this module writes. The controller still keeps the volumes' directories and
attachment records on the shared directory (an array's management path); only the data
goes over the network.

A storage-network cut (:mod:`harness.power.storage_cut`, the kind driver's
``cut_storage``) drops, inside one node container's network namespace, the traffic to and
from the server's address only: the node's kubelet, its API connection and its pods' other
traffic go on, while sshfs's requests hang and then fail (its SSH keep-alive gives up after
:data:`ALIVE_INTERVAL_S` x :data:`ALIVE_COUNT` seconds).

The server's image and the CSI image share one Debian root filesystem with
:data:`PACKAGES` (``debootstrap``, cached by packages), so the node image is unchanged.
"""

from __future__ import annotations

import base64
import contextlib
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.errors import PowercutError
from harness.kindlab import engine, images
from harness.kindlab import versions as v
from harness.kindlab.spec import KindSpec
from harness.lab.build import Say

#: The Debian packages of the storage's userland: the server's sshd and SFTP, the node
#: plugin's sshfs and ssh client, iptables for the tests' own network checks.
PACKAGES = ("openssh-server", "openssh-client", "sshfs", "iptables", "iproute2")
BASE_IMAGE = f"{v.REPO}/debian-storage:{v.DEBIAN_SUITE}"
#: Where the server has the shared storage directory.
SERVER_ROOT = "/srv/powercut-csi"
#: Where the server and the node plugin find their keys (the node plugin: a Secret).
SSH_DIR = "/etc/pcsi-ssh"
PLUGIN_KEYS = "pcsi-ssh"  # the node plugin's Secret (its key and known_hosts)
PORT = 22
#: sshfs's SSH keep-alive: a cut mount fails its I/O after about 5 x 3 s.
ALIVE_INTERVAL_S = 5
ALIVE_COUNT = 3
LABEL = "io.powercut.storage-of"

_SSHD_CONFIG = f"""# powercut's storage server: SFTP only, public keys only
Port {PORT}
HostKey {SSH_DIR}/host_ed25519
AuthorizedKeysFile {SSH_DIR}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
ClientAliveInterval {ALIVE_INTERVAL_S}
ClientAliveCountMax {ALIVE_COUNT}
Subsystem sftp internal-sftp
ForceCommand internal-sftp
"""


def container(spec: KindSpec) -> str:
    return f"{spec.name}-storage"


def key_dir(spec: KindSpec) -> Path:
    return spec.root / "storage-ssh"


def ensure_base_image(say: Say) -> str:
    """The storage's Debian image (server and CSI plugin), built once per package list."""
    return images.base_image(say, BASE_IMAGE, PACKAGES)


def _keypair() -> tuple[bytes, str]:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, public.decode()


def ensure_keys(spec: KindSpec) -> Path:
    """The server's host key, the node plugin's client key and the server's sshd_config,
    generated once per cluster (mode 0600 under the state directory, never printed)."""
    d = key_dir(spec)
    d.mkdir(mode=0o700, exist_ok=True)
    for name in ("host_ed25519", "id_ed25519"):
        if not (d / name).is_file():
            private, public = _keypair()
            (d / name).touch(mode=0o600)
            (d / name).write_bytes(private)
            (d / f"{name}.pub").write_text(public + "\n")
    authorized = (d / "id_ed25519.pub").read_text()
    (d / "authorized_keys").write_text(authorized)
    (d / "sshd_config").write_text(_SSHD_CONFIG)
    for f in d.iterdir():
        f.chmod(0o600)
    return d


def start(spec: KindSpec, say: Say) -> str:
    """Run the storage server on the kind network (replacing one left from an earlier
    ``up``); returns its address, also written into the known_hosts the node plugin uses."""
    d = ensure_keys(spec)
    name = container(spec)
    with contextlib.suppress(engine.EngineError):
        engine.run(["rm", "-f", "-v", name])
    engine.run(
        [
            "run", "-d", "--name", name, "--network", spec.network,
            "--label", f"{LABEL}={spec.name}", "--restart", "no",
            "-v", f"{spec.shared_storage}:{SERVER_ROOT}",
            "-v", f"{d}:{SSH_DIR}:ro",
            BASE_IMAGE,
            "/bin/sh", "-c",
            f"mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e -f {SSH_DIR}/sshd_config",
        ],
        timeout=120,
    )  # fmt: skip
    addr = address(spec)
    host_pub = (d / "host_ed25519.pub").read_text().split()
    (d / "known_hosts").write_text(f"{addr} {host_pub[0]} {host_pub[1]}\n")
    (d / "known_hosts").chmod(0o600)
    (spec.root / "storage-address").write_text(addr + "\n")
    say(f"  storage server {name} at {addr}:{PORT} (sshfs over the {spec.network} network)")
    return addr


def address(spec: KindSpec) -> str:
    """The storage server's IPv4 address on the kind network."""
    fmt = "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"
    out = engine.run(["inspect", "--format", fmt, container(spec)]).split()
    if not out:
        raise PowercutError(f"the storage server {container(spec)} has no address")
    return out[0]


def recorded_address(spec: KindSpec) -> str | None:
    """The address ``start`` recorded (for the inventory), or None without one."""
    path = spec.root / "storage-address"
    return path.read_text().strip() if path.is_file() else None


def remove(name: str) -> list[str]:
    """Remove the storage server of cluster ``name`` (idempotent); what it removed."""
    out = engine.run(["ps", "-a", "--filter", f"label={LABEL}={name}", "--format", "{{.Names}}"])
    left = sorted(out.split())
    if left:
        engine.run(["rm", "-f", "-v", *left])
    return left


def secret(spec: KindSpec, namespace: str) -> dict[str, Any]:
    """The node plugin's Secret: its client key and the server's known_hosts."""
    d = key_dir(spec)
    data = {
        name: base64.b64encode((d / name).read_bytes()).decode()
        for name in ("id_ed25519", "known_hosts")
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": PLUGIN_KEYS, "namespace": namespace},
        "type": "Opaque",
        "data": data,
    }


def sshfs_source(addr: str) -> str:
    """The node plugin's ``--sshfs`` value: where each volume's directory is served."""
    return f"root@{addr}:{SERVER_ROOT}/volumes"
