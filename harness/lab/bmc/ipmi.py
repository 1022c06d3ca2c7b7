"""IPMI 2.0 (RMCP+, "lanplus") BMCs for lab nodes: one pyghmi ``Bmc`` per node, each on its port.

Cipher suites and privileges, as a hardened BMC has them (docs/ipmi.md):

- The BMC offers the cipher suites it is given: by default 17 only (RAKP-HMAC-SHA256,
  HMAC-SHA256-128, AES-CBC-128), which pyghmi's server side does not do by itself
  (it forces suite 3): :class:`_ServerSession` negotiates 17 or 3 from what the client
  proposes, runs the RAKP exchange with that suite's hash and keys (K1 and K2 from the
  20-byte constants of IPMI 2.0 section 13.32, as ipmitool and OpenBMC derive them) and
  refuses any other proposal with status 0x11 (no cipher suite match). Get Channel Cipher
  Suites, sessionless, lists what is offered.
- The user has a maximum privilege (by default OPERATOR, all that chassis control
  needs): a session asking for more is refused in RAKP message 2 (status 0x09, invalid
  role); Chassis Control needs OPERATOR, a USER session gets completion code 0xD4.
- An unknown user name is refused (status 0x0D, unauthorized name); a wrong password fails
  the RAKP exchange on the client side at once. No ASF presence ping: clients skip it.

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
import hashlib
import hmac
import logging
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import pyghmi.ipmi.bmc as _pyghmi_bmc
import pyghmi.ipmi.private.serversession as _pyghmi_serversession
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

#: IPMI privilege levels by name (what ``ipmitool -L`` and the inventory say).
PRIVILEGES: Final = {"user": 2, "operator": 3, "administrator": 4}
_OPERATOR: Final = 3

#: Cipher suites this BMC can offer: id -> (authentication, integrity, confidentiality)
#: algorithm numbers of IPMI 2.0 tables 13-17..13-19, and the RAKP hash.
_SUITES: Final = {
    3: ((1, 1, 1), hashlib.sha1),  # RAKP-HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128
    17: ((3, 4, 1), hashlib.sha256),  # RAKP-HMAC-SHA256, HMAC-SHA256-128, AES-CBC-128
}
#: The suites offered unless told otherwise: a hardened BMC's.
DEFAULT_CIPHER_SUITES: Final = (17,)

# RMCP+ session setup status codes (IPMI 2.0 table 13-15) used here.
_MSC_INVALID_ROLE: Final = 0x09
_MSC_UNAUTHORIZED_NAME: Final = 0x0D
_MSC_NO_CIPHER_SUITE_MATCH: Final = 0x11


def bmc_guid(node: str) -> uuid.UUID:
    """The stable system GUID a node's BMC reports."""
    return uuid.uuid5(_BMC_UUID_NAMESPACE, node)


class _ServerSession(_pyghmi_serversession.ServerSession):  # type: ignore[misc]  # untyped
    """pyghmi's server session, negotiating the cipher suite and the privilege.

    pyghmi's packet layer already integrity-protects with ``currhashlib`` truncated to
    ``currhashlen`` and encrypts with ``aeskey``: this class sets them per suite and does
    the session setup (open session, RAKP 1-4) with the suite's hash.
    """

    bmc: _NodeBmc

    def create_open_session_response(self, request: bytearray) -> bytearray:
        tag = request[0]
        self.clientsessionid = request[4:8]
        self.managedsessionid = os.urandom(4)
        proposed = (request[12] & 0x3F, request[20] & 0x3F, request[28] & 0x3F)
        suite = next((i for i in self.bmc.cipher_suites if _SUITES[i][0] == proposed), None)
        if suite is None:
            log.info(
                "ipmi: %s: refused a session proposing algorithms %s (offered suites %s)",
                self.bmc.target.name, proposed, list(self.bmc.cipher_suites),
            )  # fmt: skip
            self.suite = None
            return bytearray([tag, _MSC_NO_CIPHER_SUITE_MATCH, 0, 0]) + self.clientsessionid
        self.suite = suite
        self.currhashlib = _SUITES[suite][1]
        self.currhashlen = 12 if suite == 3 else 16
        self.privlevel = 4
        auth, integrity, conf = _SUITES[suite][0]
        return (
            bytearray([tag, 0, self.privlevel, 0])
            + self.clientsessionid
            + self.managedsessionid
            + bytearray([0, 0, 0, 8, auth, 0, 0, 0, 1, 0, 0, 8, integrity, 0, 0, 0])
            + bytearray([2, 0, 0, 8, conf, 0, 0, 0])
        )

    def _got_rakp1(self, data: bytearray) -> None:
        if getattr(self, "suite", None) is None:
            return  # the open session was refused
        tag = data[0]
        self.Rm = data[8:24]
        self.rolem = data[24]
        self.username = bytes(data[28 : 28 + data[27]])
        user = self.bmc.users.get(self.username.decode("utf-8", "replace"))
        status = 0
        if user is None:
            status = _MSC_UNAUTHORIZED_NAME
        elif (self.rolem & 0x0F) > user[1]:
            status = _MSC_INVALID_ROLE
        if status:
            log.info("ipmi: %s: RAKP refused (status 0x%02X)", self.bmc.target.name, status)
            self.send_payload(
                bytearray([tag, status, 0, 0]) + self.clientsessionid,
                _pyghmi_session.constants.payload_types["rakp2"],
                retry=False,
            )
            return
        assert user is not None
        # The session's ceiling: what was asked for (0: the user's maximum).
        self.maxpriv = (self.rolem & 0x0F) or user[1]
        self.clientpriv = self.maxpriv
        self.kuid = user[0].encode()
        self.kg = self.kuid
        self.uuiddata = self.uuid.bytes
        self.Rc = os.urandom(16)
        role = bytes([self.rolem, len(self.username)]) + self.username
        signed = bytes(self.clientsessionid + self.managedsessionid + self.Rm + self.Rc)
        authcode = hmac.new(self.kuid, signed + self.uuiddata + role, self.currhashlib).digest()
        self.send_payload(
            bytearray([tag, 0, 0, 0]) + self.clientsessionid + self.Rc + self.uuiddata + authcode,
            _pyghmi_session.constants.payload_types["rakp2"],
            retry=False,
        )

    def _got_rakp3(self, data: bytearray) -> None:
        if getattr(self, "suite", None) is None or not hasattr(self, "Rc"):
            return
        digest = self.currhashlib
        role = bytes([self.rolem, len(self.username)]) + self.username
        self.sik = hmac.new(self.kg, bytes(self.Rm + self.Rc) + role, digest).digest()
        # K1 and K2 from 20-byte constants whatever the hash (IPMI 2.0 section 13.32).
        self.k1 = hmac.new(self.sik, b"\x01" * 20, digest).digest()
        self.k2 = hmac.new(self.sik, b"\x02" * 20, digest).digest()
        self.aeskey = self.k2[0:16]
        expected = hmac.new(
            self.kuid, bytes(self.Rc + self.clientsessionid) + role, digest
        ).digest()
        if data[1] != 0 or not hmac.compare_digest(expected, bytes(data[8:])):
            return  # the client refused RAKP 2, or does not know the password
        self.localsid = struct.unpack("<I", self.managedsessionid)[0]
        self.ipmicallback = self.handle_client_request
        self._send_rakp4(data[0], 0)

    def _send_rakp4(self, tagvalue: int, statuscode: int) -> None:
        icv = hmac.new(
            self.sik, bytes(self.Rm + self.managedsessionid + self.uuiddata), self.currhashlib
        ).digest()[: self.currhashlen]
        payload = bytearray([tagvalue, statuscode, 0, 0]) + self.clientsessionid + icv
        self.send_payload(payload, _pyghmi_session.constants.payload_types["rakp4"], retry=False)
        self.confalgo = "aes"
        self.integrityalgo = "sha256" if self.suite == 17 else "sha1"
        self.sequencenumber = 1
        self.sessionid = struct.unpack("<I", bytes(self.clientsessionid))[0]

    def handle_client_request(self, request: dict[str, Any]) -> None:
        if request["netfn"] == 0 and request["command"] == 2 and self.clientpriv < _OPERATOR:
            self.send_ipmi_response(code=0xD4)  # chassis control needs OPERATOR
            return
        super().handle_client_request(request)


class _NodeBmc(_pyghmi_bmc.Bmc):  # type: ignore[misc]  # untyped pyghmi
    """One node's BMC: chassis status and chassis control, applied to a ``PowerTarget``."""

    def __init__(
        self,
        target: PowerTarget,
        users: dict[str, tuple[str, int]],
        host: str,
        port: int,
        cipher_suites: Sequence[int] = DEFAULT_CIPHER_SUITES,
    ):
        authdata = {name: password for name, (password, _) in users.items()}
        super().__init__(authdata, port=port, bmcuuid=bmc_guid(target.name), address=host)
        self.users = users
        self.cipher_suites = tuple(cipher_suites)
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

    def send_cipher_suites(
        self, myaddr: int, mylun: int, clientaddr: int, clientlun: int, clientseq: int,
        data: Any, sockaddr: Any,
    ) -> None:  # fmt: skip
        """Get Channel Cipher Suites (sessionless): the offered suites' records."""
        records = bytearray()
        for suite in self.cipher_suites:
            auth, integrity, conf = _SUITES[suite][0]
            records += bytearray([0xC0, suite, auth, 0x40 | integrity, 0x80 | conf])
        index = data[22] & 0x3F if len(data) > 22 else 0
        chunk = records[index * 16 : index * 16 + 16]
        body = bytearray([myaddr, mylun | clientseq << 2, 0x54, 0x00, 0x01]) + chunk
        body.append(_pyghmi_session._checksum(*body))
        head = bytearray([clientaddr, clientlun | (7 << 2)])
        head.append(_pyghmi_session._checksum(*head))
        message = head + body
        rmcp = bytearray(b"\x06\x00\xff\x07\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00")
        packet = rmcp + struct.pack("<H", len(message)) + message
        _pyghmi_session._io_sendto(self.serversocket, packet, sockaddr)

    def sessionless_data(self, data: Any, sockaddr: Any) -> None:
        if self._detached:  # a packet that was queued before stop()
            return
        raw = bytearray(data)
        if (
            len(raw) >= 22
            and raw[0] == 6
            and raw[2:4] == b"\xff\x07"
            and raw[4] == 6
            and (raw[5] & 0x3F) == 0x10
        ):
            # An Open Session Request: this BMC's session class, not pyghmi's.
            _ServerSession(self.authdata, self.kg, sockaddr, self.serversocket, raw[16:],
                           self.uuid, bmc=self)  # fmt: skip
        else:
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
    ``password`` up to ``privilege`` (default OPERATOR), plus the ``users`` given as name ->
    (password, privilege), and offers ``cipher_suites`` (default 17 only; 3 and 17 exist).
    """

    def __init__(
        self,
        targets: Mapping[int, PowerTarget] | Sequence[PowerTarget],
        host: str = "127.0.0.1",
        username: str = "",
        password: str = "",
        *,
        privilege: str = "operator",
        users: Mapping[str, tuple[str, str]] | None = None,
        cipher_suites: Sequence[int] = DEFAULT_CIPHER_SUITES,
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
        if not cipher_suites or any(c not in _SUITES for c in cipher_suites):
            raise ValueError(
                f"cipher suites must be some of {sorted(_SUITES)}, got {list(cipher_suites)}"
            )
        self._users: dict[str, tuple[str, int]] = {}
        for name, (secret, level) in {username: (password, privilege), **(users or {})}.items():
            if level not in PRIVILEGES:
                raise ValueError(f"privilege must be one of {', '.join(PRIVILEGES)}, not {level!r}")
            self._users[name] = (secret, PRIVILEGES[level])
        self.cipher_suites = tuple(cipher_suites)
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
            try:
                for port, target in self._plan:
                    self._bmcs.append(
                        _NodeBmc(target, self._users, self.host, port, self.cipher_suites)
                    )
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
