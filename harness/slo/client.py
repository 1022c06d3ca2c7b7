"""A small client of the Prometheus HTTP API (``/api/v1``) on urllib3.

Instant and range queries return :class:`Series`; ``alert_rules()`` lists the alerting
rules Prometheus evaluates. Errors say what went wrong in the user's terms:

* :class:`QueryRejected` a bad expression, with Prometheus's own message
  (``1:14: parse error: unexpected right parenthesis ')'``);
* :class:`PrometheusUnreachable` no answer (refused, timed out, TLS failure), naming the URL;
* :class:`PrometheusAuthError` 401/403: the credentials were refused (never shown);
* :class:`PrometheusError` anything else that is not a Prometheus answer.

Credentials are read when the client is made (bearer token or basic auth, from an
environment variable or a file) and never appear in messages. TLS verification is on
unless the inventory turns it off or names a CA bundle.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import orjson
import urllib3
import yaml

from harness.errors import PermanentError, PowercutError, TemporaryError
from harness.inventory import Secret
from harness.inventory.slo import PrometheusSpec

__all__ = [
    "PrometheusAuthError",
    "PrometheusClient",
    "PrometheusError",
    "PrometheusUnreachable",
    "QueryRejected",
    "Series",
]


class PrometheusError(PowercutError):
    """Prometheus answered, but not with a usable API response."""


class PrometheusUnreachable(PrometheusError, TemporaryError):
    """No answer from the Prometheus server (refused, timed out, TLS handshake failed)."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"Prometheus at {url} did not answer: {reason}")


class PrometheusAuthError(PrometheusError, PermanentError):
    """401/403: the credentials were refused (or none were given)."""

    def __init__(self, url: str, status: int) -> None:
        self.url = url
        self.status = status
        super().__init__(
            f"Prometheus at {url} refused the request ({status}): check the inventory's "
            "prometheus credentials (bearer_token_env/_file or username + password_env/_file)"
        )


class QueryRejected(PrometheusError, PermanentError):
    """Prometheus refused to run the expression; ``server_message`` is its own reason."""

    def __init__(self, expr: str, error_type: str, server_message: str) -> None:
        self.expr = expr
        self.error_type = error_type
        self.server_message = server_message
        super().__init__(f"Prometheus rejected {expr!r} ({error_type}): {server_message}")


@dataclass(frozen=True, slots=True)
class Series:
    """One time series of a query's answer: its labels and its (unix time, value) points."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]

    @property
    def name(self) -> str:
        """``{service="web"}`` (``{}`` for a series without labels), for messages."""
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        return "{" + inner + "}"


def _value(text: object) -> float:
    try:
        return float(str(text))  # "NaN", "+Inf" and "-Inf" included
    except ValueError:
        raise PrometheusError(f"a sample value {text!r} is not a number") from None


def _series(result: object, expr: str) -> list[Series]:
    if not isinstance(result, dict):
        raise PrometheusError(f"{expr!r}: the answer has no data")
    kind = result.get("resultType")
    items = result.get("result")
    if kind in ("scalar", "string"):
        ts, val = items  # type: ignore[misc]
        return [Series({}, ((float(ts), _value(val)),))]
    if not isinstance(items, list):
        raise PrometheusError(f"{expr!r}: the answer has no result list")
    out = []
    for item in items:
        labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        if kind == "matrix":
            points = tuple((float(t), _value(v)) for t, v in item.get("values") or ())
        elif kind == "vector":
            t, v = item["value"]
            points = ((float(t), _value(v)),)
        else:
            raise PrometheusError(f"{expr!r}: unknown result type {kind!r}")
        out.append(Series(labels, points))
    return out


class PrometheusClient:
    """The Prometheus HTTP API of ``spec``. One connection pool; safe to share between
    threads (urllib3's pool is)."""

    def __init__(self, spec: PrometheusSpec, *, owner: str = "prometheus") -> None:
        self.spec = spec
        self.url = spec.url
        self.timeout_s = spec.timeout
        headers = {"Accept": "application/json"}
        if spec.bearer_token_env or spec.bearer_token_file:
            token = Secret(
                env=spec.bearer_token_env, file=spec.bearer_token_file, owner=owner
            ).reveal()
            headers["Authorization"] = f"Bearer {token.strip()}"
        elif spec.username:
            password = Secret(env=spec.password_env, file=spec.password_file, owner=owner).reveal()
            raw = f"{spec.username}:{password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        self._headers = headers
        ctx: ssl.SSLContext | None = None
        if spec.url.startswith("https:"):
            cafile = str(spec.verify_tls) if not isinstance(spec.verify_tls, bool) else None
            ctx = ssl.create_default_context(cafile=cafile)
            if spec.verify_tls is False:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
        self._pool = urllib3.PoolManager(num_pools=2, maxsize=4, ssl_context=ctx, retries=False)

    def close(self) -> None:
        self._pool.clear()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- API ---------------------------------------------------------------------------------

    def query(self, expr: str, *, at: float | None = None) -> list[Series]:
        """The instant query ``expr`` at unix time ``at`` (now by default)."""
        fields = {"query": expr, "time": f"{at if at is not None else time.time():.3f}"}
        return _series(self._call("/api/v1/query", fields, expr), expr)

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        """The range query ``expr`` over [start, end] (unix seconds), one point per ``step``."""
        if end < start:
            raise PermanentError(f"query window ends ({end:.3f}) before it starts ({start:.3f})")
        # Prometheus refuses more than 11,000 points per series; widen the step if needed.
        step = max(step, (end - start) / 10_000, 0.001)
        fields = {
            "query": expr,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step:.3f}",
        }
        return _series(self._call("/api/v1/query_range", fields, expr), expr)

    def alert_rules(self) -> dict[str, Mapping[str, str]]:
        """Alerting rules Prometheus evaluates: name -> labels of the rule."""
        data = self._call("/api/v1/rules", {"type": "alert"}, "rules", method="GET")
        groups = data.get("groups") if isinstance(data, dict) else None
        out: dict[str, Mapping[str, str]] = {}
        for group in groups or ():
            for rule in group.get("rules") or ():
                if rule.get("type") == "alerting":
                    out[str(rule.get("name"))] = dict(rule.get("labels") or {})
        return out

    def caught_up(self) -> tuple[float | None, float | None]:
        """How far Prometheus has got: the latest unix time every active scrape target was
        scraped at (a target not scraped yet counts as never), and the latest every rule
        group was evaluated at (None: no target, no rule group)."""
        targets = self._call("/api/v1/targets", {"state": "active"}, "targets", method="GET")
        active = targets.get("activeTargets") if isinstance(targets, dict) else None
        scrapes = [_rfc3339(t.get("lastScrape")) for t in active or ()]
        scraped = min(scrapes) if scrapes else None
        if scraped is None and self._scrape_jobs():
            scraped = 0.0  # just started: its targets are not discovered yet
        data = self._call("/api/v1/rules", {}, "rules", method="GET")
        groups = data.get("groups") if isinstance(data, dict) else None
        evaluated = [_rfc3339(g.get("lastEvaluation")) for g in groups or ()]
        return scraped, (min(evaluated) if evaluated else None)

    def _scrape_jobs(self) -> int:
        """How many scrape jobs Prometheus's configuration has."""
        data = self._call("/api/v1/status/config", {}, "config", method="GET")
        text = data.get("yaml") if isinstance(data, dict) else None
        try:
            config = yaml.safe_load(str(text or "")) or {}
        except yaml.YAMLError:
            return 0
        jobs = config.get("scrape_configs") if isinstance(config, dict) else None
        return len(jobs) if isinstance(jobs, list) else 0

    def ready(self) -> bool:
        """Whether ``/-/ready`` answers 200 (the server is up and its storage ready)."""
        try:
            resp = self._pool.request(
                "GET",
                self.url + "/-/ready",
                headers=self._headers,
                timeout=urllib3.Timeout(total=self.timeout_s),
            )
        except (urllib3.exceptions.HTTPError, OSError):
            return False
        return resp.status == 200

    # -- transport ---------------------------------------------------------------------------

    def _call(
        self, path: str, fields: Mapping[str, str], what: str, *, method: str = "POST"
    ) -> Any:
        url = self.url + path
        try:
            if method == "POST":
                resp = self._pool.request(
                    "POST",
                    url,
                    body=urlencode(dict(fields)),
                    headers={**self._headers, "Content-Type": "application/x-www-form-urlencoded"},
                    timeout=urllib3.Timeout(total=self.timeout_s),
                )
            else:
                resp = self._pool.request(
                    "GET",
                    url,
                    fields=dict(fields),
                    headers=self._headers,
                    timeout=urllib3.Timeout(total=self.timeout_s),
                )
        except urllib3.exceptions.SSLError as exc:
            raise PrometheusUnreachable(self.url, f"TLS: {_reason(exc)}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise PrometheusUnreachable(self.url, _reason(exc)) from None
        if resp.status in (401, 403):
            raise PrometheusAuthError(self.url, resp.status)
        try:
            body = orjson.loads(resp.data)
        except orjson.JSONDecodeError:
            raise PrometheusError(
                f"{url} answered {resp.status} with something other than Prometheus JSON "
                f"({resp.headers.get('Content-Type', 'no content type')}): is the URL right?"
            ) from None
        if not isinstance(body, dict) or "status" not in body:
            raise PrometheusError(f"{url} answered {resp.status} without a Prometheus status")
        if body["status"] != "success":
            error_type = str(body.get("errorType") or resp.status)
            message = str(body.get("error") or "no reason given")
            if error_type in ("bad_data", "execution") or resp.status in (400, 422):
                raise QueryRejected(what, error_type, message)
            if resp.status >= 500 or error_type in ("timeout", "unavailable", "canceled"):
                raise _temporary(f"Prometheus at {self.url}: {error_type}: {message}")
            raise PrometheusError(f"Prometheus at {self.url}: {error_type}: {message}")
        return body.get("data")


def _rfc3339(text: object) -> float:
    """Unix time of Prometheus's ``2026-11-26T16:30:01.123456789Z`` (0 when unparsable or
    never: ``0001-01-01T00:00:00Z``)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", str(text))
    if m is None:
        return 0.0
    try:
        base = dt.datetime.fromisoformat(m.group(1) + (m.group(3).replace("Z", "+00:00")))
    except ValueError:
        return 0.0
    return max(0.0, base.timestamp() + float("0" + (m.group(2) or ".0")))


class _PrometheusTemporary(PrometheusError, TemporaryError):
    """Prometheus answered with a 5xx or a timeout: retrying may help."""


def _temporary(message: str) -> PrometheusError:
    return _PrometheusTemporary(message)


def _reason(exc: BaseException) -> str:
    """The innermost useful reason of a urllib3 / socket error (no URL repeated)."""
    reason: object = getattr(exc, "reason", None)
    while isinstance(reason, BaseException) and getattr(reason, "reason", None) is not None:
        reason = getattr(reason, "reason", None)
    text = str(reason if reason is not None else exc)
    # urllib3 prefixes "<urllib3.connection.HTTPConnection object at 0x..>: "
    if ">: " in text:
        text = text.split(">: ", 1)[1]
    return text or type(exc).__name__


def finite(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points whose value is a number (NaN dropped; +/-Inf kept)."""
    return [(t, v) for t, v in points if not math.isnan(v)]
