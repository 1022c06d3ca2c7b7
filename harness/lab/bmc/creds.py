"""Credentials and keys for a lab's BMC endpoints, as files only their owner can read.

``ensure_lab_credentials(directory)`` creates whatever is missing and returns the lot:

- ``bmc-password``: the Redfish/IPMI password (20 URL-safe characters: IPMI 2.0 allows at
  most 20 bytes);
- ``ssh_host_ed25519_key`` (+ ``.pub``): the host key every lab node's SSH server presents;
- ``ssh_client_ed25519_key`` (+ ``.pub``): the key the harness logs in with;
- ``bmc-ca.crt`` / ``bmc-ca.key`` and ``bmc-tls.crt`` / ``bmc-tls.key``: a private CA and
  the Redfish server certificate it signed (for 127.0.0.1 and localhost), made with the
  same helpers as the cluster's certificates (``harness.lab.pki``).

Private files are written with mode 0600 in a 0700 directory. Existing files are reused,
so a lab keeps its credentials across restarts.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from harness.lab.pki import new_ca, new_cert, write_cert, write_private_file, write_private_key

BMC_USER = "admin"  # the user every lab BMC (Redfish, IPMI) accepts

_TLS_VALID = dt.timedelta(days=365)


@dataclass(frozen=True)
class LabCredentials:
    """Where a lab's BMC credentials live; ``password`` stays out of ``repr()``."""

    directory: Path
    username: str
    password: str = field(repr=False)
    password_file: Path
    ssh_host_key: Path
    ssh_host_public_key: str
    ssh_client_key: Path
    ssh_client_public_key: str
    tls_ca_cert: Path
    tls_cert: Path
    tls_key: Path


def ensure_lab_credentials(
    directory: str | os.PathLike[str],
    *,
    username: str = "powercut",
    tls_hosts: Sequence[str] = ("127.0.0.1", "localhost"),
) -> LabCredentials:
    """Create the missing credential files under ``directory`` and describe all of them."""
    root = Path(directory)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    root.chmod(0o700)

    password_file = root / "bmc-password"
    if not password_file.exists():
        write_private_file(password_file, random_password().encode())
    password = password_file.read_text().strip()

    host_key = root / "ssh_host_ed25519_key"
    client_key = root / "ssh_client_ed25519_key"
    host_pub = ensure_ssh_keypair(host_key, comment="powercut-lab-node")
    client_pub = ensure_ssh_keypair(client_key, comment="powercut-harness")

    ca_cert, tls_cert, tls_key = ensure_tls(root, tls_hosts)
    return LabCredentials(
        directory=root,
        username=username,
        password=password,
        password_file=password_file,
        ssh_host_key=host_key,
        ssh_host_public_key=host_pub,
        ssh_client_key=client_key,
        ssh_client_public_key=client_pub,
        tls_ca_cert=ca_cert,
        tls_cert=tls_cert,
        tls_key=tls_key,
    )


def random_password(length: int = 20) -> str:
    """A random password of ``length`` URL-safe characters (IPMI 2.0: at most 20)."""
    return secrets.token_urlsafe(length)[:length]


def ensure_ssh_keypair(private_path: Path, *, comment: str = "") -> str:
    """An Ed25519 key in OpenSSH format at ``private_path`` (and ``.pub``); the public line."""
    public_path = private_path.with_name(private_path.name + ".pub")
    if private_path.exists():
        key = serialization.load_ssh_private_key(private_path.read_bytes(), password=None)
    else:
        key = ed25519.Ed25519PrivateKey.generate()
        write_private_file(
            private_path,
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption(),
            ),
        )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    line = public.decode() + (f" {comment}" if comment else "")
    public_path.write_text(line + "\n")
    return line


def known_hosts_line(host: str, port: int, public_key_line: str) -> str:
    """The ``known_hosts`` entry for a server key (``[host]:port`` unless port 22)."""
    key_type, key_b64 = public_key_line.split()[:2]
    name = host if port == 22 else f"[{host}]:{port}"
    return f"{name} {key_type} {key_b64}"


def ensure_tls(
    directory: Path,
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
    *,
    prefix: str = "bmc",
) -> tuple[Path, Path, Path]:
    """A private CA and a server certificate for ``hosts``: (ca cert, cert, key) paths.

    All four files are made anew unless all of them exist.
    """
    ca_cert_path = directory / f"{prefix}-ca.crt"
    ca_key_path = directory / f"{prefix}-ca.key"
    cert_path = directory / f"{prefix}-tls.crt"
    key_path = directory / f"{prefix}-tls.key"
    if all(p.exists() for p in (ca_cert_path, ca_key_path, cert_path, key_path)):
        return ca_cert_path, cert_path, key_path

    ca_key, ca_cert = new_ca(f"powercut {prefix} CA", valid=_TLS_VALID, path_length=0, key_ids=True)
    key, cert = new_cert(
        ca_key, ca_cert, common_name=hosts[0], server_names=hosts, valid=_TLS_VALID, key_ids=True
    )
    write_private_key(ca_key_path, ca_key)
    write_private_key(key_path, key)
    write_cert(ca_cert_path, ca_cert)
    write_cert(cert_path, cert)
    return ca_cert_path, cert_path, key_path
