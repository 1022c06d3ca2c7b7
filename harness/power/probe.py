"""The optional, read-only "probe" capability of a power driver (``powercut preflight
--deep``, docs/ipmi.md).

A driver that can say what its BMC negotiated and allows implements
:class:`SupportsProbe`: ``probe()`` opens its session (or connection), reads the power
state once, and returns a :class:`ProbeReport`, changing nothing. :func:`probe` asks any
driver: one without ``probe()`` gets a report from one timed ``state()`` read, its reset
types unknown (None).

What a report holds, all safe to print (never a secret): the protocol; how it
authenticated (``"RAKP-HMAC-SHA256 as 'ops'"``, ``"basic as 'admin'"``, ``"publickey as
'root'"``); the session's security (IPMI cipher suite, TLS version) and privilege; the
reset types the BMC allows this session (None: unknown); the TLS chain (subject, issuer,
expiry per certificate) and whether it was verified; the round trip of the session setup
and of one state read; and notes (what was assumed rather than read).
"""

from __future__ import annotations

import dataclasses
import datetime
import socket
import ssl
import time
import urllib.parse
from typing import Protocol, runtime_checkable

from harness.power.base import PowerDriver, PowerState, ResetType

__all__ = ["CertInfo", "ProbeReport", "SupportsProbe", "probe", "tls_chain"]


@dataclasses.dataclass(frozen=True, slots=True)
class CertInfo:
    """One certificate of a TLS chain, as the peer presented it."""

    subject: str
    issuer: str
    not_after: str  # ISO 8601, UTC
    days_left: float


@dataclasses.dataclass(frozen=True, slots=True)
class ProbeReport:
    """What one driver's BMC negotiated and allows (see the module's docstring)."""

    protocol: str
    endpoint: str
    state: PowerState
    authentication: str = ""
    security: str = ""  # "cipher suite 17 (RAKP-HMAC-SHA256, ...)", "TLSv1.3", "ssh"
    privilege: str = ""
    reset_types: frozenset[ResetType] | None = None
    tls_chain: tuple[CertInfo, ...] = ()
    tls_verified: bool | None = None  # None: not TLS
    connect_s: float | None = None
    readback_s: float | None = None
    offered: str = ""  # what the BMC offers beyond what was negotiated
    notes: tuple[str, ...] = ()


@runtime_checkable
class SupportsProbe(Protocol):
    """A driver that can probe its BMC read-only."""

    def probe(self) -> ProbeReport: ...


def probe(driver: PowerDriver, protocol: str) -> ProbeReport:
    """``driver``'s own probe, or one timed state read for a driver without one."""
    if isinstance(driver, SupportsProbe):
        return driver.probe()
    started = time.monotonic()
    state = driver.state()
    took = time.monotonic() - started
    return ProbeReport(
        protocol=protocol,
        endpoint=getattr(driver, "endpoint", "") or getattr(driver, "host", ""),
        state=state,
        readback_s=took,
        notes=("the driver cannot probe: reset types unknown",),
    )


def tls_chain(url: str, verify: bool | str, timeout_s: float = 5.0) -> tuple[
    tuple[CertInfo, ...], bool | None, str
]:  # fmt: skip
    """The certificate ``url``'s server presents, whether it verified (against the system
    CAs, or the CA bundle ``verify`` names; None when verification is off), and why not.

    Python 3.11 exposes only the peer's own certificate, not the chain it sent: the tuple
    holds that one.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        return (), None, ""
    host, port = parts.hostname, parts.port or 443
    why = ""
    verified: bool | None = None
    if verify is not False:
        context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
        try:
            _peer_cert(host, port, context, timeout_s)
            verified = True
        except ssl.SSLError as exc:
            verified, why = False, getattr(exc, "verify_message", "") or exc.reason or str(exc)
        except OSError as exc:
            return (), False, f"{type(exc).__name__}: {exc}"
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE  # only to read what it presents
    try:
        der = _peer_cert(host, port, unverified, timeout_s)
    except OSError as exc:
        return (), verified, why or f"{type(exc).__name__}: {exc}"
    return ((_cert_info(der),) if der else ()), verified, why


def _peer_cert(host: str, port: int, context: ssl.SSLContext, timeout_s: float) -> bytes | None:
    with (
        socket.create_connection((host, port), timeout=timeout_s) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        return tls.getpeercert(binary_form=True)


def _cert_info(der: bytes) -> CertInfo:
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der)
    expires = cert.not_valid_after_utc
    left = (expires - datetime.datetime.now(datetime.UTC)).total_seconds() / 86400
    return CertInfo(
        subject=cert.subject.rfc4514_string(),
        issuer=cert.issuer.rfc4514_string(),
        not_after=expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        days_left=left,
    )
