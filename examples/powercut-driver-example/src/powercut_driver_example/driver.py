"""The outlets of a PDU with a JSON-over-HTTP API, as a powercut power driver.

``GET {endpoint}/outlets/{n}`` answers ``{"state": "on" | "off"}``; ``POST`` with
``{"state": "off"}`` switches the outlet. Basic auth. Every call returns once the outlet
reads back the new state, or raises within ``timeout_s``: ``PermanentError`` for refused
credentials or an unknown outlet (at once), ``TemporaryError`` for what may pass (a
connection refused, a 5xx) until the deadline, then ``WaitTimeout``.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from typing import Any

from pydantic import Field

from harness.errors import PermanentError, TemporaryError, WaitTimeout
from harness.inventory import NodeSpec, PowerSpec
from harness.power.base import PowerState
from harness.power.plugin import DriverOptions, DriverPlugin, FieldError, Seconds


class PduOptions(DriverOptions):
    """``power.extra`` of driver ``example-pdu``."""

    outlet: int = Field(ge=1, le=48, description="the node's outlet, 1-48")
    timeout_s: Seconds = Field(default=30.0, description="deadline of one power action")
    poll_s: Seconds = Field(default=0.2, description="interval of state reads")
    settle_s: Seconds = Field(default=1.0, description="cycle: time off before power on")


class PduDriver:
    """One node's outlet."""

    def __init__(
        self,
        node: str,
        endpoint: str,
        username: str,
        password: str,
        *,
        outlet: int,
        timeout_s: float = 30.0,
        poll_s: float = 0.2,
        settle_s: float = 1.0,
    ) -> None:
        self.node = node
        self.url = f"{endpoint.rstrip('/')}/outlets/{outlet}"
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.settle_s = settle_s
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self._auth = f"Basic {token}"  # never in repr, str or errors

    def __repr__(self) -> str:
        return f"PduDriver(node={self.node!r}, url={self.url!r})"

    def _call(self, body: dict[str, str] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - the inventory's http(s) endpoint
            self.url, data=data, method="POST" if data else "GET"
        )
        request.add_header("Authorization", self._auth)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
                answer: dict[str, Any] = json.loads(response.read() or b"{}")
                return answer
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403, 404):
                raise PermanentError(f"{self.node}: PDU {self.url} answered {exc.code}") from None
            raise TemporaryError(f"{self.node}: PDU {self.url} answered {exc.code}") from None
        except OSError as exc:
            raise TemporaryError(f"{self.node}: PDU {self.url} unreachable: {exc}") from None

    def state(self) -> PowerState:
        state = self._call().get("state")
        return PowerState(state) if state in ("on", "off") else PowerState.UNKNOWN

    def _switch(self, want: PowerState) -> None:
        start = time.monotonic()
        last = "nothing"
        sent = False
        while time.monotonic() - start < self.timeout_s:
            try:
                if not sent:
                    self._call({"state": want.value})
                    sent = True
                seen = self.state()
                if seen is want:
                    return
                last = f"outlet {seen.value}"
            except TemporaryError as exc:
                last = str(exc)
            time.sleep(self.poll_s)
        raise WaitTimeout(f"{self.node} outlet {want.value}", last, time.monotonic() - start)

    def off(self, *, graceful: bool = False) -> None:
        if graceful:
            raise PermanentError(f"{self.node}: a PDU cannot shut a node down gracefully")
        self._switch(PowerState.OFF)

    def on(self) -> None:
        self._switch(PowerState.ON)

    def cycle(self) -> None:
        self._switch(PowerState.OFF)
        time.sleep(self.settle_s)
        self._switch(PowerState.ON)

    def close(self) -> None:
        pass


class PduPlugin(DriverPlugin[PduOptions]):
    """Driver ``example-pdu``: endpoint (http or https URL), username and a password."""

    options = PduOptions
    fields = frozenset({"endpoint", "username", "password"})

    def check(self, spec: PowerSpec) -> None:
        if not spec.endpoint or not spec.endpoint.startswith(("http://", "https://")):
            raise FieldError(("endpoint",), "must be the PDU's URL, 'http(s)://host:port'")
        self.require(spec, "username", "password")

    def make(
        self, node: NodeSpec, spec: PowerSpec, options: PduOptions, settings: dict[str, Any]
    ) -> PduDriver:
        return PduDriver(
            node.name,
            spec.endpoint or "",
            spec.username or "",
            self.password(node, spec),
            **{"outlet": options.outlet, **settings},
        )


PLUGIN = PduPlugin()
