"""The lab's --expose forwarder: TCP and UDP (IPMI) from another address to 127.0.0.1."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from harness.errors import ConfigError
from harness.lab.expose import Exposer, check_address

ADDR = "127.0.0.2"  # another loopback address stands for the Docker network's gateway


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def echo_servers() -> Iterator[tuple[int, int]]:
    """A TCP echo server and a UDP one (replying 'ack:' + what came, to the sender)."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))

    def serve_tcp() -> None:
        while True:
            try:
                c, _ = tcp.accept()
            except OSError:
                return
            with c:
                while data := c.recv(1024):
                    c.sendall(data.upper())

    def serve_udp() -> None:
        while True:
            try:
                data, peer = udp.recvfrom(1024)
                udp.sendto(b"ack:" + data, peer)
            except OSError:
                return

    for fn in (serve_tcp, serve_udp):
        threading.Thread(target=fn, daemon=True).start()
    yield tcp.getsockname()[1], udp.getsockname()[1]
    for s in (tcp, udp):
        s.close()


def test_forwards_tcp_and_udp_per_client(echo_servers: tuple[int, int]) -> None:
    tport, uport = echo_servers
    ex = Exposer(ADDR, [tport], [uport]).start()
    try:
        with socket.create_connection((ADDR, tport), timeout=5) as c:
            c.sendall(b"hello")
            c.shutdown(socket.SHUT_WR)
            got = b""
            while data := c.recv(1024):
                got += data
        assert got == b"HELLO"
        clients = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
        for i, u in enumerate(clients):
            u.settimeout(5)
            u.sendto(f"m{i}".encode(), (ADDR, uport))
        # each client gets its own reply, from the address it sent to
        for i, u in enumerate(clients):
            data, src = u.recvfrom(1024)
            assert data == f"ack:m{i}".encode()
            assert src == (ADDR, uport)
            u.close()
    finally:
        ex.stop()
    with pytest.raises(OSError):
        socket.create_connection((ADDR, tport), timeout=2)


@pytest.mark.parametrize(
    ("addr", "says"),
    [
        ("0.0.0.0", "other than 0.0.0.0"),
        ("127.0.0.1", "127.0.0.0/8"),
        ("nope", "IPv4 address"),
        ("192.0.2.254", "not an address of this machine"),
    ],
)
def test_bad_expose_address(addr: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_address(addr)
    assert says in str(err.value) and "--expose" in str(err.value)
