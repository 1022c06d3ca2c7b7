"""kind's API server load balancer as powercut builds it (harness/kindlab/go/cmd/lb): the
real binary, fed the listener and backend files kind writes, in front of two real HTTPS
servers that answer /healthz as API servers do."""

from __future__ import annotations

import datetime as dt
import http.server
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.kindlab import versions as v
from harness.lab import pki

# kind v0.33.0's templates (pkg/cluster/internal/loadbalancer/config.go), trimmed to what
# the stand-in reads: the listener's port, each backend's address and port.
LDS = """
resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: listener_apiserver
  address:
    socket_address:
      address: "0.0.0.0"
      port_value: {port}
"""
CDS_HEAD = """
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: kube_apiservers
  load_assignment:
    cluster_name: kube_apiservers
    endpoints:
    - lb_endpoints:
"""
CDS_ENDPOINT = """      - endpoint:
          address:
            socket_address:
              address: 127.0.0.1
              port_value: {port}
"""


class Backend:
    """An HTTPS server: /healthz answers 200 (or 503 once ``healthy`` is cleared); any
    other path answers its name."""

    def __init__(self, name: str, ctx: ssl.SSLContext) -> None:
        self.name = name
        self.healthy = True
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/healthz":
                    code, body = (200, b"ok") if backend.healthy else (503, b"down")
                else:
                    code, body = 200, backend.name.encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _eventually(what: str, fn: Callable[[], bool], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if fn():
            return
        time.sleep(0.2)
    pytest.fail(f"not within {timeout_s:g}s: {what}")


@pytest.fixture
def tls(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting only this test's CA)."""
    ca_key, ca = pki.new_ca("lb-test-ca", valid=dt.timedelta(hours=1))
    key, cert = pki.new_cert(
        ca_key, ca, common_name="apiserver", server_names=["127.0.0.1"], valid=dt.timedelta(hours=1)
    )
    pki.write_cert(tmp_path / "ca.crt", ca)
    pki.write_cert(tmp_path / "tls.crt", cert)
    pki.write_private_key(tmp_path / "tls.key", key)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    return server, client


@pytest.fixture
def lb_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain to build the load balancer")
    out = tmp_path_factory.mktemp("lb") / "envoy"
    subprocess.run(
        [go, "build", "-o", str(out), "./cmd/lb"],
        cwd=v.GO_SOURCE, check=True, capture_output=True, timeout=600,
        env={**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod", "GOWORK": "off"},
    )  # fmt: skip
    return out


@pytest.fixture
def backends(tls: tuple[ssl.SSLContext, ssl.SSLContext]) -> Iterator[list[Backend]]:
    running = [Backend("a", tls[0]), Backend("b", tls[0])]
    yield running
    for b in running:
        b.stop()


def test_it_balances_over_healthy_backends_and_follows_kinds_files(
    lb_binary: Path,
    backends: list[Backend],
    tls: tuple[ssl.SSLContext, ssl.SSLContext],
    tmp_path: Path,
) -> None:
    home = tmp_path / "envoy"
    home.mkdir()
    port = _free_port()
    (home / "lds.yaml").write_text(LDS.format(port=port))
    (home / "cds.yaml").write_text(
        CDS_HEAD + "".join(CDS_ENDPOINT.format(port=b.port) for b in backends)
    )
    proc = subprocess.Popen(
        [str(lb_binary), "-c", str(home / "envoy.yaml")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    client = tls[1]

    def who() -> str:
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/who", context=client, timeout=3
        ) as r:
            return str(r.read().decode())

    def seen(n: int = 8) -> set[str]:
        out = set()
        for _ in range(n):
            try:
                out.add(who())
            except OSError:
                out.add("error")
        return out

    try:
        # TLS passes through untouched: the client verifies the backends' own certificate.
        _eventually("both backends answer through the balancer", lambda: seen() == {"a", "b"})
        backends[1].healthy = False
        _eventually("only the healthy backend gets connections", lambda: seen() == {"a"})
        backends[1].healthy = True
        _eventually("the backend back in rotation", lambda: seen() == {"a", "b"})
        (home / "cds.yaml").write_text(CDS_HEAD + CDS_ENDPOINT.format(port=backends[1].port))
        _eventually("the rewritten backends file followed", lambda: seen() == {"b"})
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert b"listening on" in err, err.decode()[-2000:]
