"""IPMI 2.0 session terms: cipher suites, privilege levels, the sessionless query of the
cipher suites a BMC offers, and the one error a session mismatch raises.

Cipher suites (IPMI 2.0 table 22-20) that powercut uses, both with AES-CBC-128:

- 17: RAKP-HMAC-SHA256, HMAC-SHA256-128 (the default; what hardened BMCs and OpenBMC's
  net-ipmid offer, and ipmitool's default since 1.8.19);
- 3: RAKP-HMAC-SHA1, HMAC-SHA1-96: used only when a node's inventory sets
  ``power.cipher_suite: 3``.

Privileges: ``user`` < ``operator`` < ``administrator``. Chassis control (power down,
soft shutdown, power up, cycle) needs OPERATOR, the default; reading the chassis status
needs USER.
"""

from __future__ import annotations

import socket
import struct
from typing import Final, Literal

from harness.errors import PermanentError

__all__ = [
    "CIPHER_SUITES",
    "DEFAULT_CIPHER_SUITE",
    "DEFAULT_PRIVILEGE",
    "PRIVILEGE_LEVELS",
    "IpmiSessionRefused",
    "Privilege",
    "cipher_suite_ids",
    "offered_cipher_suites",
]

Privilege = Literal["user", "operator", "administrator"]

#: The cipher suites powercut can use, with their algorithms.
CIPHER_SUITES: Final = {
    17: "RAKP-HMAC-SHA256, HMAC-SHA256-128, AES-CBC-128",
    3: "RAKP-HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128",
}
DEFAULT_CIPHER_SUITE: Final = 17
DEFAULT_PRIVILEGE: Final[Privilege] = "operator"
#: Privilege names -> IPMI privilege level numbers.
PRIVILEGE_LEVELS: Final[dict[str, int]] = {"user": 2, "operator": 3, "administrator": 4}
#: The privilege chassis control needs.
CHASSIS_CONTROL_PRIVILEGE: Final[Privilege] = "operator"

#: RMCP+ session setup status codes (IPMI 2.0 table 13-15) by what they are about.
CIPHER_MSC: Final = {
    0x04: "invalid authentication algorithm",
    0x05: "invalid integrity algorithm",
    0x06: "no matching authentication payload",
    0x07: "no matching integrity payload",
    0x10: "invalid confidentiality algorithm",
    0x11: "no matching cipher suite",
}
PRIVILEGE_MSC: Final = {
    0x09: "invalid role",
    0x0A: "unauthorized role or privilege level requested",
    0x0B: "insufficient resources at the requested role",
}
#: Completion codes of Set Session Privilege Level that refuse the level.
PRIVILEGE_CC: Final = {
    0x80: "requested level not available for this user",
    0x81: "requested level exceeds the user's or the channel's limit",
    0x82: "cannot disable user-level authentication",
    0xD4: "insufficient privilege level",
}
#: ipmitool's words for the same refusals (lanplus open session / RAKP messages).
IPMITOOL_CIPHER_TEXT: Final = (*CIPHER_MSC.values(), "no matching cipher suite")
IPMITOOL_PRIVILEGE_TEXT: Final = (
    *PRIVILEGE_MSC.values(),
    "set session privilege level",
    "insufficient privilege",
)


class IpmiSessionRefused(PermanentError):
    """The BMC refused the session's cipher suite or privilege (or a command for want of
    privilege): the inventory names something this BMC does not allow.

    ``what`` is ``"cipher suite"`` or ``"privilege"``; ``field`` the inventory field to
    change; ``offered`` the cipher suites the BMC lists (None: it did not say).
    """

    acted = False

    def __init__(
        self,
        node: str,
        endpoint: str,
        *,
        what: Literal["cipher suite", "privilege"],
        cipher_suite: int,
        privilege: str,
        username: str,
        reason: str,
        offered: tuple[int, ...] | None = None,
    ) -> None:
        self.node = node
        self.endpoint = endpoint
        self.what = what
        self.cipher_suite = cipher_suite
        self.privilege = privilege
        self.username = username
        self.reason = reason
        self.offered = offered
        self.field = "power.cipher_suite" if what == "cipher suite" else "power.privilege"
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"node {self.node}: IPMI BMC {self.endpoint}"
        if self.what == "cipher suite":
            if self.offered is None:
                offers = "it did not list the cipher suites it offers"
            else:
                offers = "it offers cipher suites " + (
                    ", ".join(str(c) for c in self.offered) or "none"
                )
            usable = [c for c in CIPHER_SUITES if self.offered and c in self.offered]
            hint = (
                f"set {self.field} of node {self.node} in the inventory to "
                + (" or ".join(str(c) for c in usable) if usable else "a suite it offers")
                + (" (3 only where your site accepts SHA-1)" if 3 in usable else "")
                + f"; powercut can use {', '.join(str(c) for c in CIPHER_SUITES)}"
            )
            return (
                f"{where} refused cipher suite {self.cipher_suite} "
                f"({CIPHER_SUITES.get(self.cipher_suite, '?')}): {self.reason}; {offers}; {hint}"
            )
        return (
            f"{where} refused privilege {self.privilege.upper()} for user {self.username!r}: "
            f"{self.reason}; set {self.field} of node {self.node} in the inventory to a "
            f"level the user has ({CHASSIS_CONTROL_PRIVILEGE} is what power control needs), "
            "or give the user that privilege on the BMC"
        )


def cipher_suite_ids(records: bytes) -> tuple[int, ...]:
    """The cipher suite ids in Get Channel Cipher Suites record data: each record starts
    with 0xC0 (standard: the id follows) or 0xC1 (OEM: the id, then a 3-byte IANA number),
    followed by algorithm bytes (0x00-0xBF)."""
    ids: list[int] = []
    i = 0
    while i < len(records):
        tag = records[i]
        if tag in (0xC0, 0xC1) and i + 1 < len(records):
            ids.append(records[i + 1])
            i += 2 if tag == 0xC0 else 5
        else:
            i += 1
    return tuple(ids)


def _checksum(data: bytes) -> int:
    return (-sum(data)) & 0xFF


def cipher_suites_request(index: int, seq: int = 1) -> bytes:
    """One sessionless (IPMI 1.5 framing, auth type none) Get Channel Cipher Suites
    request for ``index`` of the list (channel 0x0E: this one; payload type IPMI)."""
    head = bytes([0x20, 0x06 << 2])
    body = bytes([0x81, (seq & 0x3F) << 2, 0x54, 0x0E, 0x00, 0x80 | (index & 0x3F)])
    message = head + bytes([_checksum(head)]) + body + bytes([_checksum(body)])
    return b"\x06\x00\xff\x07" + bytes(9) + bytes([len(message)]) + message


def cipher_suites_answer(packet: bytes) -> bytes | None:
    """The record data in an answer to :func:`cipher_suites_request` (None: not one, or
    a completion code other than 0)."""
    if len(packet) < 4 or packet[:4] != b"\x06\x00\xff\x07":
        return None
    if packet[4] == 0x06:  # RMCP+ framing: type, session id, sequence, 2-byte length
        message = packet[16 : 16 + struct.unpack("<H", packet[14:16])[0]]
    else:  # IPMI 1.5 framing, auth type none
        message = packet[14 : 14 + packet[13]]
    # rqAddr, netFn/LUN, checksum, rsAddr, seq/LUN, command, completion code, channel, data..
    if len(message) < 9 or message[5] != 0x54 or message[6] != 0:
        return None
    return bytes(message[8:-1])


def offered_cipher_suites(host: str, port: int, timeout_s: float = 2.0) -> tuple[int, ...] | None:
    """The cipher suites the BMC at ``host:port`` lists (sessionless Get Channel Cipher
    Suites, read page by page); None when it does not answer that request."""
    records = b""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect((host, port))
            for index in range(8):
                sock.send(cipher_suites_request(index, seq=index + 1))
                chunk = cipher_suites_answer(sock.recv(512))
                if chunk is None:
                    return None if index == 0 else cipher_suite_ids(records)
                records += chunk
                if len(chunk) < 16:
                    break
    except OSError:
        return None
    return cipher_suite_ids(records)
