"""A TCP relay between a client and a cluster endpoint that can cut the client off.

Used where a test or a bench needs the harness's watches to lose the cluster for a while
(a network blip between the harness and the cluster) while the cluster itself goes on:
``cut()`` drops every relayed connection and refuses new ones until ``mend()``.
``upstream`` is where each new connection goes; a callable chooses per connection (for
example a restarted API server's own port first, then the balancer).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable

Address = tuple[str, int]


class Relay:
    def __init__(self, upstream: Address | Callable[[], Address], port: int) -> None:
        self._upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = port
        self.open = threading.Event()
        self.open.set()
        self.closed = threading.Event()
        self.relayed: list[Address] = []  # the upstream of each connection relayed
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="relay", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            if not self.open.is_set():
                down.close()
                continue
            where = self._upstream() if callable(self._upstream) else self._upstream
            try:
                up = socket.create_connection(where, timeout=5)
            except OSError:
                down.close()
                continue
            up.settimeout(None)
            with self._lock:
                self._conns.update((down, up))
                self.relayed.append(where)
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            with self._lock:
                self._conns.discard(src)
                self._conns.discard(dst)

    def cut(self) -> None:
        """Drop every relayed connection and refuse new ones until :meth:`mend`."""
        self.open.clear()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)

    def mend(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.closed.set()
        self.cut()
        with contextlib.suppress(OSError):  # wakes the accept() (close alone would not)
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self._thread.join(5)

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
