"""Power off (and reboot) a node from inside, over SSH (paramiko).

SSH can cut power but cannot restore it: ``on()`` always raises ``PermanentError``; pair
this driver with a BMC driver to bring nodes back.

- ``state()``: ON when the node accepts an SSH connection and runs ``true``; OFF when the
  connection is refused, reset, or times out (a powered-off machine does not answer).
  Refused keys and unknown or changed host keys are ``PermanentError``, never "off".
- ``off()``: runs ``command_off`` (graceful) or ``command_off_forced``, then waits until SSH
  stops answering. A forced power-off usually kills the connection before any exit status:
  that counts as accepted. A non-zero exit status is a ``PermanentError``. A host that
  keeps answering to the end of the deadline raises ``WaitTimeout`` marked ``acted =
  False``: the power-off did not happen, so the journal owes nothing for it.
- ``cycle()``: runs ``command_reboot``, waits for the connection to drop, then for SSH to
  answer again.

Failure kinds beyond power (:mod:`harness.failures`), each with its undo
armed on the node itself *before* the cut, as a transient systemd timer, so a node never
stays cut off if powercut dies (``recover`` heals too):

- ``partition(node, heal_after_s=...)``: ``command_partition`` arms the heal
  (``systemd-run --on-active``), then drops every packet in and out of the node but SSH
  and loopback (an iptables chain of its own); ``heal`` removes the chain at once.
- ``stop_kubelet(node, restart_after_s=...)``: ``command_kubelet_stop`` arms
  ``systemctl start kubelet``, then stops it (containers keep running);
  ``start_kubelet`` starts it at once.
- ``cut_storage(node, endpoints, heal_after_s=...)``: arms the heal, then drops the node's
  traffic to and from its storage endpoints only (:mod:`harness.power.storage_cut`);
  ``heal_storage`` removes the chain at once.

The commands are ``power.extra`` options (``{seconds}`` is replaced by the whole seconds
until the armed undo runs), for nodes whose firewall or init system differ.

Host keys are checked against ``known_hosts`` (``None``: the user's ``~/.ssh/known_hosts``);
with ``strict_host_key`` (the default) an unknown host is refused. The driver keeps one
connection open between calls and reconnects when it breaks.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

import paramiko

from harness.errors import PermanentError, TemporaryError, WaitTimeout, not_acted
from harness.power import storage_cut
from harness.power._wait import SYSTEM_CLOCK, Clock, Deadline, before_acting, retry, wait_until
from harness.power.base import PowerState, ResetType
from harness.power.probe import ProbeReport
from harness.power.storage_cut import StorageEndpoint

log = logging.getLogger(__name__)

T = TypeVar("T")

ON_REFUSED: Final = "SSH can cut power but cannot restore it; use the node's BMC (ipmi or redfish)"
STILL_ANSWERING: Final = "still answering"

#: The iptables chain of a partition, and the transient units that undo the cuts.
PARTITION_CHAIN: Final = "POWERCUT-PARTITION"
HEAL_UNIT: Final = "powercut-heal-partition"
KUBELET_UNIT: Final = "powercut-start-kubelet"
_UNCUT: Final = (
    f"iptables -D INPUT -j {PARTITION_CHAIN} 2>/dev/null; "
    f"iptables -D OUTPUT -j {PARTITION_CHAIN} 2>/dev/null; "
    f"iptables -F {PARTITION_CHAIN} 2>/dev/null; iptables -X {PARTITION_CHAIN} 2>/dev/null; true"
)
COMMAND_PARTITION: Final = (
    f"systemd-run --collect --unit={HEAL_UNIT} --on-active={{seconds}} /bin/sh -c '{_UNCUT}'"
    f" && iptables -N {PARTITION_CHAIN}"
    f" && iptables -A {PARTITION_CHAIN} -p tcp --dport 22 -j RETURN"
    f" && iptables -A {PARTITION_CHAIN} -p tcp --sport 22 -j RETURN"
    f" && iptables -A {PARTITION_CHAIN} -s 127.0.0.0/8 -j RETURN"
    f" && iptables -A {PARTITION_CHAIN} -d 127.0.0.0/8 -j RETURN"
    f" && iptables -A {PARTITION_CHAIN} -j DROP"
    f" && iptables -I INPUT 1 -j {PARTITION_CHAIN}"
    f" && iptables -I OUTPUT 1 -j {PARTITION_CHAIN}"
)
COMMAND_HEAL: Final = f"systemctl stop {HEAL_UNIT}.timer 2>/dev/null; {_UNCUT}"
COMMAND_KUBELET_STOP: Final = (
    f"systemd-run --collect --unit={KUBELET_UNIT} --on-active={{seconds}} "
    "systemctl start kubelet && systemctl stop kubelet"
)
COMMAND_KUBELET_START: Final = (
    f"systemctl start kubelet && (systemctl stop {KUBELET_UNIT}.timer 2>/dev/null; true)"
)

# What a connection to a machine that is off (or booting) runs into: refused, reset or
# timed out (all OSError), or closed in the middle of the handshake (EOFError).
_NOT_ANSWERING: Final = (OSError, EOFError)


#: paramiko's transport threads log through this logger; see ``_DemoteToDebug``.
TRANSPORT_LOGGER: Final = "harness.power.ssh.transport"


class _DemoteToDebug(logging.Filter):
    """Log paramiko's transport-thread errors at DEBUG.

    A probe of a machine that is off fails by design, and paramiko logs each failure
    (with a traceback) at ERROR from its own thread; the driver reports what matters
    through its exceptions.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


logging.getLogger(TRANSPORT_LOGGER).addFilter(_DemoteToDebug())


class _NotAnswering(Exception):
    """The node did not answer SSH (refused, reset, timed out, closed early).

    ``sent``: the request to run the command had gone out when the connection failed.
    """

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


class _UnknownHostKey(paramiko.SSHException):
    pass


class _RejectUnknownHost(paramiko.MissingHostKeyPolicy):
    """``RejectPolicy`` with an exception type of its own, so it cannot look like "off"."""

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        raise _UnknownHostKey(hostname)


#: What SSH can ask of a running node: poweroff --force, poweroff, reboot.
SSH_RESET_TYPES: Final = frozenset(
    {ResetType.FORCE_OFF, ResetType.GRACEFUL_SHUTDOWN, ResetType.GRACEFUL_RESTART}
)


class SshDriver:
    """Power off / reboot of ``node`` through its SSH server at ``host:port``."""

    def __init__(
        self,
        node: str,
        host: str,
        port: int,
        user: str,
        key_file: str,
        *,
        known_hosts: str | None,
        strict_host_key: bool = True,
        command_off: str = "systemctl poweroff",
        command_off_forced: str = "systemctl poweroff --force --force",
        command_reboot: str = "systemctl reboot",
        command_partition: str = COMMAND_PARTITION,
        command_heal: str = COMMAND_HEAL,
        command_kubelet_stop: str = COMMAND_KUBELET_STOP,
        command_kubelet_start: str = COMMAND_KUBELET_START,
        timeout_s: float = 60,
        poll_s: float = 0.5,
        probe_timeout_s: float = 5.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.node = node
        self.host = host
        self.port = port
        self.user = user
        self.key_file = key_file
        self.known_hosts = known_hosts
        self.strict_host_key = strict_host_key
        self.command_off = command_off
        self.command_off_forced = command_off_forced
        self.command_reboot = command_reboot
        self.command_partition = command_partition
        self.command_heal = command_heal
        self.command_kubelet_stop = command_kubelet_stop
        self.command_kubelet_start = command_kubelet_start
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.probe_timeout_s = probe_timeout_s
        self._clock = clock
        self._lock = threading.RLock()
        self._client: paramiko.SSHClient | None = None
        self._key: paramiko.PKey | None = None

    def __repr__(self) -> str:
        return (
            f"SshDriver(node={self.node!r}, host={self.host!r}, port={self.port}, "
            f"user={self.user!r}, key_file={self.key_file!r}, known_hosts={self.known_hosts!r}, "
            f"strict_host_key={self.strict_host_key})"
        )

    @property
    def _where(self) -> str:
        return f"{self.node}: SSH {self.user}@{self.host}:{self.port}"

    # -- PowerDriver --------------------------------------------------------------------

    def state(self) -> PowerState:
        with self._lock:
            return self._probe(self._deadline())

    def off(self, *, graceful: bool = False) -> None:
        command = self.command_off if graceful else self.command_off_forced
        with self._lock:
            deadline = self._deadline()
            with before_acting():
                if self._probe(deadline) is PowerState.OFF:
                    return
                # Never sent (it could not connect, or the command exited non-zero): nothing
                # acted. A command that went out and lost its connection returns.
                self._power_command(command, deadline)
            try:
                wait_until(
                    lambda: self._probe(deadline),
                    lambda seen: seen is PowerState.OFF,
                    expected=f"{self._where} to stop answering after {command!r}",
                    deadline=deadline,
                    poll_s=self.poll_s,
                    describe=lambda seen: STILL_ANSWERING if seen is PowerState.ON else seen.value,
                )
            except WaitTimeout as exc:
                if exc.last_seen == STILL_ANSWERING:
                    # The host answered to the end: the power-off did not happen.
                    not_acted(exc)
                raise

    def on(self) -> None:
        raise PermanentError(f"{self.node}: {ON_REFUSED}")

    def cycle(self) -> None:
        with self._lock:
            deadline = self._deadline()
            if self._probe(deadline) is PowerState.OFF:
                raise PermanentError(
                    f"{self._where} does not answer, so it cannot reboot; {ON_REFUSED}"
                )
            client = self._power_command(self.command_reboot, deadline)
            wait_until(
                lambda: client is not None and self._still_connected(client, deadline),
                lambda connected: not connected,
                expected=f"{self._where} to drop the connection after {self.command_reboot!r}",
                deadline=deadline,
                poll_s=self.poll_s,
                describe=lambda _connected: "connection still open",
            )
            wait_until(
                lambda: self._probe(deadline),
                lambda seen: seen is PowerState.ON,
                expected=f"{self._where} to answer again after {self.command_reboot!r}",
                deadline=deadline,
                poll_s=self.poll_s,
                describe=lambda seen: "not answering" if seen is PowerState.OFF else seen.value,
            )

    def close(self) -> None:
        with self._lock:
            self._disconnect()

    def probe(self) -> ProbeReport:
        """Connect (key and host key checked as configured) and probe twice: the first
        probe's time includes the connection, the second is one round trip. Changes
        nothing. SSH can power off, shut down and reboot, never power on."""
        with self._lock:
            self._disconnect()
            started = self._clock.monotonic()
            self._probe(self._deadline())
            connected = self._clock.monotonic()
            state = self._probe(self._deadline())
            read = self._clock.monotonic()
        checked = "host key checked" if self.strict_host_key else "host key NOT checked"
        return ProbeReport(
            protocol="ssh",
            endpoint=f"{self.host}:{self.port}",
            state=state,
            authentication=f"publickey as {self.user!r}",
            security=f"ssh, {checked}",
            privilege="-",
            reset_types=SSH_RESET_TYPES if state is PowerState.ON else frozenset(),
            connect_s=connected - started,
            readback_s=read - connected,
            notes=(ON_REFUSED,) if state is PowerState.ON else ("the node does not answer SSH",),
        )

    # -- failure kinds beyond power -----------------------------------------------------

    def supports(self, kind: str) -> bool:
        """Power off, graceful shutdown, reboot, partition and kubelet stop: all but
        powering on, which SSH cannot do (pair the driver with a BMC)."""
        return True

    def partition(self, node: str, *, heal_after_s: float) -> None:
        """Arm the heal on the node, then cut it off the network (SSH and loopback apart)."""
        self._on_node(node, self.command_partition, heal_after_s)

    def heal(self, node: str) -> None:
        """Heal a partition now (idempotent); the armed timer is stopped."""
        self._on_node(node, self.command_heal, None)

    def stop_kubelet(self, node: str, *, restart_after_s: float) -> None:
        """Arm the kubelet's restart on the node, then stop it (containers keep running)."""
        self._on_node(node, self.command_kubelet_stop, restart_after_s)

    def start_kubelet(self, node: str) -> None:
        """Start the kubelet now (idempotent); the armed timer is stopped."""
        self._on_node(node, self.command_kubelet_start, None)

    def cut_storage(
        self, node: str, endpoints: list[StorageEndpoint], *, heal_after_s: float
    ) -> None:
        """Arm the heal on the node, then drop its traffic to and from the storage
        endpoints (:mod:`harness.power.storage_cut`); everything else goes on."""
        if heal_after_s <= 0:
            raise PermanentError(f"{self._where}: the undo must be armed > 0 s ahead")
        seconds = max(1, math.ceil(heal_after_s))
        self._on_node(node, storage_cut.cut_command(list(endpoints), seconds), None)

    def heal_storage(self, node: str) -> None:
        """Give the node its storage network back now (idempotent); the timer is stopped."""
        self._on_node(node, storage_cut.COMMAND_HEAL, None)

    def _on_node(self, node: str, template: str, after_s: float | None) -> None:
        if node != self.node:
            raise PermanentError(f"{self._where}: this driver acts on {self.node}, not {node}")
        command = template
        if after_s is not None:
            if after_s <= 0:
                raise PermanentError(f"{self._where}: the undo must be armed > 0 s ahead")
            command = template.replace("{seconds}", str(max(1, math.ceil(after_s))))
        with self._lock:
            self._power_command(command, self._deadline())

    # -- steps --------------------------------------------------------------------------

    def _deadline(self) -> Deadline:
        return Deadline(self.timeout_s, self._clock)

    def _attempt_s(self, deadline: Deadline) -> float:
        return max(0.2, min(self.probe_timeout_s, deadline.remaining()))

    def _probe(self, deadline: Deadline) -> PowerState:
        """ON if the node runs ``true`` over SSH, OFF if it does not answer."""
        timeout = self._attempt_s(deadline)
        client = self._client
        if client is not None:
            if self._still_connected(client, deadline):
                return PowerState.ON
            self._disconnect()
        try:
            client = self._connect(timeout)
            self._exec(client, "true", timeout)
        except _NotAnswering as exc:
            log.debug("%s: not answering: %s", self._where, exc)
            self._disconnect()
            return PowerState.OFF
        return PowerState.ON

    def _still_connected(self, client: paramiko.SSHClient, deadline: Deadline) -> bool:
        """Whether an existing connection still runs commands (never reconnects)."""
        transport = client.get_transport()
        if transport is None or not transport.is_active():
            return False
        try:
            self._exec(client, "true", self._attempt_s(deadline))
        except _NotAnswering:
            return False
        return True

    def _power_command(self, command: str, deadline: Deadline) -> paramiko.SSHClient | None:
        """Run a power command; returns the connection it ran on (None if it dropped)."""

        def attempt() -> paramiko.SSHClient | None:
            timeout = self._attempt_s(deadline)
            try:
                client = self._client or self._connect(timeout)
            except _NotAnswering as exc:
                self._disconnect()
                raise TemporaryError(
                    f"{self._where}: cannot connect to run {command!r}: {exc}"
                ) from None
            try:
                status, _stdout, stderr = self._exec(client, command, timeout)
            except _NotAnswering as exc:
                self._disconnect()
                if not exc.sent:
                    raise TemporaryError(
                        f"{self._where}: could not run {command!r}: {exc}"
                    ) from None
                # The command went out and the machine went away: that is what a power
                # command does. The wait that follows tells whether it really happened.
                log.info("%s: connection lost after %r (%s)", self._where, command, exc)
                return None
            if status != 0:
                raise PermanentError(
                    f"{self._where}: {command!r} failed with exit status {status}: "
                    f"{stderr.strip()[:500] or 'no output'}"
                )
            log.info("%s: %r accepted", self._where, command)
            return client

        return retry(
            attempt,
            action=f"{self._where} to accept {command!r}",
            deadline=deadline,
            poll_s=self.poll_s,
        )

    # -- paramiko -----------------------------------------------------------------------

    def _load_key(self) -> paramiko.PKey:
        if self._key is None:
            try:
                self._key = paramiko.PKey.from_path(Path(self.key_file))
            except (OSError, paramiko.SSHException, ValueError) as exc:
                raise PermanentError(
                    f"{self.node}: cannot load SSH key {self.key_file!r}: {exc}"
                ) from None
        return self._key

    def _connect(self, timeout: float) -> paramiko.SSHClient:
        key = self._load_key()
        client = paramiko.SSHClient()
        client.set_log_channel(TRANSPORT_LOGGER)
        try:
            if self.known_hosts is not None:
                client.load_host_keys(self.known_hosts)
            else:
                client.load_system_host_keys()
        except OSError as exc:
            client.close()
            raise PermanentError(f"{self.node}: cannot read known_hosts: {exc}") from None
        client.set_missing_host_key_policy(
            _RejectUnknownHost() if self.strict_host_key else paramiko.WarningPolicy()
        )
        try:
            client.connect(
                self.host,
                port=self.port,
                username=self.user,
                pkey=key,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                channel_timeout=timeout,
                look_for_keys=False,
                allow_agent=False,
            )
        except _UnknownHostKey:
            client.close()
            raise PermanentError(
                f"{self._where}: the host key is not in "
                f"{self.known_hosts or '~/.ssh/known_hosts'} (strict host key checking)"
            ) from None
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise PermanentError(
                f"{self._where}: the host key changed ({exc.key.get_name()} "
                f"{exc.key.fingerprint}, expected {exc.expected_key.fingerprint})"
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise PermanentError(
                f"{self._where} refused the key {self.key_file!r}: {exc}"
            ) from None
        except (paramiko.SSHException, *_NOT_ANSWERING) as exc:
            client.close()
            raise _NotAnswering(f"{type(exc).__name__}: {exc}") from None
        self._client = client
        return client

    def _exec(
        self, client: paramiko.SSHClient, command: str, timeout: float
    ) -> tuple[int, str, str]:
        """Run ``command``: (exit status, stdout, stderr); ``_NotAnswering`` if it cannot."""
        sent = False
        try:
            transport = client.get_transport()
            if transport is None or not transport.is_active():
                raise _NotAnswering("connection closed")
            channel = transport.open_session(timeout=timeout)
            try:
                channel.settimeout(timeout)
                # From here the server may have run the command even if the request
                # fails: a forced power-off can kill the connection before the reply.
                sent = True
                channel.exec_command(command)
                if not channel.status_event.wait(timeout):
                    raise _NotAnswering(f"no exit status within {timeout:.1f}s", sent=True)
                if channel.exit_status == -1:  # the event is also set when the channel closes
                    raise _NotAnswering("channel closed without an exit status", sent=True)
                stdout = _drain(channel.recv_ready, channel.recv)
                stderr = _drain(channel.recv_stderr_ready, channel.recv_stderr)
                return channel.exit_status, stdout, stderr
            finally:
                channel.close()
        except _NotAnswering:
            raise
        except (paramiko.SSHException, *_NOT_ANSWERING) as exc:
            raise _NotAnswering(f"{type(exc).__name__}: {exc}", sent=sent) from None

    def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()


def _drain(ready: Callable[[], bool], receive: Callable[[int], bytes]) -> str:
    chunks: list[bytes] = []
    while ready():
        chunk = receive(65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")
