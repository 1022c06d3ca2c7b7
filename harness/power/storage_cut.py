"""A node's storage network cut: the node keeps its kubelet and its API connection, only
its path to the storage is gone ("array I/O network failure" in Dell's resiliency module).

The cut is a firewall chain of its own on the node, ``POWERCUT-STORAGE``, hooked first into
INPUT, OUTPUT and FORWARD (FORWARD: pods that reach the storage from the pod network), that
drops every packet to or from the storage endpoints the inventory names
(``storage_network.endpoints``: IPv4 addresses or networks, each with an optional TCP port).
Nothing else on the node changes: its kubelet, its API connection and its other traffic go
on. Its pods' I/O to the storage hangs (TCP retransmits into a drop) and then fails.

As with a partition, the heal is armed on the node itself *before* the cut, as a transient
systemd timer (``systemd-run --on-active``), so a node never stays cut off its storage if
powercut dies; the journal holds the heal too (``powercut recover``). A power cycle heals
as well: the rules live only in the running kernel.

:func:`cut_command` and :data:`COMMAND_HEAL` are what the SSH driver sends (the lab's SSH
server parses the same text back with :func:`parse_cut_command`).
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from typing import Final

from harness.inventory.storage import CHAIN, StorageEndpoint, parse_endpoint
from harness.power.base import SupportsStorageCut

__all__ = ["CHAIN", "StorageEndpoint", "SupportsStorageCut", "parse_endpoint"]

#: The failure kind's name (``--failure``, the Gherkin ``<failure>`` column).
KIND: Final = "storage"
#: The firewall chain of the cut, and the transient unit that heals it.
HEAL_UNIT: Final = "powercut-heal-storage"
HOOKS: Final = ("INPUT", "OUTPUT", "FORWARD")

_UNCUT: Final = (
    "; ".join(f"iptables -w -D {hook} -j {CHAIN} 2>/dev/null" for hook in HOOKS)
    + f"; iptables -w -F {CHAIN} 2>/dev/null; iptables -w -X {CHAIN} 2>/dev/null; true"
)
#: Heal now (idempotent): stop the armed timer, remove the chain.
COMMAND_HEAL: Final = f"systemctl stop {HEAL_UNIT}.timer 2>/dev/null; {_UNCUT}"
#: Prints ``cut`` while the chain is hooked into OUTPUT, else ``open``.
COMMAND_STATE: Final = (
    f"if iptables -w -C OUTPUT -j {CHAIN} 2>/dev/null; then echo cut; else echo open; fi"
)


def cut_command(endpoints: list[StorageEndpoint], seconds: int) -> str:
    """The shell command that arms the heal after ``seconds``, then cuts the node off
    ``endpoints`` (one line, as the SSH driver sends it)."""
    if not endpoints:
        raise ValueError("a storage cut needs at least one endpoint")
    if seconds < 1:
        raise ValueError("the heal must be armed at least 1 s ahead")
    parts = [
        f"systemd-run --collect --unit={HEAL_UNIT} --on-active={seconds} "
        f"/bin/sh -c {shlex.quote(_UNCUT)}",
        f"iptables -w -N {CHAIN}",
    ]
    for endpoint in endpoints:
        parts.extend(endpoint.rules())
    parts.extend(f"iptables -w -I {hook} 1 -j {CHAIN}" for hook in HOOKS)
    return " && ".join(parts)


_ON_ACTIVE: Final = re.compile(r"--on-active=(\d+) ")
_RULE: Final = re.compile(
    rf"iptables -w -A {CHAIN} -d (?P<net>[0-9./]+)(?: -p tcp --dport (?P<port>\d+))? -j DROP"
)


def parse_cut_command(command: str) -> tuple[int, list[StorageEndpoint]] | None:
    """(seconds, endpoints) of a command :func:`cut_command` made; None for any other
    command (a command that looks alike but differs in any character is not one)."""
    seconds = _ON_ACTIVE.search(command)
    if seconds is None or f"-N {CHAIN}" not in command:
        return None
    endpoints = [
        StorageEndpoint(
            ipaddress.IPv4Network(m.group("net")),
            None if m.group("port") is None else int(m.group("port")),
        )
        for m in _RULE.finditer(command)
    ]
    if not endpoints:
        return None
    try:
        again = cut_command(endpoints, int(seconds.group(1)))
    except ValueError:
        return None
    return (int(seconds.group(1)), endpoints) if again == command else None
