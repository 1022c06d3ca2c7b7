"""Certificates and keys for one lab: a CA, serving and client certificates, SA keys."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID = dt.timedelta(days=30)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


class LabPKI:
    """Files under ``root``: ca.crt/ca.key, then whatever ``issue`` is asked for."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.ca_cert_path = root / "ca.crt"
        self.ca_key_path = root / "ca.key"
        if not self.ca_cert_path.exists():
            self._make_ca()
        self._ca_key = serialization.load_pem_private_key(self.ca_key_path.read_bytes(), None)
        self._ca_cert = x509.load_pem_x509_certificate(self.ca_cert_path.read_bytes())

    def _make_ca(self) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "powercut-lab-ca")])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            .sign(key, hashes.SHA256())
        )
        _write_key(self.ca_key_path, key)
        self.ca_cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

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
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization:
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        now = dt.datetime.now(dt.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        if server_names:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if server_names:
            sans: list[x509.GeneralName] = []
            for n in server_names:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(n)))
                except ValueError:
                    sans.append(x509.DNSName(n))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        assert isinstance(self._ca_key, ec.EllipticCurvePrivateKey)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        _write_key(keyp, key)
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return crt, keyp

    def service_account_keys(self) -> tuple[Path, Path]:
        """RSA key pair the API servers sign and verify service-account tokens with."""
        priv, pub = self.root / "sa.key", self.root / "sa.pub"
        if not priv.exists():
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            _write_key(priv, key)
            pub.write_bytes(
                key.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
            )
        return priv, pub
