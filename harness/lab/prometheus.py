"""The lab's Prometheus (Debian's ``prometheus`` package) and the metrics it scrapes.

:class:`PrometheusServer` runs one real Prometheus on loopback with a configuration and
alerting rules written here; ``lab up`` starts it scraping every API server (with the admin
client certificate) and the lab's own exporter (:class:`LabExporter`): each Service's probe
(``powercut_service_up``, ``powercut_service_ready_endpoints``) and each node's power
(``powercut_lab_node_power_on``). The tests start one of their own the same way.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from harness.budgets import profile
from harness.clock import SYSTEM_CLOCK
from harness.errors import PermanentError
from harness.lab.procs import Proc
from harness.lab.spec import LabSpec, NodeSpec

__all__ = [
    "LAB_RULES",
    "LabExporter",
    "PrometheusServer",
    "ScrapeJob",
    "find_prometheus",
    "render_metrics",
]

#: The lab's alerting rules (one group, evaluated every second).
LAB_RULES: list[dict[str, Any]] = [
    {
        "alert": "LabAPIServerDown",
        "expr": 'up{job="apiserver"} == 0',
        "for": "3s",
        "labels": {"severity": "warning"},
        "annotations": {"summary": "an API server does not answer its scrape"},
    },
    {
        "alert": "LabAPIQuorumLost",
        "expr": 'sum(up{job="apiserver"}) < 2',
        "for": "3s",
        "labels": {"severity": "critical"},
        "annotations": {"summary": "fewer than two API servers answer"},
    },
    {
        "alert": "LabServiceDown",
        "expr": 'powercut_service_up{critical="true"} == 0',
        "for": "5s",
        "labels": {"severity": "critical"},
        "annotations": {"summary": "a critical Service has no ready endpoint"},
    },
]


def find_prometheus() -> str:
    """The ``prometheus`` binary (Debian's package: ``make venv`` installs it)."""
    path = shutil.which("prometheus")
    if path is None:
        raise PermanentError(
            "the prometheus binary is not installed: `make venv` installs Debian's "
            "prometheus package (or: apt-get install prometheus)"
        )
    return path


@dataclass(frozen=True)
class ScrapeJob:
    """One scrape job: targets ``host:port`` (each with labels of its own) over http or
    https (with a client certificate); every ``interval_s`` (the server's by default)."""

    name: str
    targets: Sequence[str] | Mapping[str, Mapping[str, str]]
    scheme: str = "http"
    metrics_path: str = "/metrics"
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    interval_s: float | None = None

    def config(self) -> dict[str, Any]:
        if isinstance(self.targets, Mapping):
            static = [
                {"targets": [t], "labels": {**self.labels, **own}}
                for t, own in self.targets.items()
            ]
        else:
            static = [{"targets": list(self.targets), "labels": dict(self.labels)}]
        job: dict[str, Any] = {
            "job_name": self.name,
            "scheme": self.scheme,
            "metrics_path": self.metrics_path,
            "static_configs": static,
        }
        if self.interval_s is not None:
            job["scrape_interval"] = f"{self.interval_s:g}s"
            job["scrape_timeout"] = f"{max(1.0, self.interval_s - 1):g}s"
        if self.scheme == "https":
            tls: dict[str, str] = {}
            if self.ca_file:
                tls["ca_file"] = str(self.ca_file)
            if self.cert_file and self.key_file:
                tls["cert_file"] = str(self.cert_file)
                tls["key_file"] = str(self.key_file)
            job["tls_config"] = tls
        return job


class PrometheusServer:
    """A Prometheus process on 127.0.0.1:``port`` with its files under ``root``; every
    second it scrapes ``jobs`` and evaluates ``rules``. Started and stopped by PID."""

    def __init__(
        self,
        root: Path,
        port: int,
        jobs: Sequence[ScrapeJob],
        *,
        rules: Sequence[Mapping[str, Any]] = (),
        interval_s: float = 1.0,
        binary: str | None = None,
        log_dir: Path | None = None,
        web_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.root = root
        self.port = port
        self.web_config = dict(web_config) if web_config else None
        tls = bool(self.web_config and self.web_config.get("tls_server_config"))
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        self.jobs = list(jobs)
        self.rules = list(rules)
        self.interval_s = interval_s
        self.binary = binary or find_prometheus()
        self.config_path = root / "prometheus.yml"
        self.rules_path = root / "rules.yml"
        self.data_dir = root / "data"
        self.web_config_path = root / "web.yml"
        web = [f"--web.config.file={self.web_config_path}"] if self.web_config else []
        self.proc = Proc(
            "prometheus",
            [
                self.binary,
                *web,
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.data_dir}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=2d",
                "--log.level=warn",
            ],
            log_dir or root,
        )

    def config(self) -> dict[str, Any]:
        every = f"{self.interval_s:g}s"
        return {
            "global": {
                "scrape_interval": every,
                "scrape_timeout": every,
                "evaluation_interval": every,
            },
            "rule_files": [str(self.rules_path)] if self.rules else [],
            "scrape_configs": [job.config() for job in self.jobs],
        }

    def write_files(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        if self.web_config:
            self.web_config_path.write_text(yaml.safe_dump(self.web_config, sort_keys=False))
        if self.rules:
            doc = {"groups": [{"name": "powercut-lab", "rules": self.rules}]}
            self.rules_path.write_text(yaml.safe_dump(doc, sort_keys=False))

    def start(self, *, timeout_s: float = 60.0) -> PrometheusServer:
        """Write the files, start the process and wait until ``/-/ready`` answers 200."""
        self.write_files()
        self.proc.start()
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.proc.alive():
                raise PermanentError(f"prometheus {self.proc.exit_info()}:\n{self.proc.log_tail()}")
            if self._answers():
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise PermanentError(f"prometheus not ready after {timeout_s:g} s")
            SYSTEM_CLOCK.sleep(0.2)

    def _answers(self) -> bool:
        """Whether the web server is up: 200 from ``/-/ready``; behind TLS or basic auth
        (the tests' servers), any HTTP answer on the port."""
        if self.web_config:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2):
                    return True
            except OSError:
                return False
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:  # noqa: S310
                return bool(r.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.stop(timeout_s=10)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(
    families: Mapping[str, tuple[str, Sequence[tuple[Mapping[str, str], float]]]],
) -> str:
    """The Prometheus text format: name -> (help, [(labels, value)]), all gauges."""
    lines: list[str] = []
    for name, (help_text, samples) in families.items():
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            lines.append(f"{name}{{{inner}}} {value:g}" if inner else f"{name} {value:g}")
    return "\n".join(lines) + "\n"


Collector = Callable[[], Mapping[str, tuple[str, Sequence[tuple[Mapping[str, str], float]]]]]


class LabExporter:
    """``GET /metrics`` on 127.0.0.1:``port``: whatever ``collect`` returns, fresh per scrape."""

    def __init__(self, port: int, collect: Collector) -> None:
        self.port = port
        self.collect = collect
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> LabExporter:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = render_metrics(owner.collect()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        srv = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        srv.daemon_threads = True
        self._server = srv
        threading.Thread(target=srv.serve_forever, name="lab exporter", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# -- the lab's Prometheus --------------------------------------------------------------------

#: Services whose loss the lab's alerting rule and SLOs count (``registry`` is a singleton
#: that is down by design while its node is lost).
CRITICAL_SERVICES = ("web", "quorum")


def lab_rules(spec: LabSpec) -> list[dict[str, Any]]:
    """The lab's alerting rules; a service may be down for the profile's service-outage
    budget before ``LabServiceDown`` fires, as the features allow."""
    outage = profile(spec.timings).service_outage
    rules = [dict(r) for r in LAB_RULES]
    for rule in rules:
        if rule["alert"] == "LabServiceDown":
            rule["for"] = f"{outage:g}s"
    return rules


def lab_prometheus(spec: LabSpec, log_dir: Path) -> PrometheusServer:
    """Prometheus scraping every API server (admin client certificate, every 5 s: their
    pages are large) and the lab's exporter (every second)."""
    p = spec.ports
    pki = spec.root / "pki"
    apiservers = {
        f"127.0.0.1:{p.apiserver(n.cp_index)}": {"node": n.name}
        for n in spec.nodes()
        if n.cp_index is not None
    }
    jobs = [
        ScrapeJob(
            "apiserver",
            apiservers,
            scheme="https",
            ca_file=pki / "ca.crt",
            cert_file=pki / "admin.crt",
            key_file=pki / "admin.key",
            interval_s=5.0,
        ),
        ScrapeJob("lab", [f"127.0.0.1:{p.metrics}"]),
    ]
    return PrometheusServer(
        spec.root / "prometheus",
        p.prometheus,
        jobs,
        rules=lab_rules(spec),
        binary=spec.prometheus,
        log_dir=log_dir,
    )


Families = dict[str, tuple[str, list[tuple[Mapping[str, str], float]]]]


def lab_metrics(
    nodes: Sequence[NodeSpec],
    is_on: Callable[[str], bool],
    ready_endpoints: Callable[[str], int] | None,
    services: Sequence[str],
) -> Families:
    """What the lab's exporter serves: each node's power and each Service's probe."""
    out: Families = {
        "powercut_lab_node_power_on": (
            "1 while the lab node is powered on (its BMCs read On)",
            [
                ({"node": n.name, "role": n.role, "rack": n.rack}, 1.0 if is_on(n.name) else 0.0)
                for n in nodes
            ],
        )
    }
    if ready_endpoints is not None:
        ready = {svc: ready_endpoints(svc) for svc in services}
        critical = {svc: "true" if svc in CRITICAL_SERVICES else "false" for svc in services}
        out["powercut_service_up"] = (
            "1 while the Service's health endpoint answers 200 (it has a ready endpoint)",
            [
                ({"service": s, "critical": critical[s]}, 1.0 if n > 0 else 0.0)
                for s, n in ready.items()
            ],
        )
        out["powercut_service_ready_endpoints"] = (
            "ready endpoints of the Service",
            [({"service": s}, float(n)) for s, n in ready.items()],
        )
    return out


def lab_slo_sections(spec: LabSpec) -> dict[str, Any]:
    """The inventory sections for the lab's Prometheus: its URL, SLOs, alerts and a stop
    condition (losing the API servers' majority), as ``lab up`` writes them."""
    cps = spec.control_planes
    majority = cps // 2 + 1
    outage = profile(spec.timings).service_outage
    slos: list[dict[str, Any]] = [
        {
            "name": "api-available",
            "description": "a majority of the API servers answer their scrape "
            "(a scrape that times out once is forgiven)",
            "expr": 'sum(up{job="apiserver"})',
            "comparison": ">=",
            "threshold": majority,
            "step": "5s",
            "for": "15s",
        },
        {
            "name": "api-error-ratio",
            # Resource requests only: HAProxy's /readyz health checks answer 500 while a
            # powered-on API server starts, which no client sees.
            "description": "the share of API resource requests answered with a 5xx, over 30 s",
            "expr": '(sum(rate(apiserver_request_total{code=~"5..",resource!=""}[30s]))'
            ' or vector(0)) / sum(rate(apiserver_request_total{resource!=""}[30s]))',
            "comparison": "<=",
            "threshold": 0.05,
            "step": "5s",
        },
    ]
    if spec.workloads:
        for svc in CRITICAL_SERVICES:
            slos.append(
                {
                    "name": f"{svc}-available",
                    "description": f"the {svc} Service has a ready endpoint "
                    "(outages up to the service-outage budget allowed)",
                    "expr": f'min(powercut_service_up{{service="{svc}"}})',
                    "comparison": ">=",
                    "threshold": 1,
                    "step": "1s",
                    "for": f"{outage:g}s",
                }
            )
    doc: dict[str, Any] = {
        "prometheus": {"url": f"http://127.0.0.1:{spec.ports.prometheus}"},
        "slos": slos,
        "alerts": [{"name": "LabAPIQuorumLost"}, {"name": "LabServiceDown"}],
    }
    if cps >= 3:
        doc["stop_conditions"] = [{"slo": "api-available"}]
    return doc
