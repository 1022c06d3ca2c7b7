"""The inventory's storage network (``storage_network.endpoints``): what a storage-network
cut drops on a node (:mod:`harness.power.storage_cut` builds the firewall rules)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Final

#: The firewall chain of a storage-network cut on a node.
CHAIN: Final = "POWERCUT-STORAGE"


@dataclass(frozen=True, slots=True)
class StorageEndpoint:
    """One storage endpoint: an IPv4 network (a single address is a /32) and an optional
    TCP port (iSCSI 3260, NFS 2049, NVMe/TCP 4420 ...; None: every port)."""

    network: ipaddress.IPv4Network
    port: int | None = None

    def __str__(self) -> str:
        net = (
            str(self.network.network_address) if self.network.prefixlen == 32 else str(self.network)
        )
        return net if self.port is None else f"{net}:{self.port}"

    def rules(self) -> list[str]:
        """The chain's two DROP rules for this endpoint: to it and from it."""
        to = f"-d {self.network}"
        back = f"-s {self.network}"
        if self.port is not None:
            to += f" -p tcp --dport {self.port}"
            back += f" -p tcp --sport {self.port}"
        return [f"iptables -w -A {CHAIN} {to} -j DROP", f"iptables -w -A {CHAIN} {back} -j DROP"]


_ENDPOINT: Final = re.compile(r"^(?P<net>[0-9.]+(?:/\d{1,2})?)(?::(?P<port>\d{1,5}))?$")


def parse_endpoint(text: str) -> StorageEndpoint:
    """``ADDRESS``, ``ADDRESS/PREFIX``, ``ADDRESS:PORT`` or ``ADDRESS/PREFIX:PORT`` (IPv4);
    a ``ValueError`` that says what is valid otherwise."""
    valid = (
        "expected an IPv4 address or network with an optional TCP port, such as "
        "'10.0.20.5', '10.0.20.0/24' or '10.0.20.5:3260' (a firewall rule needs addresses, "
        "not host names)"
    )
    m = _ENDPOINT.match(str(text).strip())
    if m is None:
        raise ValueError(f"{text!r} is not a storage endpoint; {valid}")
    try:
        network = ipaddress.IPv4Network(m.group("net"), strict=False)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a storage endpoint ({exc}); {valid}") from None
    if network.is_loopback or network.prefixlen == 0:
        raise ValueError(
            f"{text!r} would cut the node's {'loopback' if network.is_loopback else 'every'}"
            f" traffic, not its storage network; {valid}"
        )
    port = m.group("port")
    if port is not None and not 1 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: port {port} is not in 1-65535")
    return StorageEndpoint(network, None if port is None else int(port))
