"""The lab's runner-facing endpoints served on one more address (``powercut lab up --expose
ADDR``): the API servers, the BMCs (Redfish, IPMI, SSH), the service health endpoints and
Prometheus, forwarded from ``ADDR:port`` to ``127.0.0.1:port``, so that a runner in a
container (a management cluster's pod on a Docker network whose gateway is ``ADDR``)
reaches the lab, and nothing beyond that network does.

TCP: a listener per port, two copying threads per connection. UDP (IPMI): a socket per
port; each client address gets an upstream socket of its own (RMCP+ sessions are per
source address), its replies sent back from the listening socket. The lab's certificates
name ``ADDR`` too (the API server's and the Redfish BMC's), and its known_hosts lists the
SSH servers under it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import threading
from collections import OrderedDict

from harness.errors import ConfigError

log = logging.getLogger(__name__)
UPSTREAM = "127.0.0.1"
MAX_UDP_CLIENTS = 256


def check_address(addr: str) -> str:
    """An IPv4 address of this machine that is not the wildcard or loopback."""
    try:
        ip = ipaddress.IPv4Address(addr)
    except ValueError:
        raise ConfigError(
            f"invalid value {addr!r}; valid: an IPv4 address of this machine, such as a "
            "Docker network's gateway",
            field="--expose",
        ) from None
    if ip.is_unspecified or ip.is_loopback:
        raise ConfigError(
            f"invalid value {addr!r}; valid: an address other than 0.0.0.0 and 127.0.0.0/8 "
            "(the lab is on loopback already)",
            field="--expose",
        )
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((addr, 0))
        except OSError as exc:
            raise ConfigError(
                f"invalid value {addr!r}: not an address of this machine ({exc.strerror}); "
                "valid: the address of one of its interfaces (`ip -4 addr`)",
                field="--expose",
            ) from None
    return addr


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


class Exposer:
    def __init__(self, addr: str, tcp: list[int], udp: list[int]) -> None:
        self.addr = addr
        self.tcp = sorted(set(tcp))
        self.udp = sorted(set(udp))
        self._socks: list[socket.socket] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()

    def start(self) -> Exposer:
        try:
            for port in self.tcp:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((self.addr, port))
                s.listen(64)
                self._socks.append(s)
                threading.Thread(
                    target=self._accept, args=(s, port), name=f"expose-tcp-{port}", daemon=True
                ).start()
            for port in self.udp:
                u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                u.bind((self.addr, port))
                self._socks.append(u)
                threading.Thread(
                    target=self._relay, args=(u, port), name=f"expose-udp-{port}", daemon=True
                ).start()
        except OSError:
            self.stop()
            raise
        log.info("lab exposed on %s: tcp %s, udp %s", self.addr, self.tcp, self.udp)
        return self

    def _accept(self, s: socket.socket, port: int) -> None:
        while not self._stop.is_set():
            try:
                client, _ = s.accept()
            except OSError:
                return
            try:
                up = socket.create_connection((UPSTREAM, port), timeout=10)
                up.settimeout(None)
            except OSError as exc:
                log.warning("expose %s:%d: upstream refused: %s", self.addr, port, exc)
                client.close()
                continue
            with self._lock:
                self._conns.update((client, up))
            threading.Thread(target=self._serve, args=(client, up), daemon=True).start()

    def _serve(self, client: socket.socket, up: socket.socket) -> None:
        back = threading.Thread(target=_pump, args=(up, client), daemon=True)
        back.start()
        _pump(client, up)
        back.join()
        with self._lock:
            self._conns.discard(client)
            self._conns.discard(up)
        client.close()
        up.close()

    def _relay(self, u: socket.socket, port: int) -> None:
        clients: OrderedDict[tuple[str, int], socket.socket] = OrderedDict()
        while not self._stop.is_set():
            try:
                data, peer = u.recvfrom(65536)
            except OSError:
                break
            if peer is None or self._stop.is_set():
                break  # the socket was shut down (stop): recvfrom returns no sender
            up = clients.get(peer)
            if up is None:
                up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                up.connect((UPSTREAM, port))
                clients[peer] = up
                threading.Thread(target=self._back, args=(up, u, peer), daemon=True).start()
                while len(clients) > MAX_UDP_CLIENTS:
                    _, old = clients.popitem(last=False)
                    old.close()
            else:
                clients.move_to_end(peer)
            with contextlib.suppress(OSError):
                up.send(data)
        for up in clients.values():
            up.close()

    @staticmethod
    def _back(up: socket.socket, u: socket.socket, peer: tuple[str, int]) -> None:
        while True:
            try:
                data = up.recv(65536)
                u.sendto(data, peer)
            except OSError:
                return

    def stop(self) -> None:
        self._stop.set()
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        with self._lock:
            for c in self._conns:
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
                c.close()
            self._conns.clear()
