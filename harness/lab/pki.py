"""Certificates and keys for one lab: a CA, serving and client certificates, SA keys.

``LabPKI`` keeps the cluster's files (API server, admin client, service-account keys). The
building blocks it uses (``new_ca``, ``new_cert``, ``write_private_key``, ``write_cert``,
``write_private_file``) also make the BMCs' CA and Redfish certificate in
``harness.lab.bmc.creds``: every key is ECDSA P-256 (the SA keys: RSA 2048), every private
file is written with mode 0600.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TypeAlias

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID = dt.timedelta(days=30)
_BACKDATE = dt.timedelta(minutes=5)  # clock skew between the issuer and its checkers

PrivateKey: TypeAlias = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def write_private_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` with mode 0600 (also if the file existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(data)


def write_private_key(path: Path, key: PrivateKey) -> None:
    """``key`` as unencrypted PKCS#8 PEM, mode 0600."""
    write_private_file(
        path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def write_cert(path: Path, cert: x509.Certificate) -> None:
    """``cert`` as PEM (public: the default file mode)."""
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def general_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    """Subject alternative names: an IP address where ``host`` parses as one, else DNS."""
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, valid: dt.timedelta
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + valid)
    )


def new_ca(
    common_name: str,
    *,
    valid: dt.timedelta,
    path_length: int | None = None,
    key_ids: bool = False,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new self-signed CA (key, certificate); ``key_ids`` adds its SubjectKeyIdentifier."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = (
        _builder(name, name, key, valid)
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if key_ids:
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
    return key, builder.sign(key, hashes.SHA256())


def new_cert(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    *,
    common_name: str,
    organization: str | None = None,
    server_names: Iterable[str] = (),
    client: bool = False,
    valid: dt.timedelta,
    key_ids: bool = False,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new key and the certificate ``ca_key`` signs for it.

    ``server_names`` (IP addresses or DNS names) make it a serving certificate with those
    SANs, ``client`` a client one (both may be set); ``key_ids`` adds the
    AuthorityKeyIdentifier of the CA.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    sans = general_names(server_names)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    if sans:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    builder = _builder(x509.Name(attrs), ca_cert.subject, key, valid).add_extension(
        x509.BasicConstraints(ca=False, path_length=None), critical=True
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if key_ids:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    return key, builder.sign(ca_key, hashes.SHA256())


class LabPKI:
    """Files under ``root``: ca.crt/ca.key, then whatever ``issue`` is asked for."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.ca_cert_path = root / "ca.crt"
        self.ca_key_path = root / "ca.key"
        if not self.ca_cert_path.exists():
            self._make_ca()
        ca_key = serialization.load_pem_private_key(self.ca_key_path.read_bytes(), None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        self._ca_key = ca_key
        self._ca_cert = x509.load_pem_x509_certificate(self.ca_cert_path.read_bytes())

    def _make_ca(self) -> None:
        key, cert = new_ca("powercut-lab-ca", valid=_VALID)
        write_private_key(self.ca_key_path, key)  # the key first: ca.crt says both exist
        write_cert(self.ca_cert_path, cert)

    def issue(
        self,
        name: str,
        *,
        common_name: str,
        organization: str | None = None,
        server_names: tuple[str, ...] = (),
        client: bool = False,
    ) -> tuple[Path, Path]:
        """Issue ``name.crt``/``name.key`` (kept if they already exist)."""
        crt, keyp = self.root / f"{name}.crt", self.root / f"{name}.key"
        if crt.exists() and keyp.exists():
            return crt, keyp
        key, cert = new_cert(
            self._ca_key,
            self._ca_cert,
            common_name=common_name,
            organization=organization,
            server_names=server_names,
            client=client,
            valid=_VALID,
        )
        write_private_key(keyp, key)
        write_cert(crt, cert)
        return crt, keyp

    def service_account_keys(self) -> tuple[Path, Path]:
        """RSA key pair the API servers sign and verify service-account tokens with."""
        priv, pub = self.root / "sa.key", self.root / "sa.pub"
        if not priv.exists():
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            write_private_key(priv, key)
            pub.write_bytes(
                key.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
            )
        return priv, pub
