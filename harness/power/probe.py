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
import time
from typing import Protocol, runtime_checkable

from harness.power.base import PowerDriver, PowerState, ResetType

__all__ = ["CertInfo", "ProbeReport", "SupportsProbe", "probe"]


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
