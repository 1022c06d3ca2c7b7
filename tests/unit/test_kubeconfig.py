"""Kubeconfig loading: embedded certificates and keys never stay on disk."""

from __future__ import annotations

import base64
import datetime as dt
import ssl
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from harness.errors import ConfigError
from harness.kube.client import KubeClient, load_kubeconfig


def self_signed(name: str) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of a throw-away self-signed certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443", **cluster}}],
        "users": [{"name": "u", "user": user}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where ``tempfile`` puts temporary files during the test."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


@pytest.fixture
def seen_key_files(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """(key file, its mode, its directory's mode) of every load_cert_chain call."""
    seen: list[tuple[str, int, int]] = []
    original = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: Any, keyfile: Any = None, **kw: Any) -> None:
        path = Path(keyfile)
        seen.append(
            (
                str(path),
                stat.S_IMODE(path.stat().st_mode),
                stat.S_IMODE(path.parent.stat().st_mode),
            )
        )
        original(self, certfile, keyfile, **kw)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    return seen


def test_embedded_client_key_is_loaded_from_a_private_file_deleted_at_once(
    tmp_path: Path, private_tmp: Path, seen_key_files: list[tuple[str, int, int]]
) -> None:
    ca, _ = self_signed("ca")
    cert, key = self_signed("admin")
    path = kubeconfig(
        tmp_path,
        {"certificate-authority-data": b64(ca)},
        {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
    )
    creds = load_kubeconfig(path)
    assert creds.key_data == key
    assert creds.key_file is None
    assert "PRIVATE" not in repr(creds)
    assert list(private_tmp.iterdir()) == []  # loading the kubeconfig writes nothing

    client = KubeClient(creds)
    ((key_path, key_mode, dir_mode),) = seen_key_files
    assert key_path.startswith(str(private_tmp))
    assert key_mode == 0o600
    assert dir_mode == 0o700
    assert list(private_tmp.iterdir()) == []  # gone before the constructor returned
    client.close()
    assert list(private_tmp.iterdir()) == []

    # A second client from the same credentials (as the API probe makes) still works.
    KubeClient(creds).close()
    assert len(seen_key_files) == 2
    assert list(private_tmp.iterdir()) == []


def test_key_and_certificate_files_are_used_in_place(
    tmp_path: Path, private_tmp: Path, seen_key_files: list[tuple[str, int, int]]
) -> None:
    cert, key = self_signed("admin")
    (tmp_path / "admin.crt").write_bytes(cert)
    (tmp_path / "admin.key").write_bytes(key)
    path = kubeconfig(
        tmp_path,
        {"insecure-skip-tls-verify": True},
        {"client-certificate": "admin.crt", "client-key": "admin.key"},
    )
    KubeClient.from_kubeconfig(path).close()
    assert [k for k, _, _ in seen_key_files] == [str(tmp_path / "admin.key")]
    assert list(private_tmp.iterdir()) == []


def test_a_file_and_embedded_data_can_be_mixed(
    tmp_path: Path, private_tmp: Path, seen_key_files: list[tuple[str, int, int]]
) -> None:
    cert, key = self_signed("admin")
    (tmp_path / "admin.crt").write_bytes(cert)
    path = kubeconfig(
        tmp_path, {}, {"client-certificate": "admin.crt", "client-key-data": b64(key)}
    )
    KubeClient.from_kubeconfig(path).close()
    assert len(seen_key_files) == 1
    assert list(private_tmp.iterdir()) == []


def test_bad_base64_names_the_field(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, {}, {"client-key-data": "not base64!"})
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(path)
    assert info.value.field == "users[u].client-key-data"
    assert "not valid base64" in str(info.value)
