"""A vendor's Redfish behaviour played in front of sushy-tools' emulator (WSGI middleware).

:class:`VendorBmc` serves one :class:`~harness.lab.bmc.profiles.RedfishProfile` on a port of
its own (``RedfishServer(vendors=...)``): requests go to the same emulator as the lab's
stock port, and this layer adds what the profile says the vendor does:

- a ServiceRoot with ``Vendor``/``Product`` and, with sessions, ``SessionService`` and
  ``Links.Sessions``;
- a SessionService (POST a session with UserName/Password: 201, ``X-Auth-Token`` and
  ``Location``; DELETE it to log out; beyond ``max_sessions``: the profile's status with
  the Base registry's SessionLimitExceeded); a request with a known token is served as the
  lab user, an unknown token is 401;
- the profile's ``ResetType@Redfish.AllowableValues``; a reset it does not list is 400
  naming the valid values; an accepted one is answered 204, 200 with a body, or 202 with
  a Task whose monitor (``Location``) answers 202 while it runs, then 200 Completed;
- ``PowerState`` that shows a change ``readback_s`` late (PoweringOn/PoweringOff meanwhile,
  or the old state);
- every n-th request (but session log-in and log-out) answered 503 or 429 with
  ``Retry-After``;
- a GracefulShutdown accepted and never carried out, if the profile says so.

The node itself acts at once (the emulator's instant driver): only what the BMC reports
lags, as on real hardware whose state sensors update late. Times come from ``clock``.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import secrets
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from harness.clock import SYSTEM_CLOCK, Clock
from harness.lab.bmc.profiles import RedfishProfile

ROOT: Final = "/redfish/v1"
SESSION_SERVICE: Final = f"{ROOT}/SessionService"
SESSIONS: Final = f"{SESSION_SERVICE}/Sessions"
TASK_SERVICE: Final = f"{ROOT}/TaskService"
TASKS: Final = f"{TASK_SERVICE}/Tasks"
_SYSTEM: Final = re.compile(rf"^{ROOT}/Systems/([^/]+)$")
_RESET: Final = re.compile(rf"^{ROOT}/Systems/([^/]+)/Actions/ComputerSystem\.Reset$")
_TASK: Final = re.compile(rf"^{TASKS}/(\d+)(/Monitor)?$")
_SESSION: Final = re.compile(rf"^{SESSIONS}/([^/]+)$")
#: Tasks kept for reading (the oldest are forgotten beyond this).
MAX_TASKS: Final = 200

StartResponse = Callable[..., Any]
Reply = tuple[int, dict[str, str], bytes]

_REASONS: Final = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    503: "Service Unavailable",
}


def _error(status: int, code: str, message: str) -> Reply:
    body = {"error": {"code": f"Base.1.8.{code}", "message": message}}
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def _ok(body: Any, status: int = 200, **headers: str) -> Reply:
    return status, {"Content-Type": "application/json", **headers}, json.dumps(body).encode()


@dataclass
class _Change:
    until: float  # monotonic time the new state shows from
    shown: str  # what PowerState shows until then


@dataclass
class _Task:
    id: str
    reset: str
    done_at: float

    def json(self, now: float) -> dict[str, Any]:
        state = "Completed" if now >= self.done_at else "Running"
        return {
            "@odata.id": f"{TASKS}/{self.id}",
            "@odata.type": "#Task.v1_4_3.Task",
            "Id": self.id,
            "Name": f"ComputerSystem.Reset {self.reset}",
            "TaskState": state,
            "TaskStatus": "OK",
            "PercentComplete": 100 if state == "Completed" else 50,
            "TaskMonitor": f"{TASKS}/{self.id}/Monitor",
            "Messages": [],
        }


class VendorBmc:
    """WSGI middleware playing ``profile`` in front of ``app`` (sushy-tools' Flask app with
    its auth middleware). ``user_of(header)`` checks an Authorization header (the user, or
    None); ``login(user, password)`` checks a session request's credentials; requests with
    a session token are passed on with ``basic`` (the lab user's Authorization header)."""

    def __init__(
        self,
        profile: RedfishProfile,
        app: Callable[..., Iterable[bytes]],
        *,
        user_of: Callable[[str], str | None],
        login: Callable[[str, str], bool],
        basic: str,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.profile = profile
        self.app = app
        self._user_of = user_of
        self._login = login
        self._basic = basic
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, str] = {}  # session id -> token
        self._users: dict[str, str] = {}  # session id -> user name
        self._ids = itertools.count(1)
        self._requests = 0
        self._changes: dict[str, _Change] = {}  # system id -> pending change
        self._tasks: dict[str, _Task] = {}
        #: Counters for tests and the lab's log: sessions created / deleted, throttled.
        self.created = 0
        self.deleted = 0
        self.throttled = 0

    def open_sessions(self) -> int:
        with self._lock:
            return len(self._sessions)

    # -- WSGI ---------------------------------------------------------------------------

    def __call__(self, env: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        status, headers, body = self._serve(env)
        start_response(f"{status} {_REASONS.get(status, 'Status')}", list(headers.items()))
        return [body]

    def _serve(self, env: dict[str, Any]) -> Reply:
        path = (env.get("PATH_INFO") or "/").rstrip("/") or "/"
        method = str(env.get("REQUEST_METHOD", "GET"))
        session_op = (method == "POST" and path == SESSIONS) or (
            method == "DELETE" and _SESSION.match(path) is not None
        )
        if not session_op:
            throttled = self._throttle()
            if throttled is not None:
                return throttled
        if method == "POST" and path == SESSIONS:
            return self._create_session(env)
        token = env.get("HTTP_X_AUTH_TOKEN")
        if token is not None:
            if not self._known(str(token)):
                return _error(401, "NoValidSession", "the X-Auth-Token is not a valid session")
            env["HTTP_AUTHORIZATION"] = self._basic
        if path in (ROOT, "/redfish"):
            return self._root(env)
        if path.startswith((SESSION_SERVICE, TASK_SERVICE)) or _RESET.match(path):
            if self._user_of(str(env.get("HTTP_AUTHORIZATION", ""))) is None:
                return _error(401, "InsufficientPrivilege", "authentication required")
            return self._own(method, path, env)
        reply = self._inner(env)
        system = _SYSTEM.match(path)
        if system is not None and method == "GET" and reply[0] == 200:
            return self._system(system.group(1), reply)
        return reply

    def _own(self, method: str, path: str, env: dict[str, Any]) -> Reply:
        reset = _RESET.match(path)
        if reset is not None and method == "POST":
            return self._reset(reset.group(1), env)
        if path.startswith(SESSION_SERVICE) and self.profile.has_sessions:
            return self._session_read(method, path)
        task = _TASK.match(path)
        if task is not None and method == "GET":
            return self._task(task.group(1), monitor=task.group(2) is not None)
        if path == TASK_SERVICE and method == "GET":
            return _ok(
                {
                    "@odata.id": TASK_SERVICE,
                    "Id": "TaskService",
                    "ServiceEnabled": True,
                    "Tasks": {"@odata.id": TASKS},
                }
            )
        return _error(404, "ResourceMissingAtURI", f"{path} is not served by this BMC")

    # -- the emulator behind ------------------------------------------------------------

    def _inner(self, env: dict[str, Any]) -> Reply:
        seen: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> Any:
            seen["status"], seen["headers"] = status, headers
            return lambda _data: None

        result = self.app(env, start_response)
        try:
            body = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        headers = {k: v for k, v in seen["headers"] if k.lower() != "content-length"}
        return int(str(seen["status"]).split()[0]), headers, body

    def _inner_call(self, env: dict[str, Any], method: str, body: bytes = b"") -> Reply:
        sub = dict(env)
        sub.update(
            {
                "REQUEST_METHOD": method,
                "CONTENT_LENGTH": str(len(body)),
                "CONTENT_TYPE": "application/json",
                "wsgi.input": io.BytesIO(body),
            }
        )
        return self._inner(sub)

    # -- behaviours ---------------------------------------------------------------------

    def _throttle(self) -> Reply | None:
        every = self.profile.throttle_every
        if every <= 0:
            return None
        with self._lock:
            self._requests += 1
            if self._requests % every:
                return None
            self.throttled += 1
        status, headers, body = _error(
            self.profile.throttle_status, "ServiceTemporarilyUnavailable", "busy; retry later"
        )
        headers["Retry-After"] = str(self.profile.retry_after_s)
        return status, headers, body

    def _root(self, env: dict[str, Any]) -> Reply:
        status, headers, body = self._inner(env)
        if status != 200:
            return status, headers, body
        doc = json.loads(body)
        doc.update({"Vendor": self.profile.vendor, "Product": self.profile.product})
        doc["TaskService"] = {"@odata.id": TASK_SERVICE}
        if self.profile.has_sessions:
            doc["SessionService"] = {"@odata.id": SESSION_SERVICE}
            doc.setdefault("Links", {})["Sessions"] = {"@odata.id": SESSIONS}
        return _ok(doc)

    def _system(self, system: str, reply: Reply) -> Reply:
        doc = json.loads(reply[2])
        reset = doc.get("Actions", {}).get("#ComputerSystem.Reset")
        if isinstance(reset, dict):
            reset["ResetType@Redfish.AllowableValues"] = list(self.profile.reset_types)
        with self._lock:
            change = self._changes.get(system)
            if change is not None and self._clock.monotonic() >= change.until:
                del self._changes[system]
                change = None
        if change is not None:
            doc["PowerState"] = change.shown
        return _ok(doc)

    def _reset(self, system: str, env: dict[str, Any]) -> Reply:
        try:
            size = int(env.get("CONTENT_LENGTH") or 0)
            requested = json.loads(env["wsgi.input"].read(size) or b"{}").get("ResetType")
        except (ValueError, AttributeError):
            return _error(400, "MalformedJSON", "the request body is not a JSON object")
        allowed = self.profile.reset_types
        if requested not in allowed:
            return _error(
                400,
                "ActionParameterNotSupported",
                f"ResetType {requested!r} is not supported by this system; "
                f"valid values: {', '.join(allowed)}",
            )
        path = f"{ROOT}/Systems/{system}"
        before = self._inner_call({**env, "PATH_INFO": path}, "GET")
        if before[0] != 200:
            return before
        old = str(json.loads(before[2]).get("PowerState", "On"))
        act = self._acts(str(requested), old)
        if act is not None:
            done = self._inner_call(
                {**env, "PATH_INFO": f"{path}/Actions/ComputerSystem.Reset"},
                "POST",
                json.dumps({"ResetType": act}).encode(),
            )
            if done[0] >= 300:
                return done
            self._changed(system, act, old)
        return self._accepted(str(requested))

    def _acts(self, requested: str, old: str) -> str | None:
        """What the emulator is asked to do for ``requested`` (None: nothing)."""
        if requested == "Nmi":
            return None
        if requested == "GracefulShutdown" and not self.profile.graceful_honoured:
            return None
        if requested == "ForceOn":
            return "On"
        if requested == "PushPowerButton":
            return "ForceOff" if old == "On" else "On"
        return requested

    def _changed(self, system: str, act: str, old: str) -> None:
        if self.profile.readback_s <= 0:
            return
        new = "Off" if act in ("ForceOff", "GracefulShutdown") else "On"
        if self.profile.transitions:
            shown = "PoweringOff" if new == "Off" else "PoweringOn"
        else:
            shown = old
        with self._lock:
            until = self._clock.monotonic() + self.profile.readback_s
            self._changes[system] = _Change(until, shown)

    def _accepted(self, reset: str) -> Reply:
        status = self.profile.reset_status
        if status == 204:
            return 204, {}, b""
        if status == 200:
            return _ok({"@Message.ExtendedInfo": [{"MessageId": "Base.1.8.Success"}]})
        with self._lock:
            task = _Task(str(next(self._ids)), reset, self._clock.monotonic() + self.profile.task_s)
            self._tasks[task.id] = task
            while len(self._tasks) > MAX_TASKS:
                del self._tasks[next(iter(self._tasks))]
        monitor = f"{TASKS}/{task.id}/Monitor"
        return _ok(task.json(self._clock.monotonic()), 202, Location=monitor)

    def _task(self, task_id: str, *, monitor: bool) -> Reply:
        with self._lock:
            task = self._tasks.get(task_id)
        if task is None:
            return _error(404, "ResourceMissingAtURI", f"no Task {task_id}")
        doc = task.json(self._clock.monotonic())
        running = doc["TaskState"] == "Running"
        return _ok(doc, 202 if monitor and running else 200)

    # -- sessions -----------------------------------------------------------------------

    def _known(self, token: str) -> bool:
        with self._lock:
            return token in self._sessions.values()

    def _create_session(self, env: dict[str, Any]) -> Reply:
        if not self.profile.has_sessions:
            return _error(404, "ResourceMissingAtURI", "this BMC has no SessionService")
        try:
            size = int(env.get("CONTENT_LENGTH") or 0)
            doc = json.loads(env["wsgi.input"].read(size) or b"{}")
            user, password = str(doc["UserName"]), str(doc["Password"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return _error(400, "PropertyMissing", "UserName and Password are required")
        if not self._login(user, password):
            return _error(401, "ResourceAtUriUnauthorized", "invalid user name or password")
        with self._lock:
            if len(self._sessions) >= (self.profile.max_sessions or 0):
                return _error(
                    self.profile.session_cap_status,
                    "SessionLimitExceeded",
                    "The session establishment failed due to the number of simultaneous "
                    f"sessions exceeding the limit of the implementation "
                    f"({self.profile.max_sessions}).",
                )
            session_id = str(next(self._ids))
            token = secrets.token_hex(16)
            self._sessions[session_id] = token
            self._users[session_id] = user
            self.created += 1
        location = f"{SESSIONS}/{session_id}"
        body = {"@odata.id": location, "Id": session_id, "UserName": user}
        return _ok(body, 201, Location=location, **{"X-Auth-Token": token})

    def _session_read(self, method: str, path: str) -> Reply:
        if path == SESSION_SERVICE and method == "GET":
            return _ok(
                {
                    "@odata.id": SESSION_SERVICE,
                    "Id": "SessionService",
                    "ServiceEnabled": True,
                    "SessionTimeout": 1800,
                    "Sessions": {"@odata.id": SESSIONS},
                }
            )
        with self._lock:
            ids = list(self._sessions)
            users = dict(self._users)
        if path == SESSIONS and method == "GET":
            members = [{"@odata.id": f"{SESSIONS}/{i}"} for i in ids]
            return _ok({"@odata.id": SESSIONS, "Members": members, "Members@odata.count": len(ids)})
        match = _SESSION.match(path)
        if match is None or match.group(1) not in ids:
            return _error(404, "ResourceMissingAtURI", f"no session at {path}")
        session_id = match.group(1)
        if method == "DELETE":
            with self._lock:
                self._sessions.pop(session_id, None)
                self._users.pop(session_id, None)
                self.deleted += 1
            return 204, {}, b""
        location = f"{SESSIONS}/{session_id}"
        return _ok({"@odata.id": location, "Id": session_id, "UserName": users[session_id]})
