"""Per-Service HTTP health endpoints on loopback: 200 while the Service has ready endpoints.

Pods are simulated, so a Service has no real backend; these endpoints let HTTP probes see
what a client of the Service would see.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness.kube.client import KubeClient
from harness.kube.names import LABEL_SERVICE_NAME
from harness.lab.informer import Informer


class HealthEndpoints:
    def __init__(self, client: KubeClient, namespace: str, ports: dict[str, int]) -> None:
        self.ports = ports
        self.slices = Informer(
            client, f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
        )
        self._servers: list[ThreadingHTTPServer] = []

    def ready_count(self, service: str) -> int:
        n = 0
        for s in self.slices.snapshot():
            labels = (s.get("metadata") or {}).get("labels") or {}
            if labels.get(LABEL_SERVICE_NAME) != service:
                continue
            for ep in s.get("endpoints") or []:
                if (ep.get("conditions") or {}).get("ready"):
                    n += 1
        return n

    def start(self) -> None:
        self.slices.start()
        for service, port in self.ports.items():
            srv = ThreadingHTTPServer(("127.0.0.1", port), self._handler(service))
            srv.daemon_threads = True
            threading.Thread(
                target=srv.serve_forever, name=f"health {service}", daemon=True
            ).start()
            self._servers.append(srv)

    def _handler(self, service: str) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                n = owner.ready_count(service)
                body = f"{service}: {n} ready endpoints\n".encode()
                self.send_response(200 if n > 0 else 503)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler

    def stop(self) -> None:
        self.slices.stop()
        for srv in self._servers:
            srv.shutdown()
            srv.server_close()
