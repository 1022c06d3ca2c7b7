"""Power control through a Redfish BMC (``sushy`` client).

The driver finds the node's ComputerSystem (by ``system_id``, else the one whose ``Name``
is the node name, else the only one), checks every ResetType against the system's
``ResetType@Redfish.AllowableValues`` before sending it, and after the BMC accepted a
request reads ``PowerState`` back until it shows the new state.

Mapping: ``off(graceful=True)`` -> GracefulShutdown, ``off()`` -> ForceOff, ``on()`` -> On,
``cycle()`` -> the first of :data:`CYCLE_PLANS` whose ResetTypes the system allows
(PowerCycle; else ForceOff then On, as on iLO; else ForceRestart), or a ``PermanentError``
naming the allowed values. A node already in the requested state gets no request, nor does
one already on its way there (``PowerState`` PoweringOn / PoweringOff: waited through);
``cycle()`` of a node that is off powers it on.

Services as vendors ship them (docs/bmc.md): a reset answered 202 Accepted with a Task
monitor (``Location``) is followed until its ``TaskState`` is Completed (Exception, Killed or
Cancelled end the wait at once), then ``PowerState`` is read back; 503 or 429 with
``Retry-After`` is retried after the time asked for if the deadline allows it; a read-back
that takes its time is waited for up to ``timeout_s``; a GracefulShutdown the node never
carries out ends in :class:`~harness.power.base.GracefulIgnored` (the node ignored it, not a
harness error). Vendor differences are data (:data:`CYCLE_PLANS`, :data:`TRANSITIONS`,
:data:`TASK_FAILED`), not branches on a vendor's name.

Sessions: with ``auth="session"`` the driver opens one Redfish session (X-Auth-Token) at
its first request, reuses it for every request after (a dropped connection reconnects
with the same token) and deletes it in :meth:`RedfishDriver.close`, which the driver's
owners call on every path (and ``with RedfishDriver(...)`` does): BMCs such as iDRAC and
iLO cap their sessions, and a leaked one locks automation out until it times out. A Ctrl-C
cannot cut the log-in or the log-out half-way (SIGINT and SIGTERM are held meanwhile; a
second one stops at once), and the socket a request interrupted while connecting leaves is
closed at once, not when the exception is gone (docs/bmc.md, "A Ctrl-C and the session").

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
import contextlib
import json
import logging
import os
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

import requests
import sushy
from sushy import auth as sushy_auth
from sushy import connector as sushy_connector
from sushy import exceptions as sushy_exc

from harness.errors import PermanentError, PowercutError, TemporaryError, WaitTimeout
from harness.power._interrupts import close_sockets_left_by, held_signals
from harness.power._wait import (
    READBACK_FIRST_POLL_S,
    SYSTEM_CLOCK,
    Clock,
    Deadline,
    Secret,
    Throttled,
    before_acting,
    redact,
    refusal_acted_on_nothing,
    retry,
    wait_until,
)
from harness.power.base import (
    GracefulIgnored,
    NothingToDo,
    PowerState,
    PreparedPower,
    ResetType,
)
from harness.power.probe import ProbeReport, tls_chain

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Longest single HTTP request; waits are bounded by ``timeout_s`` plus at most this.
MAX_REQUEST_S = 10.0
#: Longest connect, and longest wait for the answer, of one attempt to log a session out
#: (two at most): how long a Ctrl-C held during a log-out can wait (see close()).
LOGOUT_REQUEST_S: Final = 5.0

_STATES = {"On": PowerState.ON, "Off": PowerState.OFF}

#: PowerState values a BMC shows on its way to a state: a request for that state is not
#: sent again (some BMCs refuse one while the last is in progress), it is waited for.
TRANSITIONS: Final[Mapping[str, PowerState]] = {
    "PoweringOn": PowerState.ON,
    "PoweringOff": PowerState.OFF,
}

#: How ``cycle()`` power-cycles a node that is on: the first plan whose every ResetType the
#: system allows. PowerCycle removes power; iLO and Supermicro offer none, so ForceOff then
#: On (each read back); ForceRestart (a reset without power removal) only as a last resort.
CYCLE_PLANS: Final[tuple[tuple[ResetType, ...], ...]] = (
    (ResetType.POWER_CYCLE,),
    (ResetType.FORCE_OFF, ResetType.ON),
    (ResetType.FORCE_RESTART,),
)

#: Redfish TaskState values that end a Task without success.
TASK_FAILED: Final = frozenset({"Exception", "Killed", "Cancelled"})
#: The TaskState that ends a Task with success.
TASK_DONE: Final = "Completed"

#: A ``Retry-After`` longer than this is read as this (a BMC's mistake must not stall a wait).
MAX_RETRY_AFTER_S: Final = 60.0


@dataclass(frozen=True)
class Answer:
    """What a BMC answered one request: status, headers (lower-case names) and JSON body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, response: Any) -> Answer:
        try:
            body = response.json() if response.content else {}
        except ValueError:
            body = {}
        headers = {k.lower(): v for k, v in response.headers.items()}
        return cls(response.status_code, headers, body if isinstance(body, dict) else {})

    def task_monitor(self) -> str | None:
        """The Task monitor of a 202 Accepted answer (``Location``, else the body's Task)."""
        if self.status != 202:
            return None
        location = self.headers.get("location")
        if location:
            return location
        odata = self.body.get("@odata.id")
        return odata if isinstance(odata, str) and odata else None


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` in seconds (delta-seconds; an HTTP date counts as 1 s), or None."""
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return 1.0
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


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
        self._last_answer: tuple[int, dict[str, str]] = (0, {})

    def __repr__(self) -> str:
        return (
            f"RedfishDriver(node={self.node!r}, url={self.url!r}, username={self.username!r}, "
            f"auth={self.auth!r}, verify={self.verify!r}, system_id={self.system_id!r})"
        )

    def __enter__(self) -> RedfishDriver:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

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
        self._power(reset, PowerState.OFF)

    def on(self) -> None:
        self._power(ResetType.ON, PowerState.ON)

    def _power(self, reset: ResetType, want: PowerState) -> None:
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                state, raw = self._current(deadline)
            if TRANSITIONS.get(raw) is want:  # on its way already: wait that out first
                state = self._settle(deadline)
            if state is want:
                return
            task = self._send(reset, deadline)
            self._wait_for(want, deadline, reset, task)

    def _settle(self, deadline: Deadline) -> PowerState:
        """Wait until PowerState is no longer a transition (:data:`TRANSITIONS`)."""
        seen = wait_until(
            self._read_state,
            lambda seen: seen[1] not in TRANSITIONS,
            expected=f"{self.node}: Redfish {self.url} to finish its power transition",
            deadline=deadline,
            poll_s=self.poll_s,
            first_poll_s=READBACK_FIRST_POLL_S,
            describe=lambda seen: f"PowerState {seen[1]}",
        )
        return seen[0]

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
                    if self._current(deadline)[0] is want:
                        self._set_keep_alive(False)
                        return NothingToDo()
                    allowed = self._call("read the allowed reset types", self._allowed, deadline)
                    self._check_allowed(reset, allowed)
            except BaseException:
                self._set_keep_alive(False)
                raise
            if self.auth == "basic":
                try:
                    return _SplitReset(self, reset, want, deadline)
                except (OSError, sushy_exc.SushyError) as exc:  # the whole POST still works
                    log.debug("%s: no separate connection for the POST: %s", self.node, exc)
        return _PreparedReset(self, reset, want, deadline)

    def cycle(self) -> None:
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                if self._current(deadline)[0] is PowerState.OFF:
                    plan: tuple[ResetType, ...] = (ResetType.ON,)
                else:
                    allowed = self._call("read the allowed reset types", self._allowed, deadline)
                    plan = self._cycle_plan(allowed)
            for i, reset in enumerate(plan):
                want = PowerState.OFF if reset is ResetType.FORCE_OFF else PowerState.ON
                task = self._send(reset, deadline, first=i == 0)
                self._wait_for(want, deadline, reset, task)

    def _cycle_plan(self, allowed: set[str]) -> tuple[ResetType, ...]:
        for plan in CYCLE_PLANS:
            if all(r.value in allowed for r in plan):
                return plan
        ways = " or ".join("+".join(r.value for r in p) for p in CYCLE_PLANS)
        raise PermanentError(
            f"{self.node}: the Redfish system allows no way to power-cycle ({ways}); "
            f"allowed ResetTypes: {', '.join(sorted(allowed)) or 'none'}"
        )

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
            state = self._current(deadline)[0]
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
        """Log the Redfish session out (with ``auth="session"``) and close the connection.
        Idempotent; the driver opens a new session if it is used again."""
        with self._lock:
            auth, connector = self._auth, self._connector
            self._root = self._connector = self._auth = self._system = None
            if auth is not None and self.auth == "session":
                with held_signals(f"{self.node}: logging the Redfish session out"):
                    self._logout(auth, connector)
            if connector is not None:
                connector.close()

    def _logout(self, auth: Any, connector: Any) -> None:
        """Delete the session over a fresh connection: a request interrupted half-way
        (Ctrl-C) can leave the pooled one unusable. Each attempt is bounded by
        :data:`LOGOUT_REQUEST_S`; one more after a connection error (a 404 then says the first
        DELETE was done). A failure is logged: the BMC drops the session when it times out.
        Called with SIGINT and SIGTERM held (:func:`held_signals`)."""
        request_s = min(LOGOUT_REQUEST_S, self._request_s())
        connector.set_timeouts(connect_s=request_s, read_s=request_s)
        for attempt in (1, 2):
            connector.close()  # requests opens a new connection for the DELETE
            try:
                auth.close()  # sushy: DELETE of the session
            except sushy_exc.ConnectionError as exc:
                if attempt == 1:
                    continue
                error = redact(str(exc), self._password)
            except sushy_exc.ResourceNotFoundError:  # gone: timed out, or the first DELETE
                log.debug("%s: the Redfish session is gone already", self.node)
                return
            except sushy_exc.SushyError as exc:
                error = redact(str(exc), self._password)
            except BaseException as exc:  # a second Ctrl-C: the user insists
                close_sockets_left_by(exc)
                log.warning(
                    "%s: logging the Redfish session out was interrupted (it stays open on "
                    "the BMC until it times out)",
                    self.node,
                )
                raise
            else:
                log.debug("%s: Redfish session logged out", self.node)
                return
            log.warning(
                "%s: logging the Redfish session out failed (it stays open on the BMC "
                "until it times out): %s",
                self.node,
                error,
            )
            return

    # -- steps --------------------------------------------------------------------------

    def _deadline(self) -> Deadline:
        return Deadline(self.timeout_s, self._clock)

    def _current(self, deadline: Deadline) -> tuple[PowerState, str]:
        return self._call("read the power state", self._read_state, deadline)

    def _send(self, reset: ResetType, deadline: Deadline, *, first: bool = True) -> str | None:
        """POST ``reset``; its Task monitor if the BMC answered 202 with one."""
        # A refusal (401/403, 400, a ResetType not allowed, TLS) means the BMC took nothing,
        # unless an earlier step of the same request already acted.
        with refusal_acted_on_nothing() if first else _nothing():
            task = self._call(
                f"accept ResetType {reset.value}", lambda: self._reset(reset), deadline
            )
        log.info(
            "%s: Redfish accepted ResetType %s%s",
            self.node,
            reset.value,
            f" (Task {task})" if task else "",
        )
        return task

    def _wait_for(
        self, want: PowerState, deadline: Deadline, reset: ResetType, task: str | None = None
    ) -> None:
        try:
            if task is not None:
                self._follow_task(task, reset, deadline)
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
        except WaitTimeout as exc:
            if reset is not ResetType.GRACEFUL_SHUTDOWN or isinstance(exc, GracefulIgnored):
                raise
            raise GracefulIgnored(
                self.node,
                f"Redfish ResetType {reset.value}",
                last_seen=exc.last_seen,
                waited_s=exc.waited_s,
            ) from exc

    def _follow_task(self, monitor: str, reset: ResetType, deadline: Deadline) -> None:
        """Poll the Task monitor of an accepted reset until its TaskState is Completed."""

        def get() -> Answer:
            try:
                return self._get(monitor)
            except sushy_exc.ResourceNotFoundError:  # some BMCs remove a finished Task
                return Answer(204)

        def probe() -> str:
            answer = self._sushy("read the reset's Task", get)
            state = answer.body.get("TaskState")
            if answer.status == 202:
                return str(state or "Running")
            if state in TASK_FAILED:
                messages = "; ".join(
                    str(m.get("Message", m)) for m in answer.body.get("Messages", []) or []
                )
                raise PermanentError(
                    f"{self.node}: Redfish {self.url}: the Task {monitor} of ResetType "
                    f"{reset.value} ended {state}{': ' + messages if messages else ''}"
                )
            # 200 with the Task or the operation's own answer, or 204: the task is over.
            return str(state or TASK_DONE)

        wait_until(
            probe,
            lambda state: state == TASK_DONE,
            expected=f"{self.node}: the Task {monitor} of ResetType {reset.value} to complete",
            deadline=deadline,
            poll_s=self.poll_s,
            first_poll_s=READBACK_FIRST_POLL_S,
            describe=lambda state: f"TaskState {state}",
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

    def _check_allowed(self, reset: ResetType, allowed: set[str]) -> None:
        if reset.value not in allowed:
            raise PermanentError(
                f"{self.node}: the Redfish system does not allow ResetType {reset.value}; "
                f"valid values: {', '.join(sorted(allowed)) or 'none'}"
            )

    def _reset(self, reset: ResetType) -> str | None:
        """POST ``reset`` to the system; the Task monitor of a 202 answer, else None."""
        self._check_allowed(reset, self._allowed())
        answer = self._sushy(f"ResetType {reset.value}", lambda: self._post_reset(reset))
        return answer.task_monitor()

    def _post_reset(self, reset: ResetType) -> Answer:
        target = self._get_system()._get_reset_action_element().target_uri
        return Answer.of(self._connector.post(target, data={"ResetType": reset.value}))

    def _get(self, path: str) -> Answer:
        self._get_root()
        return Answer.of(self._connector.get(path))

    def _remember(self, response: Any) -> None:
        """sushy's response callback: the last answer, for its ``Retry-After``."""
        self._last_answer = (response.status_code, dict(response.headers))

    def _sushy(self, what: str, operation: Callable[[], T]) -> T:
        """Run a sushy call; translate its errors into the harness's error types."""
        try:
            return operation()
        except PowercutError:
            raise
        except sushy_exc.SushyError as exc:
            error = self._translate(what, exc)
        except BaseException as exc:  # a Ctrl-C mid-request: what it connected must not wait
            close_sockets_left_by(exc)  # for the exception's end (see harness/power/_interrupts)
            raise
        if isinstance(error, TemporaryError) and not isinstance(error, Throttled):
            self._system = None  # re-read the system on the next attempt (not when busy)
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
        if isinstance(exc, sushy_exc.HTTPError) and exc.status_code in (429, 503):
            status, headers = self._last_answer
            after = retry_after_s({k.lower(): v for k, v in headers.items()})
            if status == exc.status_code and after is not None:
                return Throttled(
                    f"{where} is busy (HTTP {exc.status_code}, Retry-After {after:g} s) "
                    f"during {what}: {text}",
                    retry_after_s=after,
                )
            return TemporaryError(f"{where}: busy (HTTP {exc.status_code}) during {what}: {text}")
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
        """Close the pooled connections after a connection error; the next request opens a
        new one. The session (its token) is kept: dropping it here would leak it."""
        self._system = None
        if self._connector is not None:
            self._connector.close()  # requests reopens its pools on the next request

    def _get_root(self) -> Any:
        if self._root is None:
            password = self._password.reveal()
            auth: Any = (
                sushy_auth.BasicAuth(username=self.username, password=password)
                if self.auth == "basic"
                else sushy_auth.SessionAuth(username=self.username, password=password)
            )
            request_s = self._request_s()
            connector = _Connector(
                self.url,
                verify=self.verify,
                # One attempt per call: this driver retries, within its own deadline.
                server_side_retries=1,
                server_side_retries_delay=0,
                default_request_timeout=request_s,
                connect_timeout=min(5.0, request_s),
                response_callback=self._remember,
            )
            connector.keep_alive(self._keep_open)
            # Logging in: a Ctrl-C must not land between the BMC's making the session and
            # the driver's learning its token (it could not be logged out).
            with (
                held_signals(f"{self.node}: opening a Redfish session")
                if self.auth == "session"
                else _nothing()
            ):
                try:
                    root = sushy.Sushy(self.url, auth=auth, connector=connector)
                except BaseException:
                    connector.close()
                    raise
                self._root, self._connector, self._auth = root, connector, auth
        return self._root

    def _request_s(self) -> float:
        return max(1.0, min(MAX_REQUEST_S, self.timeout_s))

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

    def set_timeouts(self, *, connect_s: float, read_s: float) -> None:
        """The timeouts of the requests to come (sushy's, set at construction)."""
        self._connect_timeout, self._default_request_timeout = connect_s, read_s


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
        self.task: str | None = None  # the Task monitor of a 202 answer

    def fire(self) -> None:
        d = self.driver

        def post() -> str | None:
            answer = d._sushy(f"ResetType {self.reset.value}", lambda: d._post_reset(self.reset))
            return answer.task_monitor()

        with d._lock, refusal_acted_on_nothing():
            d._set_keep_alive(False)  # the POST goes over the open connection, then closes it
            self.task = d._call(f"accept ResetType {self.reset.value}", post, self.deadline)
        log.info("%s: Redfish accepted ResetType %s", d.node, self.reset.value)

    def confirm(self) -> None:
        with self.driver._lock:
            self.driver._wait_for(self.want, self.deadline, self.reset, self.task)


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
        except BaseException as exc:
            raw.close()
            close_sockets_left_by(exc)  # a Ctrl-C mid-handshake: the TLS socket holds it now
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
        head = self._answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
        status = head[0].split()
        ok = len(status) >= 2 and status[1].isdigit() and 200 <= int(status[1]) < 300
        if ok and int(status[1]) == 202:
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.decode("latin-1").partition(":") for line in head[1:])
            }
            self.task = Answer(202, headers).task_monitor()
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


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


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
