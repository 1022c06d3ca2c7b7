"""An SSH endpoint for one lab node (paramiko): public-key auth, a few power commands.

It answers like a node's sshd would for the commands the harness sends:

- ``poweroff``, ``shutdown -h now``, ``systemctl poweroff``: graceful power off (exit 0,
  then, once the client closed the channel, off; every connection drops);
- ``poweroff -f``, ``systemctl poweroff --force --force``: forced power off (the machine
  dies at once: no exit status, every connection drops);
- ``reboot``, ``systemctl reboot``: reset (exit 0, then off and on; connections drop);
- ``systemctl is-system-running``: prints ``running``, exit 0;
- ``true``: exit 0 (the harness's liveness probe);
- the SSH power driver's storage-network cut and heal (:mod:`harness.power.storage_cut`),
  when the target can do them (the lab's nodes can: their volumes' I/O fails);
- the SSH power driver's partition, heal, kubelet-stop and kubelet-start commands
  (:mod:`harness.power.ssh`), when the target can do them (the lab's nodes can): the
  undo is armed on the "node" (a timer in the lab) before the cut, as on a real machine;
- anything else: exit 127 and "command not found" on stderr.

A powered-off machine does not answer SSH: while the target is off, the server keeps its
port but resets every new connection at once (the client sees a reset, not a banner), and
it drops established connections when it sees the target go off, whoever turned it off.
Interactive shells, PTYs, port forwarding and password auth are refused.

Threads: one listener per server, one per connection (paramiko adds its own transport
thread per connection). ``stop()`` closes the listener and every connection.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import os
import queue
import re
import shlex
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

import paramiko

from harness.errors import PowercutError
from harness.lab.bmc.target import NodeAgent, PowerTarget, StorageAgent
from harness.power import ssh as driver
from harness.power import storage_cut
from harness.power.base import PowerState

log = logging.getLogger(__name__)

_GRACEFUL_OFF: Final = frozenset({"poweroff", "shutdown -h now", "systemctl poweroff"})
_FORCED_OFF: Final = frozenset({"poweroff -f", "systemctl poweroff --force --force"})
_REBOOT: Final = frozenset({"reboot", "systemctl reboot"})

#: How long the server waits for the client to close a finished command's channel
#: before closing it itself.
_CLIENT_CLOSE_GRACE_S: Final = 2.0
_POLL_S: Final = 0.1


#: paramiko's server transport threads log through this logger, demoted to DEBUG: clients
#: probing a node, resetting connections or failing to authenticate are routine here.
TRANSPORT_LOGGER: Final = "harness.lab.bmc.ssh.transport"


class _DemoteToDebug(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


logging.getLogger(TRANSPORT_LOGGER).addFilter(_DemoteToDebug())


def parse_authorized_key(line: str) -> paramiko.PKey:
    """A public key from an ``authorized_keys``-style line (``type base64 [comment]``)."""
    fields = line.split()
    if len(fields) < 2:
        raise ValueError(f"not a public key line: {line[:40]!r}")
    try:
        blob = base64.b64decode(fields[1], validate=True)
    except binascii.Error as exc:
        raise ValueError(f"bad base64 in public key line {line[:40]!r}") from exc
    return paramiko.PKey.from_type_string(fields[0], blob)


def _seconds_pattern(template: str) -> re.Pattern[str]:
    """The normalised ``template`` with its ``{seconds}`` as a captured number."""
    marker = "SECONDS0MARKER"
    text = re.escape(_normalise(template.replace("{seconds}", marker)))
    return re.compile("^" + text.replace(marker, r"(\d+)") + "$")


def _normalise(command: str) -> str:
    try:
        return " ".join(shlex.split(command))
    except ValueError:
        return command.strip()


class _Exec:
    """One exec request, handed from paramiko's transport thread to the connection thread."""

    def __init__(self, channel: paramiko.Channel, command: str) -> None:
        self.channel = channel
        self.command = command


class _Interface(paramiko.ServerInterface):
    def __init__(self, authorized: set[tuple[str, bytes]], requests: queue.Queue[_Exec]) -> None:
        self._authorized = authorized
        self._requests = requests

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        if (key.get_name(), key.asbytes()) in self._authorized:
            return paramiko.common.AUTH_SUCCESSFUL
        return paramiko.common.AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return paramiko.common.OPEN_SUCCEEDED
        return paramiko.common.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        self._requests.put(_Exec(channel, command.decode("utf-8", errors="replace")))
        return True


class SshServer:
    """The SSH endpoint of one node.

    ``authorized_keys`` are public-key lines (``ssh-ed25519 AAAA... comment``); any user name
    is accepted with one of them. ``port=0`` picks a free port (read ``port`` after start).
    """

    def __init__(
        self,
        target: PowerTarget,
        host: str = "127.0.0.1",
        port: int = 0,
        host_key_path: str | os.PathLike[str] = "",
        authorized_keys: Iterable[str] = (),
    ) -> None:
        if not host_key_path:
            raise ValueError("an SshServer needs a host key file")
        self.target = target
        self.host = host
        self.port = port
        self.host_key_path = Path(host_key_path)
        self._authorized = {
            (k.get_name(), k.asbytes()) for k in map(parse_authorized_key, authorized_keys)
        }
        if not self._authorized:
            raise ValueError("an SshServer needs at least one authorized key")
        self._host_key: paramiko.PKey | None = None
        self._listener: socket.socket | None = None
        self._listener_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._transports: set[paramiko.Transport] = set()
        self._threads: set[threading.Thread] = set()

    def __repr__(self) -> str:
        return f"SshServer({self.target.name!r}, {self.host}:{self.port})"

    def __enter__(self) -> SshServer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def host_key(self) -> paramiko.PKey:
        if self._host_key is None:
            self._host_key = paramiko.PKey.from_path(self.host_key_path)
        return self._host_key

    def start(self) -> None:
        """Listen; returns once the port is bound."""
        if self._listener is not None:
            raise RuntimeError(f"{self!r} is already running")
        host_key = self.host_key
        listener = socket.create_server((self.host, self.port), backlog=16)
        listener.settimeout(_POLL_S)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._stop.clear()
        self._listener_thread = threading.Thread(
            target=self._serve,
            args=(listener, host_key),
            name=f"ssh-{self.target.name}",
            daemon=True,
        )
        self._listener_thread.start()
        log.info("ssh: %s listening on %s:%d", self.target.name, self.host, self.port)

    def stop(self) -> None:
        """Close the listener and every connection; wait for the threads."""
        self._stop.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            # Wakes the listener thread's accept() at once (closing alone does not: it
            # waited out its timeout, 0.1 s a node, one node after another: 30 s of a
            # 291-node lab's `lab down`).
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self.drop_connections()
        if self._listener_thread is not None:
            self._listener_thread.join(timeout=5)
            self._listener_thread = None
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)

    def drop_connections(self) -> None:
        """Close every established connection (what the node's death does to them)."""
        with self._lock:
            transports = list(self._transports)
        for transport in transports:
            transport.close()

    # -- listener ---------------------------------------------------------------------------

    def _is_on(self) -> bool:
        try:
            return self.target.power_state() is PowerState.ON
        except Exception:
            log.exception("ssh: %s: reading the power state failed", self.target.name)
            return False

    def _serve(self, listener: socket.socket, host_key: paramiko.PKey) -> None:
        was_on = self._is_on()
        while not self._stop.is_set():
            is_on = self._is_on()
            if was_on and not is_on:
                self.drop_connections()
            was_on = is_on
            try:
                conn, peer = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                raise
            if not self._is_on():
                _reset(conn)
                continue
            thread = threading.Thread(
                target=self._connection,
                args=(conn, host_key),
                name=f"ssh-{self.target.name}-{peer[1]}",
                daemon=True,
            )
            with self._lock:
                self._threads.add(thread)
            thread.start()

    # -- one connection ---------------------------------------------------------------------

    def _connection(self, conn: socket.socket, host_key: paramiko.PKey) -> None:
        requests: queue.Queue[_Exec] = queue.Queue()
        transport = paramiko.Transport(conn)
        transport.set_log_channel(TRANSPORT_LOGGER)
        try:
            transport.add_server_key(host_key)
            with self._lock:
                self._transports.add(transport)
            if self._stop.is_set():
                return
            try:
                transport.start_server(server=_Interface(self._authorized, requests))
            except (paramiko.SSHException, EOFError, OSError) as exc:
                log.debug("ssh: %s: handshake failed: %s", self.target.name, exc)
                return
            while transport.is_active() and not self._stop.is_set():
                try:
                    request = requests.get(timeout=_POLL_S)
                except queue.Empty:
                    continue
                # Channels are accepted only to keep paramiko's accept queue empty.
                while transport.accept(timeout=0) is not None:
                    pass
                self._run(transport, request)
        finally:
            transport.close()
            with self._lock:
                self._transports.discard(transport)
                self._threads.discard(threading.current_thread())

    def _run(self, transport: paramiko.Transport, request: _Exec) -> None:
        command = _normalise(request.command)
        channel = request.channel
        if not self._is_on():
            # Powered off behind this connection's back (through a BMC) and the listener
            # has not noticed yet: a dead machine runs nothing, its connections just die.
            self.drop_connections()
            return
        log.info("ssh: %s: exec %r", self.target.name, command)
        if command in _FORCED_OFF:
            # The machine dies at once: no exit status, every connection drops.
            self._power(lambda: self.target.power_off(graceful=False), "power off (forced)")
            self.drop_connections()
            return
        if command in _GRACEFUL_OFF or command in _REBOOT:
            self._finish(channel, 0)
            if command in _REBOOT:
                self._power(self.target.reset, "reboot")
            else:
                self._power(lambda: self.target.power_off(graceful=True), "power off (graceful)")
            self.drop_connections()
            return
        if isinstance(self.target, NodeAgent) and self._cut(channel, command):
            return
        if isinstance(self.target, StorageAgent) and self._storage(channel, request.command):
            return
        if command == "systemctl is-system-running":
            self._finish(channel, 0, stdout="running\n")
        elif command == "true":
            self._finish(channel, 0)
        else:
            self._finish(
                channel, 127, stderr=f"powercut-lab: {request.command}: command not found\n"
            )

    def _cut(self, channel: paramiko.Channel, command: str) -> bool:
        """Run a failure-kind command of the SSH driver; False if ``command`` is none."""
        agent = self.target
        assert isinstance(agent, NodeAgent)
        action: Callable[[], None] | None = None
        if m := _PARTITION.match(command):
            seconds = float(m.group(1))
            action = lambda: agent.partition(heal_after_s=seconds)  # noqa: E731
        elif command == _HEAL:
            action = agent.heal
        elif m := _KUBELET_STOP.match(command):
            seconds = float(m.group(1))
            action = lambda: agent.stop_kubelet(restart_after_s=seconds)  # noqa: E731
        elif command == _KUBELET_START:
            action = agent.start_kubelet
        if action is None:
            return False
        try:
            action()
        except (PowercutError, OSError) as exc:  # what the shell would print; the driver raises
            log.info("ssh: %s: %r failed: %s", self.target.name, command, exc)
            self._finish(channel, 1, stderr=f"powercut-lab: {exc}\n")
            return True
        self._finish(channel, 0)
        return True

    def _storage(self, channel: paramiko.Channel, raw: str) -> bool:
        """Run the SSH driver's storage cut or heal (the raw command: its quoted heal
        script is part of what is matched); False if ``raw`` is neither."""
        agent = self.target
        assert isinstance(agent, StorageAgent)
        action: Callable[[], None] | None = None
        cut = storage_cut.parse_cut_command(raw)
        if cut is not None:
            seconds = float(cut[0])
            action = lambda: agent.cut_storage(heal_after_s=seconds)  # noqa: E731
        elif _normalise(raw) == _STORAGE_HEAL:
            action = agent.heal_storage
        if action is None:
            return False
        try:
            action()
        except (PowercutError, OSError) as exc:  # what the shell would print
            log.info("ssh: %s: storage command failed: %s", self.target.name, exc)
            self._finish(channel, 1, stderr=f"powercut-lab: {exc}\n")
            return True
        self._finish(channel, 0)
        return True

    def _power(self, action: Callable[[], None], what: str) -> None:
        try:
            action()
        except Exception:
            log.exception("ssh: %s: %s failed", self.target.name, what)

    def _finish(
        self, channel: paramiko.Channel, status: int, stdout: str = "", stderr: str = ""
    ) -> None:
        """Send output and exit status, then let the client close the channel.

        The server does not close first: its close could overtake paramiko's reply to the
        exec request (sent by the transport thread), which clients report as a failure.
        A client that keeps the channel open longer than a grace period gets it closed.
        """
        try:
            if stdout:
                channel.sendall(stdout.encode())
            if stderr:
                channel.sendall_stderr(stderr.encode())
            channel.send_exit_status(status)
            channel.shutdown_write()
        except (OSError, EOFError, paramiko.SSHException):
            return
        deadline = time.monotonic() + _CLIENT_CLOSE_GRACE_S
        while not channel.closed and time.monotonic() < deadline:
            if self._stop.wait(_POLL_S / 4):
                break
        channel.close()


def _reset(conn: socket.socket) -> None:
    """Close a just-accepted connection with a TCP reset (SO_LINGER 0)."""
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


_PARTITION: Final = _seconds_pattern(driver.COMMAND_PARTITION)
_HEAL: Final = _normalise(driver.COMMAND_HEAL)
_KUBELET_STOP: Final = _seconds_pattern(driver.COMMAND_KUBELET_STOP)
_KUBELET_START: Final = _normalise(driver.COMMAND_KUBELET_START)
_STORAGE_HEAL: Final = _normalise(storage_cut.COMMAND_HEAL)
