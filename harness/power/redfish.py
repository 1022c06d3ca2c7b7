"""Power control through a Redfish BMC (``sushy`` client).

The driver finds the node's ComputerSystem (by ``system_id``, else the one whose ``Name``
is the node name, else the only one), checks every ResetType against the system's
``ResetType@Redfish.AllowableValues`` before sending it, and after the BMC accepted a
request reads ``PowerState`` back until it shows the new state.

Mapping: ``off(graceful=True)`` -> GracefulShutdown, ``off()`` -> ForceOff, ``on()`` -> On,
``cycle()`` -> PowerCycle, or ForceRestart where PowerCycle is not allowed. A node already
in the requested state gets no request; ``cycle()`` of a node that is off powers it on.

Connections: sushy asks the BMC to close the connection after every request (some BMCs choke
on long-lived ones), so each request opens its own TLS connection. A prepared power-off
(:meth:`RedfishDriver.prepare_off`) instead keeps the connection of its last read open for
its POST, so the request fired at a synchronized cut is one write on a connection that is
already open and authenticated, not a TCP and TLS handshake; the POST itself asks to close.

Errors: 401/403, a 400 (e.g. a refused ResetType), TLS verification failures and a system
that cannot be found are ``PermanentError`` at once; connection failures and 5xx are
retried until the deadline. TLS verification is on by default; ``verify`` may be a CA
bundle path. The password never appears in messages or ``repr()``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Collection
from typing import Any, Literal, TypeVar

import requests
import sushy
from sushy import auth as sushy_auth
from sushy import connector as sushy_connector
from sushy import exceptions as sushy_exc

from harness.errors import PermanentError, PowercutError, TemporaryError
from harness.power._wait import (
    READBACK_FIRST_POLL_S,
    SYSTEM_CLOCK,
    Clock,
    Deadline,
    Secret,
    before_acting,
    redact,
    refusal_acted_on_nothing,
    retry,
    wait_until,
)
from harness.power.base import NothingToDo, PowerState, PreparedPower, ResetType
from harness.power.probe import ProbeReport, tls_chain

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Longest single HTTP request; waits are bounded by ``timeout_s`` plus at most this.
MAX_REQUEST_S = 10.0

_STATES = {"On": PowerState.ON, "Off": PowerState.OFF}


class RedfishDriver:
    """Power control of ``node`` through the Redfish service at ``url``."""

    def __init__(
        self,
        node: str,
        url: str,
        username: str,
        password: str,
        *,
        verify: bool | str = True,
        auth: Literal["basic", "session"] = "basic",
        system_id: str | None = None,
        timeout_s: float = 60,
        poll_s: float = 0.5,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if auth not in ("basic", "session"):
            raise PermanentError(f"{node}: Redfish auth must be 'basic' or 'session', not {auth!r}")
        if not url.startswith(("https://", "http://")):
            raise PermanentError(f"{node}: Redfish URL must start with https:// ({url!r})")
        self.node = node
        self.url = url.rstrip("/")
        self.username = username
        self._password = Secret(password)
        self.verify = verify
        self.auth = auth
        self.system_id = system_id
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self._clock = clock
        self._lock = threading.RLock()
        self._root: Any = None
        self._connector: Any = None
        self._auth: Any = None
        self._system: Any = None
        self._keep_open = False  # keep the connection open after a request (see prepare_off)

    def __repr__(self) -> str:
        return (
            f"RedfishDriver(node={self.node!r}, url={self.url!r}, username={self.username!r}, "
            f"auth={self.auth!r}, verify={self.verify!r}, system_id={self.system_id!r})"
        )

    # -- PowerDriver --------------------------------------------------------------------

    def state(self) -> PowerState:
        with self._lock:
            deadline = self._deadline()
            return retry(
                lambda: self._read_state()[0],
                action=f"{self.node}: Redfish {self.url} to report the power state",
                deadline=deadline,
                poll_s=self.poll_s,
            )

    def off(self, *, graceful: bool = False) -> None:
        reset = ResetType.GRACEFUL_SHUTDOWN if graceful else ResetType.FORCE_OFF
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                if self._current(deadline) is PowerState.OFF:
                    return
            self._send(reset, deadline)
            self._wait_for(PowerState.OFF, deadline, reset)

    def prepare_off(self, *, graceful: bool = False) -> PreparedPower:
        """Connect (TLS), authenticate, find the system, read its state and the reset types
        it allows, now; the returned request then sends one POST when fired."""
        reset = ResetType.GRACEFUL_SHUTDOWN if graceful else ResetType.FORCE_OFF
        return self._prepare(reset, PowerState.OFF)

    def prepare_on(self) -> PreparedPower:
        """Like :meth:`prepare_off`, for ResetType On."""
        return self._prepare(ResetType.ON, PowerState.ON)

    def _prepare(self, reset: ResetType, want: PowerState) -> PreparedPower:
        with self._lock:
            deadline = self._deadline()
            # The reads below leave their connection open for the POST (closed by it).
            self._set_keep_alive(True)
            try:
                with before_acting():
                    if self._current(deadline) is want:
                        self._set_keep_alive(False)
                        return NothingToDo()
                    allowed = self._call("read the allowed reset types", self._allowed, deadline)
                    if reset.value not in allowed:
                        raise PermanentError(
                            f"{self.node}: the Redfish system does not allow ResetType "
                            f"{reset.value}; valid values: {', '.join(sorted(allowed)) or 'none'}"
                        )
            except BaseException:
                self._set_keep_alive(False)
                raise
            if self.auth == "basic":
                try:
                    return _SplitReset(self, reset, want, deadline)
                except (OSError, sushy_exc.SushyError) as exc:  # the whole POST still works
                    log.debug("%s: no separate connection for the POST: %s", self.node, exc)
        return _PreparedReset(self, reset, want, deadline)

    def on(self) -> None:
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                if self._current(deadline) is PowerState.ON:
                    return
            self._send(ResetType.ON, deadline)
            self._wait_for(PowerState.ON, deadline, ResetType.ON)

    def cycle(self) -> None:
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                if self._current(deadline) is PowerState.OFF:
                    reset = ResetType.ON
                else:
                    allowed = self._call("read the allowed reset types", self._allowed, deadline)
                    reset = (
                        ResetType.POWER_CYCLE
                        if ResetType.POWER_CYCLE.value in allowed
                        else ResetType.FORCE_RESTART
                    )
            self._send(reset, deadline)
            self._wait_for(PowerState.ON, deadline, reset)

    def probe(self) -> ProbeReport:
        """A basic read-only probe: a new connection (and session), one power state read
        timed apart, the reset types the system allows, the server's certificate. (What a
        vendor profile adds, session limits and Task support, is not probed here.)"""
        with self._lock:
            self.close()
            deadline = self._deadline()
            started = self._clock.monotonic()
            allowed = self._call("read the allowed reset types", self._allowed, deadline)
            connected = self._clock.monotonic()
            state = self._current(deadline)
            read = self._clock.monotonic()
        chain, verified, why = tls_chain(self.url, self.verify)
        known = {t.value: t for t in ResetType}
        return ProbeReport(
            protocol="redfish",
            endpoint=self.url,
            state=state,
            authentication=f"{self.auth} as {self.username!r}",
            security="https" if self.url.startswith("https") else "http (no TLS)",
            privilege="-",
            reset_types=frozenset(known[v] for v in allowed if v in known),
            tls_chain=chain,
            tls_verified=verified,
            connect_s=connected - started,
            readback_s=read - connected,
            offered="ResetType " + ", ".join(sorted(allowed)),
            notes=(f"TLS not verified: {why}",) if why else (),
        )

    def close(self) -> None:
        with self._lock:
            auth, connector = self._auth, self._connector
            self._root = self._connector = self._auth = self._system = None
            if auth is not None:
                try:
                    auth.close()  # logs a Redfish session out; nothing for basic auth
                except sushy_exc.SushyError as exc:
                    log.debug("%s: closing the Redfish session failed: %s", self.node, exc)
            if connector is not None:
                connector.close()

    # -- steps --------------------------------------------------------------------------

    def _deadline(self) -> Deadline:
        return Deadline(self.timeout_s, self._clock)

    def _current(self, deadline: Deadline) -> PowerState:
        return self._call("read the power state", lambda: self._read_state()[0], deadline)

    def _send(self, reset: ResetType, deadline: Deadline) -> None:
        # A refusal (401/403, 400, a ResetType not allowed, TLS) means the BMC took nothing.
        with refusal_acted_on_nothing():
            self._call(f"accept ResetType {reset.value}", lambda: self._reset(reset), deadline)
        log.info("%s: Redfish accepted ResetType %s", self.node, reset.value)

    def _wait_for(self, want: PowerState, deadline: Deadline, reset: ResetType) -> None:
        wait_until(
            self._read_state,
            lambda seen: seen[0] is want,
            expected=(
                f"{self.node}: PowerState {want.value} from Redfish {self.url} "
                f"after ResetType {reset.value}"
            ),
            deadline=deadline,
            poll_s=self.poll_s,
            first_poll_s=READBACK_FIRST_POLL_S,
            describe=lambda seen: f"PowerState {seen[1]}",
        )

    def _call(self, what: str, operation: Callable[[], T], deadline: Deadline) -> T:
        return retry(
            operation,
            action=f"{self.node}: Redfish {self.url} to {what}",
            deadline=deadline,
            poll_s=self.poll_s,
        )

    # -- sushy --------------------------------------------------------------------------

    def _read_state(self) -> tuple[PowerState, str]:
        def read() -> tuple[PowerState, str]:
            system = self._get_system()
            system.refresh(force=True)
            raw = system.power_state
            value = raw.value if raw is not None else "absent"
            return _STATES.get(value, PowerState.UNKNOWN), value

        return self._sushy("read the power state", read)

    def _allowed(self) -> set[str]:
        def read() -> set[str]:
            return {v.value for v in self._get_system().get_allowed_reset_system_values()}

        return self._sushy("read the allowed reset types", read)

    def _reset(self, reset: ResetType) -> None:
        allowed = self._allowed()
        if reset.value not in allowed:
            raise PermanentError(
                f"{self.node}: the Redfish system does not allow ResetType {reset.value}; "
                f"valid values: {', '.join(sorted(allowed)) or 'none'}"
            )
        self._sushy(
            f"ResetType {reset.value}",
            lambda: self._get_system().reset_system(sushy.ResetType(reset.value)),
        )

    def _sushy(self, what: str, operation: Callable[[], T]) -> T:
        """Run a sushy call; translate its errors into the harness's error types."""
        try:
            return operation()
        except PowercutError:
            raise
        except sushy_exc.SushyError as exc:
            error = self._translate(what, exc)
        if isinstance(error, TemporaryError):
            self._system = None  # re-read the system on the next attempt
        raise error

    def _translate(self, what: str, exc: sushy_exc.SushyError) -> PowercutError:
        where = f"{self.node}: Redfish {self.url}"
        text = redact(str(exc), self._password)
        if isinstance(exc, sushy_exc.AccessError):
            hint = (
                "; with auth='session' this may also mean the BMC has no usable "
                "SessionService (try auth='basic')"
                if self.auth == "session"
                else ""
            )
            return PermanentError(
                f"{where} refused the credentials of user {self.username!r} "
                f"(HTTP {exc.status_code}) during {what}{hint}"
            )
        if isinstance(exc, sushy_exc.ServerSideError):
            return TemporaryError(f"{where}: server error during {what}: {text}")
        if isinstance(exc, sushy_exc.ConnectionError):
            if _is_tls_error(exc):
                return PermanentError(
                    f"{where}: TLS verification failed during {what} "
                    f"(verify={self.verify!r}; give the BMC's CA bundle as verify): {text}"
                )
            self._drop_connection()
            return TemporaryError(f"{where}: cannot connect during {what}: {text}")
        if isinstance(exc, sushy_exc.ResourceNotFoundError):
            return PermanentError(f"{where}: not found during {what}: {text}")
        if isinstance(exc, sushy_exc.BadRequestError):
            return PermanentError(f"{where} refused {what}: {text}")
        return PermanentError(f"{where}: {what} failed: {text}")

    def _set_keep_alive(self, on: bool) -> None:
        """Ask the BMC to keep the connection open after each request (``on``), or to close
        it (sushy's default)."""
        self._keep_open = on
        if self._connector is not None:
            self._connector.keep_alive(on)

    def _drop_connection(self) -> None:
        connector = self._connector
        self._root = self._connector = self._auth = self._system = None
        if connector is not None:
            connector.close()

    def _get_root(self) -> Any:
        if self._root is None:
            password = self._password.reveal()
            auth: Any = (
                sushy_auth.BasicAuth(username=self.username, password=password)
                if self.auth == "basic"
                else sushy_auth.SessionAuth(username=self.username, password=password)
            )
            request_s = max(1.0, min(MAX_REQUEST_S, self.timeout_s))
            connector = _Connector(
                self.url,
                verify=self.verify,
                # One attempt per call: this driver retries, within its own deadline.
                server_side_retries=1,
                server_side_retries_delay=0,
                default_request_timeout=request_s,
                connect_timeout=min(5.0, request_s),
            )
            connector.keep_alive(self._keep_open)
            try:
                self._root = sushy.Sushy(self.url, auth=auth, connector=connector)
            except BaseException:
                connector.close()
                raise
            self._connector, self._auth = connector, auth
        return self._root

    def _get_system(self) -> Any:
        if self._system is None:
            self._system = self._discover(self._get_root())
        return self._system

    def _discover(self, root: Any) -> Any:
        collection = root.get_system_collection()
        paths: list[str] = list(collection.members_identities)
        if self.system_id is not None:
            for path in paths:
                if path.rstrip("/").rsplit("/", 1)[-1] == self.system_id:
                    return root.get_system(path)
            try:  # some BMCs (sushy-tools) also answer to an alias, e.g. the system name
                return root.get_system(f"{collection.path.rstrip('/')}/{self.system_id}")
            except sushy_exc.ResourceNotFoundError:
                raise PermanentError(
                    f"{self.node}: Redfish {self.url} has no system {self.system_id!r}; "
                    f"systems: {', '.join(_ids(paths)) or 'none'}"
                ) from None
        systems = [root.get_system(path) for path in paths]
        named = [s for s in systems if s.name == self.node]
        if len(named) == 1:
            return named[0]
        if len(systems) == 1:
            return systems[0]
        listing = ", ".join(f"{s.identity} (Name {s.name!r})" for s in systems) or "none"
        raise PermanentError(
            f"{self.node}: cannot tell which Redfish system at {self.url} is this node: "
            f"{'several are' if named else 'none is'} named {self.node!r}; set system_id. "
            f"Systems: {listing}"
        )


class _Connector(sushy_connector.Connector):  # type: ignore[misc]  # untyped sushy
    """sushy's connector, which can keep its connection open between two requests."""

    def keep_alive(self, on: bool) -> None:
        # sushy sets "Connection: close" on its session's headers at construction.
        self._session.headers["Connection"] = "keep-alive" if on else "close"


class _PreparedReset:
    """One ResetType POST over a connection opened, authenticated and pointed at the system
    in advance (see :meth:`RedfishDriver.prepare_off`)."""

    def __init__(
        self, driver: RedfishDriver, reset: ResetType, want: PowerState, deadline: Deadline
    ) -> None:
        self.driver = driver
        self.reset = reset
        self.want = want
        self.deadline = deadline

    def fire(self) -> None:
        d = self.driver

        def post() -> None:
            d._sushy(
                f"ResetType {self.reset.value}",
                lambda: d._get_system().reset_system(sushy.ResetType(self.reset.value)),
            )

        with d._lock, refusal_acted_on_nothing():
            d._set_keep_alive(False)  # the POST goes over the open connection, then closes it
            d._call(f"accept ResetType {self.reset.value}", post, self.deadline)
        log.info("%s: Redfish accepted ResetType %s", d.node, self.reset.value)

    def confirm(self) -> None:
        with self.driver._lock:
            self.driver._wait_for(self.want, self.deadline, self.reset)


class _SplitReset(_PreparedReset):
    """The ResetType POST as bytes on a TLS connection of its own, opened and written ahead
    at the prepare: a synchronized cut (:mod:`harness.power.volley`) writes every node's
    request from a few threads and stamps every answer from one selector. An answer that is
    not a 2xx, or none, is retried by :meth:`_PreparedReset.fire` (sushy's whole POST, its
    retries and its errors)."""

    def __init__(
        self, driver: RedfishDriver, reset: ResetType, want: PowerState, deadline: Deadline
    ) -> None:
        super().__init__(driver, reset, want, deadline)
        target = driver._get_system()._get_reset_action_element().target_uri
        url = urllib.parse.urlsplit(driver.url)
        host, port = url.hostname or "localhost", url.port or (443 if url.scheme == "https" else 80)
        body = json.dumps({"ResetType": reset.value}).encode()
        user = f"{driver.username}:{driver._password.reveal()}".encode()
        head = (
            f"POST {target} HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Authorization: Basic {base64.b64encode(user).decode()}\r\n"
            "Content-Type: application/json\r\nAccept: application/json\r\n"
            "OData-Version: 4.0\r\nUser-Agent: powercut\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self._request = head.encode() + body
        self._answer = b""
        timeout = max(1.0, min(MAX_REQUEST_S, driver.timeout_s))
        raw = socket.create_connection((host, port), timeout=timeout)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock: socket.socket = (
                _tls_context(driver.verify).wrap_socket(raw, server_hostname=host)
                if url.scheme == "https"
                else raw
            )
        except BaseException:
            raw.close()
            raise

    def send(self) -> None:
        self._sock.sendall(self._request)

    def answer_fd(self) -> int:
        self._sock.setblocking(False)  # feed() reads what has arrived, never waits
        return self._sock.fileno()

    def feed(self) -> bool:
        while True:
            try:
                chunk = self._sock.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                return False
            if not chunk:
                return True  # closed: whatever arrived is all there is
            self._answer += chunk
            if b"\r\n\r\n" in self._answer:
                return True

    def accepted(self) -> bool:
        self.close()
        status = self._answer.split(b"\r\n", 1)[0].split()
        ok = len(status) >= 2 and status[1].isdigit() and 200 <= int(status[1]) < 300
        if ok:
            log.info("%s: Redfish accepted ResetType %s", self.driver.node, self.reset.value)
        else:
            log.info(
                "%s: the prepared POST got %r: sending it again the whole way",
                self.driver.node,
                self._answer[:80] or "no answer",
            )
        return ok

    def close(self) -> None:
        self._sock.close()


def _tls_context(verify: bool | str) -> ssl.SSLContext:
    if verify is False:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if isinstance(verify, str):
        if os.path.isdir(verify):
            return ssl.create_default_context(capath=verify)
        return ssl.create_default_context(cafile=verify)
    return ssl.create_default_context()


def _ids(paths: Collection[str]) -> list[str]:
    return [p.rstrip("/").rsplit("/", 1)[-1] for p in paths]


def _is_tls_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, requests.exceptions.SSLError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
