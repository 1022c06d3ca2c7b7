"""IPMI 2.0 (RMCP+, "lanplus") BMCs for lab nodes: one pyghmi ``Bmc`` per node, each on its port.

pyghmi's server side answers cipher suite 3 only (HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128) and
does not answer the ASF presence ping: clients must use ``ipmitool -I lanplus -C 3`` or
pyipmi's ``rmcpplus`` interface with ``cipher_suite=3`` and no ping. An unknown user name
gets no answer at all (the client times out); a wrong password fails the RAKP exchange on
the client side at once.

Running in-process, and stopping
--------------------------------
pyghmi keeps its sockets, sessions and one I/O thread in module globals; ``Bmc.listen()``
is an endless loop. This module does not use ``listen()``: one process-wide loop thread
(shared by every ``IpmiServer`` of the process, started by the first ``start()`` and
stopped by the last ``stop()``) calls ``Session.wait_for_rsp`` with a short timeout and
checks a stop flag, so servers can be started and stopped in-process any number of times.
``stop()`` unregisters the server's sockets and sessions from pyghmi, waits for pyghmi's
I/O thread to finish an iteration without them, then closes the sockets. What stays for
the life of the process is pyghmi's own I/O thread (a daemon that idles in ``select``) and
one wake-up socket on 127.0.0.1 that this module gives it, so that pyghmi's self-wake
socket (``iosockets[0]``) is never a BMC socket that a ``stop()`` closes.

pyghmi internals this relies on (checked against pyghmi 1.6.19): ``Session.bmc_handlers``,
``session.iosockets``, ``session.ioqueue``, ``session.iothread``, ``session.myself``,
``ServerSession.close_server_session`` (a no-op upstream, replaced per session here) and
``session._io_recvfrom`` (replaced by a read that never blocks: see ``_recvfrom_nowait``).

Power requests are applied synchronously on the loop thread, so ``PowerTarget`` calls
must be quick; while one runs, every IPMI BMC of the process waits.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import pyghmi.ipmi.bmc as _pyghmi_bmc
import pyghmi.ipmi.private.session as _pyghmi_session

from harness.lab.bmc.target import PowerTarget
from harness.power.base import PowerState

log = logging.getLogger(__name__)

#: IPMI 2.0 limits (RAKP): user names up to 16 bytes, passwords up to 20 bytes.
MAX_USERNAME_BYTES: Final = 16
MAX_PASSWORD_BYTES: Final = 20

# IPMI completion codes used here.
_CC_OK: Final = 0x00
_CC_NOT_IN_PRESENT_STATE: Final = 0xD5
_CC_UNSPECIFIED: Final = 0xFF

# A session whose client never sent Close Session is dropped once a BMC holds this many.
_MAX_SESSIONS_PER_BMC: Final = 64

#: A pass of pyghmi's loop longer than this is logged (it waits 0.2 s when idle): every
#: IPMI BMC of the lab is silent meanwhile (see ``_PyghmiLoop._run``).
STALL_S: Final = 2.0

_BMC_UUID_NAMESPACE: Final = uuid.UUID("0b4f8f5e-3d2a-4c61-9a51-6a0c2d0e7c21")


def bmc_guid(node: str) -> uuid.UUID:
    """The stable system GUID a node's BMC reports."""
    return uuid.uuid5(_BMC_UUID_NAMESPACE, node)


class _NodeBmc(_pyghmi_bmc.Bmc):  # type: ignore[misc]  # untyped pyghmi
    """One node's BMC: chassis status and chassis control, applied to a ``PowerTarget``."""

    def __init__(self, target: PowerTarget, authdata: dict[str, str], host: str, port: int):
        super().__init__(authdata, port=port, bmcuuid=bmc_guid(target.name), address=host)
        # pyghmi routes session packets by `self.port`: make it the bound port (port 0).
        self.port = self.serversocket.getsockname()[1]
        self.target = target
        self.boot_device = "default"
        self._detached = False
        self.sessions_opened = 0
        self._sessions: collections.OrderedDict[Any, Any] = collections.OrderedDict()

    # -- power ----------------------------------------------------------------------------

    def get_power_state(self) -> str:
        state = self.target.power_state()
        if state is PowerState.UNKNOWN:
            raise RuntimeError(f"{self.target.name}: power state unknown")
        return state.value  # "on" / "off", what pyghmi's power_states maps

    def get_chassis_status(self, session: Any) -> None:
        try:
            state = self.target.power_state()
        except Exception:
            log.exception("ipmi: %s: reading the power state failed", self.target.name)
            session.send_ipmi_response(code=_CC_UNSPECIFIED)
            return
        if state is PowerState.UNKNOWN:
            session.send_ipmi_response(code=_CC_NOT_IN_PRESENT_STATE)
            return
        session.send_ipmi_response(data=[1 if state is PowerState.ON else 0, 0, 0])

    def power_on(self) -> int:
        return self._apply("power on", self.target.power_on)

    def power_off(self) -> int:
        return self._apply("power off (forced)", functools.partial(self.target.power_off, False))

    def power_shutdown(self) -> int:
        return self._apply("soft shutdown", functools.partial(self.target.power_off, True))

    def power_cycle(self) -> int:
        return self._apply("power cycle", self.target.reset)

    def power_reset(self) -> int:
        return self._apply("hard reset", self.target.reset)

    def _apply(self, what: str, action: Callable[[], None]) -> int:
        log.info("ipmi: %s: %s", self.target.name, what)
        try:
            action()
        except Exception:
            log.exception("ipmi: %s: %s failed", self.target.name, what)
            return _CC_UNSPECIFIED
        return _CC_OK

    # -- the rest of what ipmitool may ask --------------------------------------------------

    def get_system_guid(self) -> uuid.UUID:
        return bmc_guid(self.target.name)

    def get_boot_device(self) -> str:
        return self.boot_device

    def set_boot_device(self, bootdevice: str) -> None:
        self.boot_device = bootdevice

    # -- sessions ---------------------------------------------------------------------------

    def sessionless_data(self, data: Any, sockaddr: Any) -> None:
        if self._detached:  # a packet that was queued before stop()
            return
        super().sessionless_data(data, sockaddr)
        session = _pyghmi_session.Session.bmc_handlers.get(sockaddr, {}).get(self.port)
        if session is None or self._sessions.get(sockaddr) is session:
            return
        # A new session: forget it when the client closes it (pyghmi never does, so
        # every ipmitool run would stay in memory), and bound the ones never closed.
        session.close_server_session = functools.partial(self._forget, sockaddr, session)
        self.sessions_opened += 1
        self._sessions[sockaddr] = session
        self._sessions.move_to_end(sockaddr)
        while len(self._sessions) > _MAX_SESSIONS_PER_BMC:
            old_addr, old_session = self._sessions.popitem(last=False)
            self._unregister(old_addr, old_session)

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

    def _forget(self, sockaddr: Any, session: Any) -> None:
        if self._sessions.get(sockaddr) is session:
            del self._sessions[sockaddr]
        self._unregister(sockaddr, session)

    def _unregister(self, sockaddr: Any, session: Any) -> None:
        handlers = _pyghmi_session.Session.bmc_handlers.get(sockaddr)
        if handlers is not None and handlers.get(self.port) is session:
            del handlers[self.port]
            if not handlers:
                _pyghmi_session.Session.bmc_handlers.pop(sockaddr, None)

    def detach(self) -> None:
        """Unregister this BMC and its sessions from pyghmi (its socket stays open)."""
        self._detached = True
        for sockaddr, session in list(self._sessions.items()):
            self._unregister(sockaddr, session)
        self._sessions.clear()
        handlers = _pyghmi_session.Session.bmc_handlers
        handlers.pop(self.serversocket, None)
        for sockaddr, by_port in list(handlers.items()):
            if isinstance(by_port, dict) and getattr(by_port.get(self.port), "bmc", None) is self:
                self._unregister(sockaddr, by_port[self.port])
        with contextlib.suppress(ValueError):
            _pyghmi_session.iosockets.remove(self.serversocket)


class _PyghmiLoop:
    """The process-wide thread that drives pyghmi's server sessions; reference-counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wake_socket: socket.socket | None = None

    def prepare(self) -> None:
        """Give pyghmi a permanent self-wake socket before the first BMC socket exists."""
        with self._lock:
            if _pyghmi_session.iosockets:
                return
            wake = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            wake.bind(("127.0.0.1", 0))
            _pyghmi_session.iosockets.append(wake)
            if _pyghmi_session.myself is None:
                _pyghmi_session.myself = "127.0.0.1"
            self._wake_socket = wake

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name="ipmi-bmc-loop", daemon=True)
                self._thread.start()

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            thread = self._thread if self._users == 0 else None
            if thread is not None:
                self._stop.set()
                self._thread = None
        if thread is not None:
            thread.join(timeout=5)

    @staticmethod
    def sync_io_thread(timeout_s: float = 2.0) -> None:
        """Return once pyghmi's I/O thread finished an iteration that started after now.

        What ``session._io_wait(0)`` does, with a timeout (it waits forever if the I/O
        thread is gone).
        """
        if _pyghmi_session.iothread is None or not _pyghmi_session.iosockets:
            return
        done = threading.Event()
        _pyghmi_session.ioqueue.append((_pyghmi_session._monotonic_time(), done, None))
        wake = _pyghmi_session.iosockets[0]
        try:
            wake.sendto(b"\x01", (_pyghmi_session.myself, wake.getsockname()[1]))
        except OSError:
            log.debug("ipmi: could not wake pyghmi's I/O thread", exc_info=True)
        if not done.wait(timeout_s):
            log.warning("ipmi: pyghmi's I/O thread did not answer within %.1fs", timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                _pyghmi_session.Session.wait_for_rsp(timeout=0.2)
            except Exception:
                log.exception("ipmi: pyghmi loop iteration failed")
                self._stop.wait(0.2)
            # A long pass means every IPMI BMC of the lab was silent meanwhile (see
            # _recvfrom_nowait for the one cause found): say so.
            took = time.monotonic() - started
            if took > STALL_S:
                log.warning("ipmi: one pass of pyghmi's loop took %.1fs", took)


def _recvfrom_nowait(mysocket: socket.socket, size: int) -> tuple[bytes, Any] | None:
    """pyghmi's ``_io_recvfrom``, made non-blocking per call (``MSG_DONTWAIT``).

    pyghmi's own sets the socket non-blocking, then reads; but its ``_io_sendto``, which
    answers a request from the loop thread, sets the same socket *blocking* before it sends.
    When the answer fell between the two steps of a read on pyghmi's I/O thread, that read
    blocked until another datagram reached that one BMC's port, and until then no BMC of
    the lab answered: 27-33 s stalls, once in 100-200 runs of 10 sequential IPMI
    power-offs (seen with faulthandler: the I/O thread in ``_io_recvfrom`` for the whole
    stall, pyghmi's loop waiting for it). A read that cannot block whatever the socket's
    mode takes that race away."""
    try:
        return mysocket.recvfrom(size, socket.MSG_DONTWAIT)
    except OSError:  # nothing queued (EAGAIN), or the socket was closed by stop()
        return None


_pyghmi_session._io_recvfrom = _recvfrom_nowait

_LOOP: Final = _PyghmiLoop()


class IpmiServer:
    """IPMI 2.0 BMCs for several nodes, one UDP port per node.

    ``targets`` is either a mapping port -> target, or a sequence of targets that get free
    ports (read them from ``ports`` after ``start()``). Every BMC accepts ``username`` /
    ``password`` with administrator privilege.
    """

    def __init__(
        self,
        targets: Mapping[int, PowerTarget] | Sequence[PowerTarget],
        host: str = "127.0.0.1",
        username: str = "",
        password: str = "",
    ) -> None:
        if isinstance(targets, Mapping):
            plan = [(port, target) for port, target in targets.items()]
        else:
            plan = [(0, target) for target in targets]
        if not plan:
            raise ValueError("an IpmiServer needs at least one target")
        names = [t.name for _, t in plan]
        if len(set(names)) != len(names):
            raise ValueError(f"target names must be unique, got {names}")
        if not username or len(username.encode()) > MAX_USERNAME_BYTES:
            raise ValueError(f"IPMI user names are 1 to {MAX_USERNAME_BYTES} bytes")
        if not password or len(password.encode()) > MAX_PASSWORD_BYTES:
            raise ValueError(f"IPMI 2.0 passwords are 1 to {MAX_PASSWORD_BYTES} bytes")
        self.host = host
        self.username = username
        self._password = password
        self._plan = plan
        self._bmcs: list[_NodeBmc] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"IpmiServer({self.host!r}, ports={self.ports}, user={self.username!r})"

    def __enter__(self) -> IpmiServer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def ports(self) -> dict[str, int]:
        """Node name -> UDP port (the requested one, or the bound one once started)."""
        bound = {b.target.name: b.port for b in self._bmcs}
        return {t.name: bound.get(t.name, port) for port, t in self._plan}

    def port_of(self, node: str) -> int:
        return self.ports[node]

    def sessions(self) -> dict[str, tuple[int, int]]:
        """Node name -> (RMCP+ sessions opened since start, sessions open now)."""
        return {b.target.name: (b.sessions_opened, b.open_sessions) for b in self._bmcs}

    def start(self) -> None:
        """Bind every node's socket and start answering; returns when all are bound."""
        with self._lock:
            if self._bmcs:
                raise RuntimeError(f"{self!r} is already running")
            _LOOP.prepare()
            authdata = {self.username: self._password}
            try:
                for port, target in self._plan:
                    self._bmcs.append(_NodeBmc(target, authdata, self.host, port))
            except BaseException:
                self._close_bmcs()
                raise
            _LOOP.acquire()
        log.info("ipmi: serving %s on %s", self.ports, self.host)

    def stop(self) -> None:
        """Stop answering and close every socket of this server."""
        with self._lock:
            if not self._bmcs:
                return
            _LOOP.release()
            self._close_bmcs()

    def _close_bmcs(self) -> None:
        for bmc in self._bmcs:
            bmc.detach()
        # pyghmi's I/O thread may hold a reference to a socket taken from the list before
        # detach(): let it finish that iteration before the sockets are closed.
        _LOOP.sync_io_thread()
        for bmc in self._bmcs:
            bmc.serversocket.close()
        self._bmcs = []
