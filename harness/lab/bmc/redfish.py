"""A Redfish BMC for lab nodes: the real sushy-tools emulator, served in-process over HTTPS.

One ``RedfishServer`` serves one ComputerSystem per ``PowerTarget``: the system's ``Name`` is
the node name and its ``Id``/``UUID`` a UUID derived from the name (stable across restarts).
Requests need HTTP basic auth (sushy-tools' htpasswd middleware; the root ``/redfish/v1`` is
open, as on real BMCs).

Served by cheroot (a threaded HTTP/1.1 server with keep-alive), not werkzeug's development
server, which closes the connection after every response ("Connection: close", werkzeug
3.x): with it, every Redfish request opened a new TLS connection, so a client's connection
opened in advance (a synchronized cut prepares one per node) was gone by the time it sent
its request, and the handshakes of a rack cut queued behind each other.

Differences from stock sushy-tools, all in this module:

- The fake systems driver is replaced by ``_InstantFakeDriver``: power state is read from
  the target and ``ComputerSystem.Reset`` calls the target at once and returns once the
  target returned (the stock driver applies changes 1-11 s later, and only on a read).
- A request whose ``Authorization`` header already passed sushy-tools' bcrypt check once
  skips it (``_VerifiedAuth``; a digest of the header is kept, never the password): the
  check costs about 1 ms of CPU, on every request, and the requests of one rack cut queue
  behind each other's. Any other request still goes through sushy-tools' middleware.
- ``ResetType@Redfish.AllowableValues`` lists what is really supported (by default On,
  ForceOff, GracefulShutdown, ForceRestart, GracefulRestart, PowerCycle; the stock template
  advertises Nmi and ForceOn, which do nothing, and omits PowerCycle). Anything else is
  refused with 400 and a message naming the valid values.

**One server per process.** sushy-tools' Flask application is a module-level singleton
(``sushy_tools.emulator.main.app``): its configuration and memoised drivers are global. A
``RedfishServer`` therefore owns that application while it runs, and ``start()`` refuses to
start a second one in the same process; serve all nodes from one server (it serves any
number of systems). After ``stop()`` another may start.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import shutil
import ssl
import tempfile
import threading
import types
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final

import bcrypt
import flask
import sushy_tools.emulator.main as _emulator
from cheroot import wsgi as _cheroot
from cheroot.server import HTTPConnection
from cheroot.ssl.builtin import BuiltinSSLAdapter
from sushy_tools import error as _fishy
from sushy_tools.emulator import auth_basic as _auth_basic
from sushy_tools.emulator.resources.systems import fakedriver as _fakedriver

from harness.lab.bmc.profiles import RedfishProfile
from harness.lab.bmc.target import PowerTarget, system_uuid
from harness.lab.bmc.vendor import VendorBmc
from harness.power.base import PowerState, ResetType

log = logging.getLogger(__name__)

#: What the lab's systems accept, in the order they are advertised.
SUPPORTED_RESET_TYPES: Final[tuple[str, ...]] = tuple(rt.value for rt in ResetType)


#: An idle keep-alive connection is closed after this long (clients reconnect).
KEEP_ALIVE_S: Final = 60
#: Request threads: one per system (a rack cut sends them all at once), within these bounds.
#: A thread serves a request, not a connection (:class:`_Server`), so 64 serve any lab.
MIN_THREADS: Final = 10
MAX_THREADS: Final = 64
#: Idle connections kept alive per system: its driver's session and a synchronized cut's
#: own connection, opened when the cut is prepared and written when it is released.
KEEP_ALIVE_PER_SYSTEM: Final = 2

# Guards the singleton application: which server (if any) owns it right now.
_APP_LOCK = threading.Lock()
_owner: RedfishServer | None = None


class _InstantFakeDriver(_fakedriver.FakeDriver):  # type: ignore[misc]  # untyped sushy-tools
    """sushy-tools' fake systems driver, with power read from and applied to targets."""

    # Set on a per-server subclass (see RedfishServer._driver_class).
    targets: ClassVar[dict[str, PowerTarget]] = {}
    reset_types: ClassVar[tuple[str, ...]] = SUPPORTED_RESET_TYPES
    owner_token: ClassVar[object] = None

    def _target(self, identity: str) -> PowerTarget:
        target = self.targets.get(identity)  # the system's uuid: no lookup in the store
        if target is not None:
            return target
        system = self._get(identity)  # NotFound, or AliasAccessError (307 to the uuid)
        return self.targets[system["uuid"]]

    def get_power_state(self, identity: str) -> str | None:
        state = self._target(identity).power_state()
        # None leaves PowerState out of the resource: clients see "unknown".
        return {PowerState.ON: "On", PowerState.OFF: "Off"}.get(state)

    def set_power_state(self, identity: str, state: Any) -> None:
        target = self._target(identity)
        if not isinstance(state, str) or state not in self.reset_types:
            raise _fishy.BadRequest(
                f"ResetType {state!r} is not supported by this system; "
                f"valid values: {', '.join(self.reset_types)}"
            )
        log.info("redfish: %s ResetType=%s", target.name, state)
        if state == ResetType.ON:
            target.power_on()
        elif state == ResetType.FORCE_OFF:
            target.power_off(graceful=False)
        elif state == ResetType.GRACEFUL_SHUTDOWN:
            target.power_off(graceful=True)
        else:  # ForceRestart, GracefulRestart, PowerCycle
            target.reset()


def _honest_allowable_values(response: flask.Response) -> flask.Response:
    """after_request hook: advertise the ResetTypes the running server really supports."""
    with _APP_LOCK:
        owner = _owner
    if (
        owner is None
        or flask.request.method != "GET"
        or flask.request.endpoint != "system_resource"
        or response.status_code != 200
        or not response.is_json
    ):
        return response
    body = response.get_json()
    reset = body.get("Actions", {}).get("#ComputerSystem.Reset") if body else None
    if isinstance(reset, dict):
        reset["ResetType@Redfish.AllowableValues"] = list(owner.reset_types)
        response.set_data(json.dumps(body, indent=4))
    return response


class _VerifiedAuth:
    """WSGI middleware in front of sushy-tools' basic-auth middleware (``checker``).

    A request whose ``Authorization`` header passed the bcrypt check of ``checker``'s user
    file before goes straight to the application, with the user set as the checker sets it;
    any other request (and every request to a path the checker leaves open) goes through
    ``checker``, and a header it accepts is remembered. Only a SHA-256 digest of the header is
    kept, for as long as the server runs; a new user file (a new server) starts afresh.
    """

    def __init__(self, checker: Any) -> None:
        self.checker = checker
        self._verified: dict[bytes, str] = {}  # header digest -> user name
        self._auth_file: str = checker.auth_file
        self._lock = threading.Lock()

    def __call__(self, env: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        header = env.get("HTTP_AUTHORIZATION")
        user = self.user(header) if isinstance(header, str) else None
        if user is None:
            # Refused or absent: let sushy-tools' middleware answer it, as it would anyway.
            return self.checker(env, start_response)  # type: ignore[no-any-return]
        env.update({"HTTP_X_USER": user, "HTTP_X_USER_NAME": user})
        return self.checker.app(env, start_response)  # type: ignore[no-any-return]

    def user(self, header: str) -> str | None:
        """The user a Basic ``Authorization`` header authenticates, or None."""
        if not header.startswith("Basic "):
            return None
        digest = hashlib.sha256(header.encode()).digest()
        with self._lock:
            if self._auth_file != self.checker.auth_file:
                self._verified.clear()
                self._auth_file = self.checker.auth_file
            user = self._verified.get(digest)
        if user is None:
            try:
                username, password = _auth_basic.parse_token(header[len("Basic ") :])
                extra = _auth_basic.authenticate(self.checker.auth_file, username, password)
            except _fishy.FishyError:
                return None
            user = str(extra["HTTP_X_USER"])
            with self._lock:
                self._verified[digest] = user
        return user

    def login(self, username: str, password: str) -> bool:
        """Whether ``username``/``password`` are the user file's (a session request)."""
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        return self.user(f"Basic {token}") is not None


def _install_hooks() -> None:
    app = _emulator.app
    funcs = app.after_request_funcs.setdefault(None, [])
    if _honest_allowable_values not in funcs:
        # Appended directly (not with @app.after_request): Flask refuses setup methods once
        # the app has served a request, and a previous server may have served some.
        funcs.append(_honest_allowable_values)


_WAITED: Final = "_powercut_waited_for_first_request"
#: Threads kept free for requests: a new connection takes a thread of its own only beyond them.
_SPARE_THREADS: Final = 8


class _Server(_cheroot.Server):
    """cheroot's server, except that a new connection waits in the server's selector for
    its first request instead of taking a request thread at once.

    cheroot hands every accepted connection to a thread, which then blocks reading its first
    request; only connections kept alive after a request wait in the selector. A
    synchronized cut opens each node's connection when it is prepared and writes the
    request when every node is prepared: at 96 nodes the first 64 idle connections held all
    64 threads, and the other nodes' reads waited until they timed out (10 s, then the cut
    gave up). A real rack has a BMC per node; the lab serves every node from one server, so
    beyond a few spare threads (:data:`_SPARE_THREADS`) its threads serve requests, not
    idle connections."""

    def process_conn(self, conn: HTTPConnection) -> None:
        if getattr(conn, _WAITED, False):
            super().process_conn(conn)
            return
        setattr(conn, _WAITED, True)  # once: then it is served (put_conn checks for data)
        if self.requests.idle - self.requests.qsize > _SPARE_THREADS:
            # A thread to spare: it waits for the request itself, as cheroot does, and
            # answers it without a pass through the selector's thread (under a busy GIL
            # each hand-over between threads can cost a switch interval, 5 ms).
            super().process_conn(conn)
            return
        self.put_conn(conn)


class RedfishServer:
    """The sushy-tools emulator for ``targets``, on HTTPS with basic auth.

    ``port=0`` picks a free port; read ``port`` after ``start()``. ``reset_types`` narrows
    what the systems advertise and accept (to emulate BMCs without, say, PowerCycle).
    """

    def __init__(
        self,
        targets: Sequence[PowerTarget],
        host: str = "127.0.0.1",
        port: int = 0,
        username: str = "",
        password: str = "",
        certfile: str | os.PathLike[str] = "",
        keyfile: str | os.PathLike[str] = "",
        *,
        reset_types: Collection[str] = SUPPORTED_RESET_TYPES,
        work_dir: str | os.PathLike[str] | None = None,
        vendors: Sequence[tuple[RedfishProfile, int]] = (),
    ) -> None:
        """``work_dir``: where the emulator's private state goes (a fresh directory is made
        inside it); the system temp directory by default. A lab passes its own state
        directory, so even a killed supervisor leaves nothing outside it.

        ``vendors``: (profile, port) pairs: each profile is served on a port of its own
        (0: a free one; read :meth:`vendor_url`) by a :class:`VendorBmc` in front of the
        same emulator, so one node's BMC can be an iLO and another's a bmcweb."""
        names = [p.name for p, _port in vendors]
        if len(set(names)) != len(names):
            raise ValueError(f"vendor profiles must be unique, got {names}")
        names = [t.name for t in targets]
        if not names:
            raise ValueError("a RedfishServer needs at least one target")
        if len(set(names)) != len(names):
            raise ValueError(f"target names must be unique, got {names}")
        unknown = set(reset_types) - set(SUPPORTED_RESET_TYPES)
        if unknown:
            raise ValueError(
                f"unsupported reset types {sorted(unknown)}; choose from {SUPPORTED_RESET_TYPES}"
            )
        if not username or not password:
            raise ValueError("a RedfishServer needs a user name and a password")
        if not certfile or not keyfile:
            raise ValueError("a RedfishServer serves HTTPS only: give certfile and keyfile")
        self.targets = list(targets)
        self._work_dir = work_dir
        self.host = host
        self.port = port
        self.username = username
        self._password = password
        self.certfile = Path(certfile)
        self.keyfile = Path(keyfile)
        self.reset_types = tuple(rt for rt in SUPPORTED_RESET_TYPES if rt in set(reset_types))
        self._server: _cheroot.Server | None = None
        self._thread: threading.Thread | None = None
        self._state_dir: Path | None = None
        self._original_fakedriver: types.ModuleType | None = None
        self._vendor_ports = list(vendors)
        self._vendors: dict[str, tuple[VendorBmc, _cheroot.Server, threading.Thread]] = {}

    def vendor(self, name: str) -> VendorBmc:
        """The running vendor BMC of profile ``name`` (its sessions, counters)."""
        return self._vendors[name][0]

    def vendor_url(self, name: str) -> str:
        server = self._vendors[name][1]
        return f"https://{self.host}:{int(server.bind_addr[1])}"

    def __repr__(self) -> str:
        nodes = ",".join(t.name for t in self.targets)
        return f"RedfishServer({self.url!r}, nodes=[{nodes}], user={self.username!r})"

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def system_path(self, node: str) -> str:
        return f"/redfish/v1/Systems/{system_uuid(node)}"

    def __enter__(self) -> RedfishServer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Configure the emulator for this server's targets and serve; returns when listening."""
        global _owner
        with _APP_LOCK:
            if _owner is not None:
                raise RuntimeError(
                    f"{_owner!r} is running: sushy-tools' Flask app is a per-process "
                    "singleton, so only one RedfishServer can run per process "
                    "(serve every node from it)"
                )
            _owner = self
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        self._state_dir = Path(tempfile.mkdtemp(prefix="powercut-redfish-", dir=self._work_dir))
        auth_file = self._state_dir / "htpasswd"
        self._write_htpasswd(auth_file)
        self._configure_app(self._state_dir, auth_file)

        server = self._listen(self.port, _emulator.app)
        self._server = server
        self.port = int(server.bind_addr[1])
        self._thread = threading.Thread(
            target=server.serve, name=f"redfish-{self.host}:{self.port}", daemon=True
        )
        self._thread.start()
        log.info("redfish: serving %d systems on %s", len(self.targets), self.url)
        self._start_vendors()

    def _start_vendors(self) -> None:
        auth = _emulator.app.wsgi_app
        if not isinstance(auth, _VerifiedAuth):  # set by _configure_app
            raise RuntimeError("the lab's auth middleware is not installed")
        token = base64.b64encode(f"{self.username}:{self._password}".encode()).decode()
        for profile, port in self._vendor_ports:
            bmc = VendorBmc(
                profile, _emulator.app, user_of=auth.user, login=auth.login, basic=f"Basic {token}"
            )
            server = self._listen(port, bmc)
            thread = threading.Thread(
                target=server.serve, name=f"redfish-{profile.name}", daemon=True
            )
            thread.start()
            self._vendors[profile.name] = (bmc, server, thread)
            log.info("redfish: %s profile on %s", profile.name, self.vendor_url(profile.name))

    def _listen(self, port: int, app: Callable[..., Any]) -> _cheroot.Server:
        threads = max(MIN_THREADS, min(MAX_THREADS, len(self.targets)))
        server = _Server(
            (self.host, port),
            app,
            numthreads=threads,
            max=threads,
            # Every node's connection of a rack cut arrives at once: the default backlog (5)
            # drops the rest of the SYNs, which the clients resend only after a second.
            request_queue_size=128,
            server_name="powercut-lab-redfish",
            timeout=KEEP_ALIVE_S,
            shutdown_timeout=1,
        )
        # cheroot closes a connection after its answer once 10 are open (its default), so
        # at rack scale every read would open a new TLS connection.
        server.keep_alive_conn_limit = KEEP_ALIVE_PER_SYSTEM * len(self.targets) + MIN_THREADS
        tls = BuiltinSSLAdapter(str(self.certfile), str(self.keyfile))
        tls.context.minimum_version = ssl.TLSVersion.TLSv1_2
        server.ssl_adapter = tls
        server.prepare()  # binds and listens (port 0: a free one) and starts the threads
        return server

    def stop(self) -> None:
        """Stop serving, release the application, remove the private state directory."""
        for _bmc, vendor, vendor_thread in self._vendors.values():
            vendor.stop()
            vendor_thread.join(timeout=10)
        self._vendors.clear()
        server, thread = self._server, self._thread
        if server is not None:
            server.stop()
        if thread is not None:
            thread.join(timeout=10)
        self._cleanup()

    def _cleanup(self) -> None:
        global _owner
        self._server = None
        self._thread = None
        app = _emulator.app
        if self._original_fakedriver is not None:
            _emulator.fakedriver = self._original_fakedriver
            self._original_fakedriver = None
            app.__dict__.pop("_cache", None)
        if self._state_dir is not None:
            shutil.rmtree(self._state_dir, ignore_errors=True)
            self._state_dir = None
        with _APP_LOCK:
            if _owner is self:
                _owner = None

    # -- configuration ------------------------------------------------------------------

    def _write_htpasswd(self, path: Path) -> None:
        # Cost 4 (bcrypt's minimum): the middleware checks the hash on every request, and
        # the file lives in a private 0700 temp directory for the lifetime of the server.
        digest = bcrypt.hashpw(self._password.encode(), bcrypt.gensalt(rounds=4)).decode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{self.username}:{digest}\n")

    def _fake_systems(self) -> list[dict[str, Any]]:
        return [
            {
                "uuid": system_uuid(t.name),
                "name": t.name,
                "power_state": "On" if t.power_state() is PowerState.ON else "Off",
                "external_notifier": False,
                "nics": [],
            }
            for t in self.targets
        ]

    def _driver_class(self) -> type[_InstantFakeDriver]:
        attrs: dict[str, Any] = {
            "targets": {system_uuid(t.name): t for t in self.targets},
            "reset_types": self.reset_types,
            "owner_token": self,
        }
        return type("InstantFakeDriver", (_InstantFakeDriver,), attrs)

    def _configure_app(self, state_dir: Path, auth_file: Path) -> None:
        app = _emulator.app
        for key in (
            "SUSHY_EMULATOR_ALLOWED_INSTANCES",
            "SUSHY_EMULATOR_DISABLE_POWER_OFF",
            "SUSHY_EMULATOR_OS_CLOUD",
            "SUSHY_EMULATOR_IRONIC_CLOUD",
        ):
            app.config.pop(key, None)
        config = {
            "SUSHY_EMULATOR_FAKE_DRIVER": True,
            "SUSHY_EMULATOR_FAKE_SYSTEMS": self._fake_systems(),
            "SUSHY_EMULATOR_STATE_DIR": str(state_dir),
            "SUSHY_EMULATOR_AUTH_FILE": str(auth_file),
            "SUSHY_EMULATOR_FEATURE_SET": "full",
        }
        # The systems property builds `fakedriver.FakeDriver` from main's module globals:
        # point that name at a namespace holding our class (restored on stop).
        self._original_fakedriver = _emulator.fakedriver
        _emulator.fakedriver = types.SimpleNamespace(FakeDriver=self._driver_class())
        # Drop drivers memoised by a previous server (sushy-tools' memoize keeps them in
        # the application's `_cache` attribute).
        app.__dict__.pop("_cache", None)
        if isinstance(app.wsgi_app, _VerifiedAuth):  # left by a previous server
            app.wsgi_app = app.wsgi_app.checker
        app.configure(extra_config=config)
        # configure() wraps the WSGI app with the auth middleware only once per process:
        # point an existing middleware at this server's htpasswd file.
        middleware = app.wsgi_app
        if not isinstance(middleware, _emulator.RedfishAuthMiddleware):
            raise RuntimeError("sushy-tools did not install its basic-auth middleware")
        middleware.auth_file = str(auth_file)
        app.wsgi_app = _VerifiedAuth(middleware)
        _install_hooks()

        systems = app.systems
        if not isinstance(systems, _InstantFakeDriver) or systems.owner_token is not self:
            raise RuntimeError(
                "sushy-tools did not pick up the instant fake driver "
                f"(got {type(systems).__name__}); its internals changed"
            )
