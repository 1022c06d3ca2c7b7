"""A kubeconfig read into :class:`Credentials`: the server, the CA bundle, the client
certificate and key (files, or ``*-data`` kept in memory) or a bearer token. Errors name the
file and the field.

Python's ``ssl`` loads a client certificate and key only from files, so
:func:`load_client_cert` writes in-memory ones to a private temporary directory (mode 0700,
files 0600) just for that call and deletes them before it returns.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Credentials:
    """How to reach and authenticate to one API server.

    Each of the CA bundle, client certificate and client key is a file (``*_file``) or,
    from a kubeconfig's ``*-data`` fields, PEM bytes kept in memory (``*_data``).
    """

    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = field(default=None, repr=False)
    insecure: bool = False
    ca_data: bytes | None = field(default=None, repr=False)
    cert_data: bytes | None = field(default=None, repr=False)
    key_data: bytes | None = field(default=None, repr=False)


def _decode(data_b64: str, source: str, field_name: str) -> bytes:
    try:
        return base64.b64decode(data_b64, validate=True)
    except (ValueError, TypeError):
        raise ConfigError("is not valid base64", source=source, field=field_name) from None


def _write_private(directory: Path, name: str, data: bytes) -> str:
    """Write ``data`` to a new file readable by this user only (0600 from creation on)."""
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return str(path)


def load_client_cert(ctx: ssl.SSLContext, creds: Credentials) -> None:
    """Load the client certificate and key, from files or from memory."""
    if not (creds.cert_file or creds.cert_data) or not (creds.key_file or creds.key_data):
        return
    if creds.cert_data is None and creds.key_data is None:
        assert creds.cert_file is not None and creds.key_file is not None
        ctx.load_cert_chain(creds.cert_file, creds.key_file)
        return
    directory = Path(tempfile.mkdtemp(prefix="powercut-kc-"))  # mode 0700
    try:
        cert = creds.cert_file
        if creds.cert_data is not None:
            cert = _write_private(directory, "client.crt", creds.cert_data)
        key = creds.key_file
        if creds.key_data is not None:
            key = _write_private(directory, "client.key", creds.key_data)
        assert cert is not None and key is not None
        ctx.load_cert_chain(cert, key)
    finally:
        try:
            shutil.rmtree(directory)
        except OSError as exc:
            log.warning("could not delete the client key copy in %s: %s", directory, exc)


def load_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> Credentials:
    """Read the parts of a kubeconfig this client uses. Errors name the file and field."""
    p = Path(path).expanduser()
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig: {exc.strerror}", source=str(p)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}", source=str(p)) from None
    if not isinstance(doc, dict):
        raise ConfigError("not a kubeconfig (expected a mapping)", source=str(p))
    ctx_name = context or doc.get("current-context")
    contexts = {c["name"]: c["context"] for c in doc.get("contexts") or []}
    if ctx_name not in contexts:
        valid = ", ".join(sorted(contexts)) or "(none)"
        raise ConfigError(
            f"context {ctx_name!r} not found; valid: {valid}", source=str(p), field="contexts"
        )
    ctx = contexts[ctx_name]
    clusters = {c["name"]: c["cluster"] for c in doc.get("clusters") or []}
    users = {u["name"]: u.get("user") or {} for u in doc.get("users") or []}
    if ctx.get("cluster") not in clusters:
        raise ConfigError(
            f"cluster {ctx.get('cluster')!r} of context {ctx_name!r} not found",
            source=str(p),
            field="clusters",
        )
    cluster = clusters[ctx["cluster"]]
    user = users.get(ctx.get("user", ""), {})
    base = p.parent

    def file_of(section: Mapping[str, Any], key: str) -> str | None:
        return str((base / section[key]).resolve()) if section.get(key) else None

    def data_of(section: Mapping[str, Any], key: str, where: str) -> bytes | None:
        if section.get(key) or not section.get(f"{key}-data"):
            return None  # a file wins, as with kubectl
        return _decode(section[f"{key}-data"], str(p), f"{where}.{key}-data")

    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (base / user["tokenFile"]).read_text().strip()
    return Credentials(
        server=str(cluster["server"]).rstrip("/"),
        ca_file=file_of(cluster, "certificate-authority"),
        cert_file=file_of(user, "client-certificate"),
        key_file=file_of(user, "client-key"),
        token=token,
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        ca_data=data_of(cluster, "certificate-authority", "clusters"),
        cert_data=data_of(user, "client-certificate", "users"),
        key_data=data_of(user, "client-key", "users"),
    )
