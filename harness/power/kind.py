"""Power of a kind node: its Docker container (the ``kind`` power driver).

A kind node is a container running systemd, containerd and a kubelet, so the container's
life is the node's power:

- ``off()`` (forced): ``docker kill`` (SIGKILL to the node's init, as a power cut: nothing
  inside gets to shut down). Docker also suspends the container's restart policy until it
  is started again, so the node stays off.
- ``off(graceful=True)``: ``systemctl poweroff`` inside the node, which goes through logind,
  so the kubelet's graceful node shutdown (its delay inhibitor) terminates the pods before
  systemd stops everything; if the node is not off within ``N`` seconds, ``docker stop
  --time N`` (kind's stop signal makes systemd halt at once, bypassing logind), then
  SIGKILL. A plain ``docker stop`` would skip the kubelet's shutdown manager. The node's
  restart policy is set to ``no`` first (kind's ``on-failure:1`` would start a node that
  powered itself off again); ``on()`` sets kind's policy back.
- ``on()``: ``docker start``. ``cycle()``: off (forced), then on.
- ``partition(node, heal_after_s=...)``: the node keeps running, its pods too, but it is cut
  off the kind network: inside the node container, an iptables chain drops every packet
  to and from the other nodes (kind's Docker network, less its gateway). The heal is armed
  first on the node itself, as a transient systemd timer (``systemd-run --on-active``), so
  the node heals by itself after ``heal_after_s`` even if powercut dies. ``heal(node)``
  removes the chain and the timer now. A power-off heals too (the rules live in the
  container's network namespace).
- ``stop_kubelet(node, restart_after_s=...)``: ``systemctl stop kubelet`` inside the node
  (kind's kubelet unit has ``KillMode=process``: the containers keep running), with its
  restart armed first as a transient timer; ``start_kubelet(node)`` starts it now.
- ``cut_storage(node, endpoints, heal_after_s=...)``: the node keeps running and
  reporting, but an iptables chain in its network namespace drops its traffic to and from
  the storage endpoints only (:mod:`harness.power.storage_cut`; on ``kind up --storage csi`` the
  storage server on the kind network), the heal armed first as a transient timer;
  ``heal_storage(node)`` removes it now.
- ``freeze()`` / ``thaw()``: ``docker pause`` / ``unpause`` (the cgroup freezer: kubelet and
  pods freeze, the container keeps its network identity).

States: a running container is ON; a created, exited or dead one is OFF; a paused one is
UNKNOWN (frozen: neither running nor off). ``on()`` leaves a node fully up: it thaws a
frozen node, heals a partition and a storage cut and starts a stopped kubelet, so a
journaled ``power_on`` undo (``powercut recover``) also undoes those. Restarting or
being-removed containers are UNKNOWN while they change.

Every call reads the state back before it returns, within ``timeout_s`` (monotonic clock).
Errors: a container that does not exist, a docker CLI that is missing, an engine that
cannot be reached or refuses the request are ``PermanentError`` at once; a container that
is busy changing state ("is restarting", "already in progress") and a CLI call that hangs
are ``TemporaryError`` and retried until the deadline.

The driver runs the ``docker`` CLI (or a compatible one such as ``podman``, option
``docker``) with an argument list, never through a shell.

Inventory::

    power:
      driver: kind
      endpoint: powercut-worker2   # the container; default: the node name (kind's naming)
      extra:                       # all optional
        docker: docker             # the CLI to run
        stop_timeout_s: 30         # graceful off: seconds before SIGKILL
        timeout_s: 60              # deadline of one power call
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from typing import Final, Protocol, TypeVar, runtime_checkable

from harness.errors import ConfigError, PermanentError, TemporaryError, WaitTimeout
from harness.power import storage_cut
from harness.power._wait import SYSTEM_CLOCK, Clock, Deadline, retry, wait_until
from harness.power.base import PowerState
from harness.power.storage_cut import StorageEndpoint

__all__ = ["KindDriver", "SupportsPartition"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: ``docker inspect`` format: the container status and whether it is paused.
INSPECT_FORMAT: Final = "{{.State.Status}} {{.State.Paused}}"

_STATES: Final[Mapping[str, PowerState]] = {
    "running": PowerState.ON,
    "created": PowerState.OFF,
    "exited": PowerState.OFF,
    "dead": PowerState.OFF,
}
_NOT_FOUND: Final = ("no such container", "no such object")
_UNREACHABLE: Final = (
    "cannot connect to the docker daemon",
    "error during connect",
    "permission denied while trying to connect",
    "is the docker daemon running",
)
_BUSY: Final = ("is restarting", "already in progress", "is being removed")


@runtime_checkable
class SupportsPartition(Protocol):
    """A driver that can cut a node off without powering it off."""

    node: str

    def partition(self, node: str | None = None, *, heal_after_s: float = ...) -> None: ...

    def heal(self, node: str | None = None) -> None: ...

    def partitioned(self) -> bool: ...


#: A partition or a kubelet stop whose caller names no deadline heals by itself after this.
DEFAULT_HEAL_S: Final = 300.0
SUPPORTED_KINDS: Final = frozenset(
    {"power", "graceful", "reboot", "partition", "kubelet", storage_cut.KIND}
)
_CHAINS: Final = {
    "INPUT": "POWERCUT-CUT-IN",
    "OUTPUT": "POWERCUT-CUT-OUT",
    "FORWARD": "POWERCUT-CUT-FWD",
}
# No shell variables: systemd-run's command line goes through systemd's own $ expansion.
_HEAL_BODY: Final = (
    "; ".join(
        f"while iptables -w -D {hook} -j {chain} 2>/dev/null; do :; done; "
        f"iptables -w -F {chain} 2>/dev/null; iptables -w -X {chain} 2>/dev/null"
        for hook, chain in _CHAINS.items()
    )
    + "; true"
)
_IN, _OUT, _FWD = _CHAINS["INPUT"], _CHAINS["OUTPUT"], _CHAINS["FORWARD"]
#: Scripts run in the node with ``docker exec NODE /bin/sh -c SCRIPT OP ARGS``; the first
#: line names the operation. Each arms its undo on the node before it acts. The cut drops
#: every packet in or out of eth0 (kind's network) but the gateway's (the host).
PARTITION_SCRIPT: Final = f"""# powercut:partition
set -eu
systemctl stop powercut-heal.timer 2>/dev/null || true
systemctl reset-failed powercut-heal.timer powercut-heal.service 2>/dev/null || true
systemd-run --quiet --unit powercut-heal --on-active="$1s" \\
  --timer-property=AccuracySec=100ms --timer-property=RemainAfterElapse=no \\
  /bin/sh -c '{_HEAL_BODY}'
gw=$(ip -4 route show default | awk '{{print $3; exit}}')
for c in {_IN} {_OUT} {_FWD}; do iptables -w -N $c 2>/dev/null || iptables -w -F $c; done
iptables -w -A {_IN} -s "$gw" -j RETURN
iptables -w -A {_IN} -i eth0 -j DROP
iptables -w -A {_OUT} -d "$gw" -j RETURN
iptables -w -A {_OUT} -o eth0 -j DROP
iptables -w -A {_FWD} -s "$gw" -j RETURN
iptables -w -A {_FWD} -d "$gw" -j RETURN
iptables -w -A {_FWD} -i eth0 -j DROP
iptables -w -A {_FWD} -o eth0 -j DROP
iptables -w -C INPUT -j {_IN} 2>/dev/null || iptables -w -I INPUT 1 -j {_IN}
iptables -w -C FORWARD -j {_FWD} 2>/dev/null || iptables -w -I FORWARD 1 -j {_FWD}
iptables -w -C OUTPUT -j {_OUT} 2>/dev/null || iptables -w -I OUTPUT 1 -j {_OUT}
"""
HEAL_SCRIPT: Final = f"""# powercut:heal
systemctl stop powercut-heal.timer 2>/dev/null || true
{_HEAL_BODY}
"""
PARTITION_STATE: Final = f"""# powercut:partition-state
if iptables -w -C OUTPUT -j {_OUT} 2>/dev/null; then echo cut; else echo open; fi
"""
STOP_KUBELET_SCRIPT: Final = """# powercut:stop-kubelet
set -eu
systemctl stop powercut-start-kubelet.timer 2>/dev/null || true
systemctl reset-failed powercut-start-kubelet.timer powercut-start-kubelet.service \\
  2>/dev/null || true
systemd-run --quiet --unit powercut-start-kubelet --on-active="$1s" \\
  --timer-property=AccuracySec=100ms --timer-property=RemainAfterElapse=no \\
  /bin/systemctl start kubelet.service
systemctl stop kubelet.service
"""
START_KUBELET_SCRIPT: Final = """# powercut:start-kubelet
systemctl stop powercut-start-kubelet.timer 2>/dev/null || true
systemctl start kubelet.service
"""
#: The restart policy kind gives every node container (pkg/cluster/internal/providers/docker).
KIND_RESTART_POLICY: Final = "on-failure:1"
POWEROFF_SCRIPT: Final = """# powercut:poweroff
systemctl poweroff --no-block 2>/dev/null || kill -s RTMIN+3 1
"""
KUBELET_STATE: Final = """# powercut:kubelet-state
systemctl is-active kubelet.service || true
"""
STORAGE_HEAL_SCRIPT: Final = f"""# powercut:storage-heal
{storage_cut.COMMAND_HEAL}
"""
STORAGE_STATE: Final = f"""# powercut:storage-state
{storage_cut.COMMAND_STATE}
"""


class KindDriver:
    """Power control of kind node ``node`` through its Docker container ``container``."""

    #: ``on()`` of a running node heals its partition and starts its kubelet (recovery).
    on_restores_running: Final = True

    def __init__(
        self,
        node: str,
        container: str | None = None,
        *,
        docker: str = "docker",
        stop_timeout_s: int = 30,
        timeout_s: float = 60,
        poll_s: float = 0.25,
        call_timeout_s: float = 30,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if stop_timeout_s < 0:
            raise ConfigError(f"{node}: stop_timeout_s must be >= 0, got {stop_timeout_s}")
        if timeout_s <= 0 or poll_s <= 0 or call_timeout_s <= 0:
            raise ConfigError(f"{node}: timeout_s, poll_s and call_timeout_s must be positive")
        self.node = node
        self.container = container or node
        self.docker = docker
        self.stop_timeout_s = stop_timeout_s
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.call_timeout_s = call_timeout_s
        self._clock = clock
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return (
            f"KindDriver(node={self.node!r}, container={self.container!r}, docker={self.docker!r})"
        )

    @property
    def _where(self) -> str:
        return f"{self.node}: container {self.container}"

    # -- PowerDriver --------------------------------------------------------------------

    def state(self) -> PowerState:
        with self._lock:
            return self._call("report its state", self._read_state, self._deadline())

    def off(self, *, graceful: bool = False) -> None:
        with self._lock:
            deadline = self._deadline()
            status, paused = self._call("report its state", self._inspect, deadline)
            if _power_state(status, paused) is PowerState.OFF:
                return
            if paused:
                # A frozen container cannot shut down; thaw it first (it still never serves:
                # the stop or kill follows at once).
                self._command(("unpause",), deadline)
                self._wait_for(PowerState.ON, "unpause", deadline)
            if graceful:
                self._graceful_off(deadline)
                return
            self._command(("kill", "--signal", "KILL"), deadline)
            self._wait_for(PowerState.OFF, "kill", deadline)

    def _graceful_off(self, deadline: Deadline) -> None:
        """``systemctl poweroff`` in the node: through logind, so the kubelet's graceful
        node shutdown (a delay inhibitor) stops the pods first; ``docker stop`` if the node
        is not off within ``stop_timeout_s``."""
        # A poweroff from inside is an exit to Docker, which kind's restart policy
        # (on-failure:1) answers by starting the node again: off means off.
        self._command(("update", "--restart", "no"), deadline)
        try:
            self._run("exec", self.container, "/bin/sh", "-c", POWEROFF_SCRIPT, "poweroff")
        except PermanentError as exc:  # the node may go down under the exec
            log.info("%s: poweroff exec ended: %s", self._where, exc)
        log.info("%s: systemctl poweroff sent", self._where)
        grace = Deadline(min(self.stop_timeout_s, max(deadline.remaining(), 0.0)), self._clock)
        try:
            self._wait_for(PowerState.OFF, "systemctl poweroff", grace)
        except WaitTimeout:
            log.warning("%s: not off %ss after poweroff; docker stop", self._where, grace.timeout_s)
            self._command(("stop", "--time", str(self.stop_timeout_s)), deadline)
            self._wait_for(PowerState.OFF, "stop", deadline)

    def on(self) -> None:
        with self._lock:
            deadline = self._deadline()
            status, paused = self._call("report its state", self._inspect, deadline)
            if paused:
                self._command(("unpause",), deadline)
                self._wait_for(PowerState.ON, "unpause", deadline)
                return
            if _power_state(status, paused) is PowerState.ON:
                # Running: undo what a partition or a kubelet stop left (a no-op otherwise).
                if self._exec(PARTITION_STATE, deadline=deadline).strip() == "cut":
                    self._exec(HEAL_SCRIPT, deadline=deadline)
                    self._wait_exec(PARTITION_STATE, "open", "reconnected", deadline)
                if self._exec(STORAGE_STATE, deadline=deadline).strip() == "cut":
                    self._exec(STORAGE_HEAL_SCRIPT, deadline=deadline)
                    self._wait_exec(STORAGE_STATE, "open", "storage reachable", deadline)
                if self._exec(KUBELET_STATE, deadline=deadline).strip() == "inactive":
                    self._exec(START_KUBELET_SCRIPT, deadline=deadline)
                    self._wait_exec(KUBELET_STATE, "active", "kubelet active", deadline)
                return
            self._command(("start",), deadline)
            self._wait_for(PowerState.ON, "start", deadline)
            # kind's restart policy back, if a graceful off set it aside
            self._command(("update", "--restart", KIND_RESTART_POLICY), deadline)

    def cycle(self) -> None:
        with self._lock:
            self.off()
            self.on()

    def close(self) -> None:
        """Nothing to close: every call is one CLI run."""

    # -- partitions, kubelet stops, freezing ----------------------------------------------

    def supports(self, kind: str) -> bool:
        """Every failure kind: power, graceful, reboot, partition, kubelet."""
        return str(getattr(kind, "value", kind)) in SUPPORTED_KINDS

    def partition(self, node: str | None = None, *, heal_after_s: float = DEFAULT_HEAL_S) -> None:
        """Cut the running node off the kind network (its pods keep running), the heal armed
        first on the node as a transient timer that fires after ``heal_after_s``."""
        self._check_node(node)
        self._check_positive("heal_after_s", heal_after_s)
        self._act_running(
            "be partitioned",
            (PARTITION_SCRIPT, f"{heal_after_s:.3f}"),
            (PARTITION_STATE, "cut", "partitioned"),
        )

    def heal(self, node: str | None = None) -> None:
        """Reconnect a partitioned node now and disarm its timer; a no-op when it is not cut
        off or not running (a power-off already healed it)."""
        self._check_node(node)
        self._undo_if_running(HEAL_SCRIPT, (PARTITION_STATE, "open", "reconnected"))

    def partitioned(self) -> bool:
        """True while the node runs cut off by ``partition``."""
        return self._reads_if_running(PARTITION_STATE, "cut")

    def cut_storage(
        self, node: str, endpoints: list[StorageEndpoint], *, heal_after_s: float
    ) -> None:
        """Drop the running node's traffic to and from the storage endpoints only (its
        kubelet and API traffic go on), the heal armed first on the node as a transient
        timer that fires after ``heal_after_s`` (:mod:`harness.power.storage_cut`)."""
        self._check_node(node)
        self._check_positive("heal_after_s", heal_after_s)
        script = (
            STORAGE_HEAL_SCRIPT.replace("# powercut:storage-heal", "# powercut:storage-cut")
            + storage_cut.cut_command(list(endpoints), max(1, math.ceil(heal_after_s)))
            + "\n"
        )
        self._act_running(
            "be cut off its storage", (script,), (STORAGE_STATE, "cut", "cut off its storage")
        )

    def heal_storage(self, node: str) -> None:
        """Give the node its storage network back now; a no-op when it is not cut or not
        running (a power-off healed it: the rules live in its network namespace)."""
        self._check_node(node)
        self._undo_if_running(STORAGE_HEAL_SCRIPT, (STORAGE_STATE, "open", "storage reachable"))

    def storage_cut(self) -> bool:
        """True while the node runs cut off its storage by ``cut_storage``."""
        return self._reads_if_running(STORAGE_STATE, "cut")

    def stop_kubelet(
        self, node: str | None = None, *, restart_after_s: float = DEFAULT_HEAL_S
    ) -> None:
        """Stop the node's kubelet (its containers keep running), its restart armed first on
        the node as a transient timer that fires after ``restart_after_s``."""
        self._check_node(node)
        self._check_positive("restart_after_s", restart_after_s)
        self._act_running(
            "have its kubelet stopped",
            (STOP_KUBELET_SCRIPT, f"{restart_after_s:.3f}"),
            (KUBELET_STATE, "inactive", "kubelet stopped"),
        )

    def start_kubelet(self, node: str | None = None) -> None:
        """Start the node's kubelet now and disarm its timer; a no-op if it runs."""
        self._check_node(node)
        self._act_running(
            "have its kubelet started",
            (START_KUBELET_SCRIPT,),
            (KUBELET_STATE, "active", "kubelet active"),
        )

    # The cut, heal and kubelet chains: one shape each, the script and its read-back apart.
    # ``until`` is (the state script, the state wanted, what that state is called).

    def _check_positive(self, name: str, value: float) -> None:
        if value <= 0:
            raise ConfigError(f"{self.node}: {name} must be positive, got {value}")

    def _act_running(self, what: str, script: tuple[str, ...], until: tuple[str, str, str]) -> None:
        """Run ``script`` (and its arguments) on the running node, then wait for ``until``;
        a node that is not running is refused (it cannot ``what``)."""
        with self._lock:
            deadline = self._deadline()
            self._require_running(what, deadline)
            self._exec(*script, deadline=deadline)
            self._wait_exec(*until, deadline)

    def _undo_if_running(self, script: str, until: tuple[str, str, str]) -> None:
        """Run ``script`` and wait for ``until`` if the node runs; a no-op otherwise."""
        with self._lock:
            deadline = self._deadline()
            if not self._running(deadline):
                return
            self._exec(script, deadline=deadline)
            self._wait_exec(*until, deadline)

    def _reads_if_running(self, state: str, want: str) -> bool:
        """True while the node runs and its ``state`` script reads ``want``."""
        with self._lock:
            deadline = self._deadline()
            if not self._running(deadline):
                return False
            return self._exec(state, deadline=deadline).strip() == want

    def _running(self, deadline: Deadline) -> bool:
        status, paused = self._call("report its state", self._inspect, deadline)
        return _power_state(status, paused) is PowerState.ON

    def kubelet_active(self) -> bool:
        with self._lock:
            return self._exec(KUBELET_STATE, deadline=self._deadline()).strip() == "active"

    def freeze(self) -> None:
        """Freeze the node (``docker pause``): kubelet and pods stop; it must be running."""
        with self._lock:
            deadline = self._deadline()
            if self._call("report its state", self._paused, deadline):
                return
            self._require_running("be frozen", deadline)
            self._command(("pause",), deadline)
            wait_until(
                self._paused,
                lambda paused: paused,
                expected=f"{self._where} paused",
                deadline=deadline,
                poll_s=self.poll_s,
                describe=lambda _paused: "not paused",
            )

    def thaw(self) -> None:
        """Thaw a frozen node (``docker unpause``); a no-op when it is not paused."""
        with self._lock:
            deadline = self._deadline()
            if not self._call("report its state", self._paused, deadline):
                return
            self._command(("unpause",), deadline)
            self._wait_for(PowerState.ON, "unpause", deadline)

    def _check_node(self, node: str | None) -> None:
        if node is not None and node != self.node:
            raise ConfigError(f"the kind driver of {self.node} was asked to act on {node}")

    def _require_running(self, what: str, deadline: Deadline) -> None:
        status, paused = self._call("report its state", self._inspect, deadline)
        current = _power_state(status, paused)
        if current is not PowerState.ON:
            raise PermanentError(
                f"{self._where} is {current.value}; only a running node can {what}"
            )

    def _exec(self, script: str, *args: str, deadline: Deadline) -> str:
        op = script.split("\n", 1)[0].removeprefix("# powercut:")
        return self._call(
            f"run {op}",
            lambda: self._run("exec", self.container, "/bin/sh", "-c", script, op, *args),
            deadline,
        )

    def _wait_exec(self, script: str, want: str, what: str, deadline: Deadline) -> None:
        wait_until(
            lambda: self._exec(script, deadline=deadline).strip(),
            lambda seen: seen == want,
            expected=f"{self._where} {what}",
            deadline=deadline,
            poll_s=self.poll_s,
            describe=lambda seen: f"saw {seen!r}",
        )

    # -- steps --------------------------------------------------------------------------

    def _deadline(self) -> Deadline:
        return Deadline(self.timeout_s, self._clock)

    def _call(self, what: str, operation: Callable[[], T], deadline: Deadline) -> T:
        return retry(
            operation,
            action=f"{self._where} to {what}",
            deadline=deadline,
            poll_s=self.poll_s,
        )

    def _command(self, args: tuple[str, ...], deadline: Deadline) -> None:
        self._call(f"accept `docker {args[0]}`", lambda: self._run(*args, self.container), deadline)
        log.info("%s: docker %s accepted", self._where, args[0])

    def _wait_for(self, want: PowerState, after: str, deadline: Deadline) -> None:
        wait_until(
            self._read_state,
            lambda seen: seen is want,
            expected=f"{self._where} {want.value} after `docker {after}`",
            deadline=deadline,
            poll_s=self.poll_s,
            describe=lambda seen: f"state {seen.value}",
        )

    def _inspect(self) -> tuple[str, bool]:
        out = self._run(
            "inspect", "--type", "container", "--format", INSPECT_FORMAT, self.container
        )
        words = out.split()
        if len(words) != 2 or words[1] not in ("true", "false"):
            raise PermanentError(
                f"{self._where}: unexpected answer from `docker inspect`: {out.strip()[:200]!r}"
            )
        return words[0], words[1] == "true" or words[0] == "paused"

    def _read_state(self) -> PowerState:
        return _power_state(*self._inspect())

    def _paused(self) -> bool:
        return self._inspect()[1]

    def _run(self, *args: str) -> str:
        """Run the docker CLI; its stdout, or the error type its stderr calls for."""
        exe = shutil.which(self.docker) if os.sep not in self.docker else self.docker
        if exe is None:
            raise ConfigError(
                f"{self.node}: the docker CLI {self.docker!r} is not on PATH; install it or "
                "set power.extra.docker",
                field="power.extra.docker",
            )
        try:
            proc = subprocess.run(
                [exe, *args],
                capture_output=True,
                text=True,
                timeout=self.call_timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise TemporaryError(
                f"{self._where}: `docker {args[0]}` gave no answer within {self.call_timeout_s:g}s"
            ) from None
        except OSError as exc:
            raise PermanentError(
                f"{self._where}: cannot run {exe}: {exc.strerror or type(exc).__name__}"
            ) from None
        if proc.returncode == 0:
            return proc.stdout
        message = _last_line(proc.stderr) or _last_line(proc.stdout) or f"exit {proc.returncode}"
        low = message.lower()
        if any(s in low for s in _NOT_FOUND):
            raise PermanentError(
                f"{self._where} does not exist ({message}); kind names node containers after "
                "the nodes: `docker ps -a --filter label=io.x-k8s.kind.cluster`"
            )
        if any(s in low for s in _UNREACHABLE):
            raise PermanentError(f"{self._where}: the Docker engine cannot be reached: {message}")
        if any(s in low for s in _BUSY):
            raise TemporaryError(f"{self._where}: `docker {args[0]}`: {message}")
        raise PermanentError(f"{self._where}: `docker {args[0]}` failed: {message}")


def _power_state(status: str, paused: bool) -> PowerState:
    return PowerState.UNKNOWN if paused else _STATES.get(status, PowerState.UNKNOWN)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
