"""Power control through an IPMI 2.0 BMC (RMCP+ / "lanplus") with pyipmi.

The session uses the node's cipher suite and privilege (``power.cipher_suite``, default
17; ``power.privilege``, default ``operator``: :mod:`harness.power.ipmi_session`). A BMC
that refuses either raises one :class:`IpmiSessionRefused` naming the BMC, what it offers
and the inventory field to change: permanent, never retried (docs/ipmi.md).

Two transports, both driven through pyipmi's ``Ipmi`` object:

- ``interface="ipmitool"``: Debian's ``ipmitool -I lanplus -C <suite> -L <privilege>``,
  run as one long-lived
  ``ipmitool ... shell`` process per driver, so the whole driver lifetime uses a single
  RMCP+ session (pyipmi's own ipmitool interface starts one ipmitool, hence one session,
  per request, and passes the password on the command line). The password reaches
  ipmitool through its environment (``-E``), never through its arguments.
- ``interface="rmcpplus"``: pyipmi's native RMCP+ implementation (suites 1-3 and 15-17),
  without the ASF presence ping (pyghmi-based BMCs, like the lab's, do not answer it); a
  Get Device ID every ``keepalive_s`` keeps the session open. python-ipmi 0.6.1 derives
  the SHA-256 suites' K1/K2 from 32-byte constants where IPMI 2.0 section 13.32, ipmitool
  and BMCs use 20 bytes, so its cipher 17 sessions fail integrity against them: this
  module installs the spec's derivation (:class:`_SpecSessionKeys`).

The session is opened on first use and reused; after any error it is closed and opened
again on the next attempt. Chassis control: power down (forced off), soft shutdown
(graceful off), power up, power cycle. After the BMC accepts a request the chassis status
is read back until it shows the new state. A node already in the requested state gets no
request; ``cycle()`` of a node that is off powers it on.

Errors: refused credentials and unsupported requests (completion codes such as 0xC1,
0xCC, 0xD4) are ``PermanentError`` at once; timeouts, unreachable BMCs and busy answers are
retried until the deadline. A BMC that ignores an unknown user name (pyghmi does) looks
unreachable: that ends in ``WaitTimeout``.
"""

from __future__ import annotations

import functools
import hmac
import logging
import os
import re
import select
import shutil
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

import pyipmi
import pyipmi.errors as ipmi_errors
import pyipmi.interfaces.rmcpplus as ipmi_rmcpplus
import pyipmi.session as ipmi_session
from pyipmi.interfaces.ipmitool import Ipmitool
from pyipmi.interfaces.rmcpplus import RmcpPlus

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
from harness.power.ipmi_session import (
    CHASSIS_CONTROL_PRIVILEGE,
    CIPHER_MSC,
    CIPHER_SUITES,
    DEFAULT_CIPHER_SUITE,
    DEFAULT_PRIVILEGE,
    IPMITOOL_CIPHER_TEXT,
    IPMITOOL_PRIVILEGE_TEXT,
    PRIVILEGE_CC,
    PRIVILEGE_LEVELS,
    PRIVILEGE_MSC,
    IpmiSessionRefused,
    Privilege,
    offered_cipher_suites,
)
from harness.power.probe import ProbeReport

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Longest wait for one IPMI answer; waits are bounded by ``timeout_s`` plus at most this.
REQUEST_TIMEOUT_S: Final = 3.0

# Completion codes after which retrying cannot help.
_PERMANENT_CC: Final = {
    0xC1: "invalid command",
    0xC2: "command invalid for this LUN",
    0xC9: "parameter out of range",
    0xCC: "invalid data field in request",
    0xD4: "insufficient privilege level",
    0xD6: "command sub-function disabled or unavailable",
}
# RMCP+ session setup status codes that mean bad credentials or configuration.
_PERMANENT_MSC: Final = {0x04, 0x05, 0x06, 0x07, 0x09, 0x0A, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11}

_PROMPT: Final = b"ipmitool> "


class _SpecSessionKeys(ipmi_rmcpplus.SessionKeys):  # type: ignore[misc]  # untyped pyipmi
    """pyipmi's session keys with K1 = HMAC(SIK, 20 x 0x01) and K2 = HMAC(SIK, 20 x 0x02)
    whatever the hash, as IPMI 2.0 section 13.32 defines them (pyipmi 0.6.1 uses the
    hash's digest size, 32 bytes for SHA-256, and no BMC agrees)."""

    def __init__(self, suite: Any, sik: bytes) -> None:
        self.suite = suite
        digest = ipmi_rmcpplus.AUTH_ALGORITHMS[suite.authentication][0]
        self.k1 = hmac.new(sik, b"\x01" * 20, digest).digest()
        self.k2 = hmac.new(sik, b"\x02" * 20, digest).digest()


ipmi_rmcpplus.SessionKeys = _SpecSessionKeys


class _RedactedSession(ipmi_session.Session):  # type: ignore[misc]  # untyped pyipmi
    """pyipmi's session, whose ``str()`` (logged by pyipmi) would show the password."""

    def __str__(self) -> str:
        return f"Session(host={self.rmcp_host}:{self.rmcp_port}, user={self.auth_username!r})"

    __repr__ = __str__


class _PinglessRmcpPlus(RmcpPlus):  # type: ignore[misc]  # untyped pyipmi
    """pyipmi's RMCP+ interface without the ASF presence ping, which pyghmi ignores.

    Get Channel Authentication Capabilities, sent right after, checks reachability.
    """

    def ping(self) -> None:
        return None


class _IpmitoolShell(Ipmitool):  # type: ignore[misc]  # untyped pyipmi
    """pyipmi's ipmitool interface over one ``ipmitool -I lanplus ... shell`` process.

    One process holds one RMCP+ session; each request is a ``raw`` line whose answer is
    parsed by pyipmi's ipmitool output parser. Any failure kills the process: the next
    session establishment starts a new one.
    """

    def __init__(
        self, password: Secret, request_timeout_s: float, cipher_suite: int, privilege: str
    ) -> None:
        super().__init__(interface_type="lanplus", cipher=cipher_suite)
        self._cipher_suite = cipher_suite
        self._privilege = privilege
        self._password = password
        self._request_timeout_s = request_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer = weakref.finalize(self, lambda: None)

    # pyipmi Interface API --------------------------------------------------------------

    def establish_session(self, session: Any) -> None:
        self._session = session
        self._stop_process()
        binary = shutil.which(self.IPMITOOL_PATH)
        if binary is None:
            raise FileNotFoundError("ipmitool is not installed (Debian package 'ipmitool')")
        retries = 1
        per_try = max(1, int(self._request_timeout_s / (retries + 1)))
        argv = [
            binary, "-I", "lanplus", "-C", str(self._cipher_suite),
            "-L", self._privilege.upper(),
            "-N", str(per_try), "-R", str(retries),
            "-H", str(session.rmcp_host), "-p", str(session.rmcp_port),
            "-U", session.auth_username_bytes.decode(), "-E", "-v", "shell",
        ]  # fmt: skip
        # `ipmitool shell` spins on a closed stdin, so it must not outlive this process:
        # setpriv (util-linux) makes the kernel kill it when its parent thread exits.
        setpriv = shutil.which("setpriv")
        if setpriv is not None:
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
        env = dict(os.environ, IPMI_PASSWORD=self._password.reveal())
        self._process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
        )
        # ... and not outlive this interface object either.
        self._finalizer = weakref.finalize(self, functools.partial(_stop_ipmitool, self._process))
        output, ended = self._read_answer(self._request_timeout_s * 2 + 1)
        if ended != "prompt":
            self._stop_process()
            text = output.decode(errors="replace")
            refusal = _ipmitool_refusal(text)
            if refusal is not None:
                raise refusal
            if "unauthorized name" in text.lower():
                raise ipmi_errors.AuthenticationError("the BMC does not know the user name")
            if self.re_authentication_error.search(text):
                raise ipmi_errors.AuthenticationError("RAKP HMAC check failed (wrong password?)")
            raise ipmi_errors.IpmiConnectionError(
                f"ipmitool could not open a session ({ended}): {_last_line(text)}"
            )

    def close_session(self) -> None:
        self._stop_process()

    def rmcp_ping(self) -> None:
        raise NotImplementedError("not used: opening the session checks reachability")

    def send_and_receive_raw(self, target: Any, lun: int, netfn: int, raw_bytes: bytes) -> bytes:
        process = self._process
        if process is None or process.poll() is not None or process.stdin is None:
            raise ipmi_errors.IpmiConnectionError("no ipmitool session")
        line = "raw " + " ".join(f"0x{b:02x}" for b in (netfn, *raw_bytes))
        try:
            process.stdin.write(line.encode() + b"\n")
            process.stdin.flush()
        except OSError as exc:
            self._stop_process()
            raise ipmi_errors.IpmiConnectionError(f"ipmitool went away: {exc}") from None
        output, ended = self._read_answer(self._request_timeout_s)
        if ended != "prompt":
            self._stop_process()
            raise ipmi_errors.IpmiTimeoutError()
        text = output.decode(errors="replace")
        echoed, _, answer = text.partition("\n")
        if echoed.strip() != line:
            answer = text  # this ipmitool does not echo its input
        completion_code, response = self._parse_output(answer.encode())
        if completion_code is not None:
            return bytes([completion_code])
        return bytes([0]) + (bytes(response) if response is not None else b"")

    def ready(self) -> bool:
        process = self._process
        return process is not None and process.poll() is None and process.stdin is not None

    def write_raw(self, netfn: int, raw_bytes: bytes) -> str:
        """Write one ``raw`` request line; returns the line (its answer is read apart)."""
        process = self._process
        assert process is not None and process.stdin is not None
        line = "raw " + " ".join(f"0x{b:02x}" for b in (netfn, *raw_bytes))
        process.stdin.write(line.encode() + b"\n")
        process.stdin.flush()
        return line

    def answer_fd(self) -> int:
        assert self._process is not None and self._process.stdout is not None
        return self._process.stdout.fileno()

    def completion_code(self, line: str, output: bytes) -> int:
        """The completion code in ``output`` (the answer to ``line``, prompt removed)."""
        text = output.decode(errors="replace")
        echoed, _, answer = text.partition("\n")
        if echoed.strip() != line:
            answer = text
        completion_code, _response = self._parse_output(answer.encode())
        return 0 if completion_code is None else int(completion_code)

    # process ---------------------------------------------------------------------------

    def _read_answer(self, timeout_s: float) -> tuple[bytes, str]:
        """Read until the next prompt: (output before it, "prompt" | "eof" | "timeout")."""
        process = self._process
        assert process is not None and process.stdout is not None
        fd = process.stdout.fileno()
        buffer = b""
        deadline = time.monotonic() + timeout_s
        while not buffer.endswith(_PROMPT):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return buffer, "timeout"
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return buffer, "eof"
            buffer += chunk
        return buffer[: -len(_PROMPT)], "prompt"

    def _stop_process(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            self._finalizer.detach()
            _stop_ipmitool(process)


class _Refused(Exception):
    """A session refusal for want of a cipher suite or a privilege (becomes an
    :class:`IpmiSessionRefused` once the driver adds what the BMC offers)."""

    def __init__(self, what: Literal["cipher suite", "privilege"], reason: str) -> None:
        self.what: Literal["cipher suite", "privilege"] = what
        self.reason = reason
        super().__init__(f"{what}: {reason}")


def _ipmitool_refusal(text: str) -> _Refused | None:
    """A cipher suite or privilege refusal in ipmitool's output, if it reports one."""
    lowered = text.lower()
    for words, what in ((IPMITOOL_CIPHER_TEXT, "cipher suite"),
                        (IPMITOOL_PRIVILEGE_TEXT, "privilege")):  # fmt: skip
        for word in words:
            if word in lowered:
                line = next(ln for ln in text.splitlines() if word in ln.lower())
                return _Refused(what, re.sub(r"\s+", " ", line).strip())  # type: ignore[arg-type]
    return None


def _stop_ipmitool(process: subprocess.Popen[bytes]) -> None:
    """Ask an ``ipmitool shell`` to close its session and exit; kill it if it does not."""
    try:
        if process.poll() is None and process.stdin is not None:
            process.stdin.write(b"exit\n")
            process.stdin.flush()
        process.wait(timeout=2)
    except (OSError, subprocess.TimeoutExpired):
        process.kill()
        process.wait()
    finally:
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


class IpmiDriver:
    """Power control of ``node`` through the IPMI 2.0 BMC at ``host:port``."""

    def __init__(
        self,
        node: str,
        host: str,
        port: int,
        username: str,
        password: str,
        *,
        interface: Literal["ipmitool", "rmcpplus"] = "ipmitool",
        timeout_s: float = 60,
        poll_s: float = 0.5,
        keepalive_s: int = 20,
        cipher_suite: int = DEFAULT_CIPHER_SUITE,
        privilege: Privilege = DEFAULT_PRIVILEGE,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if cipher_suite not in CIPHER_SUITES:
            valid = ", ".join(str(c) for c in CIPHER_SUITES)
            raise PermanentError(f"{node}: IPMI cipher suite {cipher_suite} (valid: {valid})")
        if privilege not in PRIVILEGE_LEVELS:
            valid = ", ".join(PRIVILEGE_LEVELS)
            raise PermanentError(f"{node}: IPMI privilege {privilege!r} (valid: {valid})")
        if interface not in ("ipmitool", "rmcpplus"):
            raise PermanentError(
                f"{node}: IPMI interface must be 'ipmitool' or 'rmcpplus', not {interface!r}"
            )
        if len(password.encode()) > 20:
            raise PermanentError(f"{node}: IPMI 2.0 passwords are at most 20 bytes")
        self.node = node
        self.host = host
        self.port = port
        self.username = username
        self._password = Secret(password)
        self.interface = interface
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.keepalive_s = keepalive_s
        self.cipher_suite = cipher_suite
        self.privilege = privilege
        self._clock = clock
        self._lock = threading.RLock()
        self._ipmi: Any = None

    def __repr__(self) -> str:
        return (
            f"IpmiDriver(node={self.node!r}, host={self.host!r}, port={self.port}, "
            f"username={self.username!r}, interface={self.interface!r}, "
            f"cipher_suite={self.cipher_suite}, privilege={self.privilege!r})"
        )

    # -- PowerDriver --------------------------------------------------------------------

    def state(self) -> PowerState:
        with self._lock:
            return self._call("report the power state", self._read_state, self._deadline())

    def off(self, *, graceful: bool = False) -> None:
        what = "soft shutdown" if graceful else "power down"
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                if self._call("report the power state", self._read_state, deadline) is (
                    PowerState.OFF
                ):
                    return
            self._control(what, deadline)
            self._wait_for(PowerState.OFF, what, deadline)

    def prepare_off(self, *, graceful: bool = False) -> PreparedPower:
        """Open the session and read the chassis state now; the returned request then sends
        one chassis control command when fired."""
        what = "soft shutdown" if graceful else "power down"
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                if self._call("report the power state", self._read_state, deadline) is (
                    PowerState.OFF
                ):
                    return NothingToDo()
            return self._prepared(what, PowerState.OFF, deadline)

    def prepare_on(self) -> PreparedPower:
        """Like :meth:`prepare_off`, for a power up."""
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                if self._call("report the power state", self._read_state, deadline) is (
                    PowerState.ON
                ):
                    return NothingToDo()
            return self._prepared("power up", PowerState.ON, deadline)

    def _prepared(self, what: str, want: PowerState, deadline: Deadline) -> PreparedPower:
        """The prepared command: split (written and answered through the session's
        ``ipmitool shell`` directly) where the session is one; else whole."""
        interface = getattr(self._ipmi, "interface", None)
        if isinstance(interface, _IpmitoolShell) and interface.ready():
            return _SplitControl(self, interface, what, want, deadline)
        return _PreparedControl(self, what, want, deadline)

    def on(self) -> None:
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                if self._call("report the power state", self._read_state, deadline) is (
                    PowerState.ON
                ):
                    return
            self._control("power up", deadline)
            self._wait_for(PowerState.ON, "power up", deadline)

    def cycle(self) -> None:
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                current = self._call("report the power state", self._read_state, deadline)
            what = "power up" if current is PowerState.OFF else "power cycle"
            self._control(what, deadline)
            self._wait_for(PowerState.ON, what, deadline)

    def close(self) -> None:
        with self._lock:
            self._disconnect()

    def probe(self) -> ProbeReport:
        """Open a new session (cipher suite and privilege as configured) and read the
        chassis status once; changes nothing. Raises :class:`IpmiSessionRefused` when the
        BMC refuses the suite or the privilege."""
        with self._lock:
            self._disconnect()
            deadline = self._deadline()
            started = self._clock.monotonic()
            self._call("open a session", lambda: self._ipmi_op("open a session", _no_op), deadline)
            connected = self._clock.monotonic()
            state = self._call("report the power state", self._read_state, deadline)
            read = self._clock.monotonic()
        offered = offered_cipher_suites(self.host, self.port)
        can_control = PRIVILEGE_LEVELS[self.privilege] >= PRIVILEGE_LEVELS["operator"]
        notes = [] if can_control else [
            f"chassis control needs {CHASSIS_CONTROL_PRIVILEGE.upper()}: this session can only read"
        ]  # fmt: skip
        notes.append("soft shutdown is ACPI: the OS may ignore it")
        return ProbeReport(
            protocol="ipmi",
            endpoint=f"{self.host}:{self.port}",
            state=state,
            authentication=f"{CIPHER_SUITES[self.cipher_suite].split(',')[0]} as {self.username!r}",
            security=f"cipher suite {self.cipher_suite} ({self.interface})",
            privilege=self.privilege.upper(),
            reset_types=IPMI_RESET_TYPES if can_control else frozenset(),
            connect_s=connected - started,
            readback_s=read - connected,
            offered=(
                "cipher suites " + ", ".join(str(c) for c in offered)
                if offered is not None
                else "cipher suites not listed"
            ),
            notes=tuple(notes),
        )

    # -- steps --------------------------------------------------------------------------

    def _deadline(self) -> Deadline:
        return Deadline(self.timeout_s, self._clock)

    def _call(self, what: str, operation: Callable[[], T], deadline: Deadline) -> T:
        return retry(
            operation,
            action=f"{self.node}: IPMI {self.host}:{self.port} to {what}",
            deadline=deadline,
            poll_s=self.poll_s,
        )

    def _control(self, what: str, deadline: Deadline) -> None:
        actions: dict[str, Callable[[Any], None]] = {
            "power down": lambda ipmi: ipmi.chassis_control_power_down(),
            "soft shutdown": lambda ipmi: ipmi.chassis_control_soft_shutdown(),
            "power up": lambda ipmi: ipmi.chassis_control_power_up(),
            "power cycle": lambda ipmi: ipmi.chassis_control_power_cycle(),
        }
        action = actions[what]
        # A refusal (credentials, a completion code the BMC gives for a command it will not
        # run) means the chassis took nothing.
        with refusal_acted_on_nothing():
            self._call(f"accept chassis {what}", lambda: self._ipmi_op(what, action), deadline)
        log.info("%s: IPMI accepted chassis %s", self.node, what)

    def _wait_for(self, want: PowerState, what: str, deadline: Deadline) -> None:
        wait_until(
            self._read_state,
            lambda seen: seen is want,
            expected=f"{self.node}: chassis power {want.value} from IPMI after {what}",
            deadline=deadline,
            poll_s=self.poll_s,
            first_poll_s=READBACK_FIRST_POLL_S,
            describe=lambda seen: f"chassis power {seen.value}",
        )

    def _read_state(self) -> PowerState:
        status = self._ipmi_op("get chassis status", lambda ipmi: ipmi.get_chassis_status())
        return PowerState.ON if status.power_on else PowerState.OFF

    # -- pyipmi -------------------------------------------------------------------------

    def _ipmi_op(self, what: str, operation: Callable[[Any], T]) -> T:
        """Run ``operation`` on the session; on any failure close it and translate."""
        try:
            return operation(self._connect())
        except PowercutError:
            self._disconnect()
            raise
        except _Refused as exc:
            error: PowercutError = self._refused(exc.what, exc.reason)
        except (ipmi_errors.CompletionCodeError, ipmi_errors.MessageStatusCodeError) as exc:
            error = self._translate_code(what, exc)
        except (ipmi_errors.AuthenticationError, ipmi_errors.IpmiLongPasswordError) as exc:
            error = PermanentError(
                f"{self.node}: IPMI {self.host}:{self.port} refused the credentials of user "
                f"{self.username!r} ({redact(str(exc), self._password)})"
            )
        except ipmi_errors.NotSupportedError as exc:
            error = PermanentError(
                f"{self.node}: IPMI {self.host}:{self.port}: {what} not supported: "
                f"{redact(str(exc), self._password)}"
            )
        except FileNotFoundError as exc:
            error = PermanentError(f"{self.node}: {exc}")
        except (
            ipmi_errors.IpmiConnectionError,
            ipmi_errors.IpmiTimeoutError,
            ipmi_errors.RetryError,
            ipmi_errors.DecodingError,
            TimeoutError,
            OSError,
        ) as exc:
            error = TemporaryError(
                f"{self.node}: IPMI {self.host}:{self.port}: {what} failed: "
                f"{type(exc).__name__}: {redact(str(exc), self._password) or 'no answer'}"
            )
        self._disconnect()
        raise error

    def _refused(
        self, what: Literal["cipher suite", "privilege"], reason: str
    ) -> IpmiSessionRefused:
        offered = offered_cipher_suites(self.host, self.port) if what == "cipher suite" else None
        return IpmiSessionRefused(
            self.node,
            f"{self.host}:{self.port}",
            what=what,
            cipher_suite=self.cipher_suite,
            privilege=self.privilege,
            username=self.username,
            reason=redact(reason, self._password),
            offered=offered,
        )

    def _translate_code(self, what: str, exc: Exception) -> PowercutError:
        where = f"{self.node}: IPMI {self.host}:{self.port}"
        if isinstance(exc, ipmi_errors.MessageStatusCodeError):
            if exc.msc in CIPHER_MSC:
                return self._refused(
                    "cipher suite", f"status 0x{exc.msc:02X}, {CIPHER_MSC[exc.msc]}"
                )
            if exc.msc in PRIVILEGE_MSC:
                return self._refused(
                    "privilege", f"status 0x{exc.msc:02X}, {PRIVILEGE_MSC[exc.msc]}"
                )
            if exc.msc in _PERMANENT_MSC:
                return PermanentError(
                    f"{where} refused the session for user {self.username!r}: {exc}"
                )
            return TemporaryError(f"{where}: session setup failed: {exc}")
        assert isinstance(exc, ipmi_errors.CompletionCodeError)
        if exc.cc == 0xD4 or (what == "open a session" and exc.cc in PRIVILEGE_CC):
            need = f"; {what} needs {CHASSIS_CONTROL_PRIVILEGE.upper()}" if exc.cc == 0xD4 else ""
            reason = f"completion code 0x{exc.cc:02X} ({PRIVILEGE_CC[exc.cc]}){need}"
            return self._refused("privilege", reason)
        if exc.cc in _PERMANENT_CC:
            return PermanentError(
                f"{where} refused {what}: completion code 0x{exc.cc:02X} ({_PERMANENT_CC[exc.cc]})"
            )
        return TemporaryError(f"{where}: {what} failed: {exc}")

    def _connect(self) -> Any:
        if self._ipmi is not None:
            return self._ipmi
        interface: Any
        if self.interface == "rmcpplus":
            interface = _PinglessRmcpPlus(
                cipher_suite=self.cipher_suite, keep_alive_interval=self.keepalive_s, max_retries=1
            )
        else:
            interface = _IpmitoolShell(
                self._password, REQUEST_TIMEOUT_S, self.cipher_suite, self.privilege
            )
        session = _RedactedSession()
        ipmi = pyipmi.Ipmi(interface=interface, session=session)
        session.set_session_type_rmcp(self.host, self.port)
        session.set_auth_type_user(self.username, self._password.reveal())
        session.set_priv_level(self.privilege)
        ipmi.target = pyipmi.Target(ipmb_address=0x20)
        interface.open()
        if self.interface == "rmcpplus":
            interface.set_timeout(REQUEST_TIMEOUT_S / 2)
        try:
            session.establish()
        except ipmi_errors.CompletionCodeError as exc:
            # Set Session Privilege Level, the last step of the setup, refused the level.
            _quietly(interface.close_session)
            _quietly(interface.close)
            if exc.cc in PRIVILEGE_CC:
                raise _Refused("privilege", f"completion code 0x{exc.cc:02X} "
                               f"({PRIVILEGE_CC[exc.cc]})") from None  # fmt: skip
            raise
        except BaseException:
            _quietly(interface.close_session)
            _quietly(interface.close)
            raise
        self._ipmi = ipmi
        log.debug("%s: IPMI session open (%s)", self.node, self.interface)
        return ipmi

    def _disconnect(self) -> None:
        ipmi, self._ipmi = self._ipmi, None
        if ipmi is not None:
            # Not ipmi.close(): it skips closing the socket when Close Session fails.
            _quietly(ipmi.session.close)
            _quietly(ipmi.interface.close)


class _PreparedControl:
    """One chassis control command over a session opened in advance (see
    :meth:`IpmiDriver.prepare_off`)."""

    def __init__(self, driver: IpmiDriver, what: str, want: PowerState, deadline: Deadline) -> None:
        self.driver = driver
        self.what = what
        self.want = want
        self.deadline = deadline

    def fire(self) -> None:
        with self.driver._lock:
            self.driver._control(self.what, self.deadline)

    def confirm(self) -> None:
        with self.driver._lock:
            self.driver._wait_for(self.want, self.what, self.deadline)


#: Chassis Control (NetFn chassis 0x00, command 0x02): its data byte per request.
_CHASSIS_CONTROL: Final = {"power down": 0x00, "power up": 0x01, "power cycle": 0x02,
                           "soft shutdown": 0x05}  # fmt: skip


class _SplitControl(_PreparedControl):
    """The chassis control command written straight to the session's ``ipmitool shell``,
    its answer (up to the next prompt) read apart: a synchronized cut
    (:mod:`harness.power.volley`) writes every node's command from a few threads and stamps
    every answer from one selector. An answer other than completion code 0, or none, is
    retried by :meth:`_PreparedControl.fire` (a new session if need be, the driver's
    retries and errors)."""

    def __init__(
        self,
        driver: IpmiDriver,
        shell: _IpmitoolShell,
        what: str,
        want: PowerState,
        deadline: Deadline,
    ) -> None:
        super().__init__(driver, what, want, deadline)
        self._shell = shell
        self._line = ""
        self._answer = b""
        self._ended = False

    def send(self) -> None:
        self._line = self._shell.write_raw(0x00, bytes([0x02, _CHASSIS_CONTROL[self.what]]))

    def answer_fd(self) -> int:
        return self._shell.answer_fd()

    def feed(self) -> bool:
        chunk = os.read(self.answer_fd(), 65536)
        self._answer += chunk
        self._ended = not chunk
        return self._ended or self._answer.endswith(_PROMPT)

    def accepted(self) -> bool:
        if self._ended or not self._answer.endswith(_PROMPT):
            with self.driver._lock:
                self.driver._disconnect()  # the shell's state is unknown: a new session
            return False
        code = self._shell.completion_code(self._line, self._answer[: -len(_PROMPT)])
        if code == 0:
            log.info("%s: IPMI accepted chassis %s", self.driver.node, self.what)
        return code == 0

    def close(self) -> None:
        return None


#: What chassis control does, as reset types: power up, power down, soft shutdown,
#: power cycle, hard reset.
IPMI_RESET_TYPES: Final = frozenset({
    ResetType.ON, ResetType.FORCE_OFF, ResetType.GRACEFUL_SHUTDOWN, ResetType.POWER_CYCLE,
    ResetType.FORCE_RESTART,
})  # fmt: skip


def _no_op(ipmi: Any) -> None:
    return None


def _quietly(action: Callable[[], object]) -> None:
    """Run a clean-up step; a failure is logged at debug level (the session is gone anyway)."""
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - closing a broken session may fail any way
        log.debug("ignored while closing an IPMI session: %s: %s", type(exc).__name__, exc)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
