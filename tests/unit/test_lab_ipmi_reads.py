"""The lab's IPMI BMCs read their sockets without ever blocking.

pyghmi's read sets a socket non-blocking and then reads it, while its send (on another
thread) sets the same socket blocking: a send between the two steps left the read blocked,
and every IPMI BMC of the lab silent, until a datagram reached that one port. The socket
below turns itself back to blocking the moment it is set non-blocking, as that send did.
"""

from __future__ import annotations

import socket
import threading

import pyghmi.ipmi.private.session as pyghmi_session

import harness.lab.bmc.ipmi  # noqa: F401 - installs the lab's read


class _SentInBetween(socket.socket):
    """A UDP socket that another thread sets blocking again right after it was set
    non-blocking."""

    def setblocking(self, flag: bool) -> None:
        super().setblocking(True)


def test_a_read_returns_at_once_with_nothing_queued_even_on_a_blocking_socket() -> None:
    sock = _SentInBetween(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(pyghmi_session._io_recvfrom(sock, 3000)))
    reader.start()
    reader.join(timeout=5)
    try:
        assert not reader.is_alive(), "the read blocked on an empty socket"
        assert got == [None]
    finally:
        if reader.is_alive():  # unblock it before closing
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", sock.getsockname())
            reader.join(timeout=5)
        sock.close()


def test_a_queued_datagram_is_read_with_its_sender() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.bind(("127.0.0.1", 0))
    try:
        sender.sendto(b"\x06\x00\xff\x07", sock.getsockname())
        got = None
        for _ in range(100):  # loopback delivery is immediate, but do not rely on it
            got = pyghmi_session._io_recvfrom(sock, 3000)
            if got is not None:
                break
            threading.Event().wait(0.01)
        assert got == (b"\x06\x00\xff\x07", sender.getsockname())
        assert pyghmi_session._io_recvfrom(sock, 3000) is None
    finally:
        sock.close()
        sender.close()
