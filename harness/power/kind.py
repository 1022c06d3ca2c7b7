"""Power of a kind node: its Docker container (the ``kind`` power driver).

A kind node is a container running systemd, containerd and a kubelet, so the container's
life is the node's power:

- ``off()`` (forced): ``docker kill`` (SIGKILL to the node's init, as a power cut: nothing
  inside gets to shut down). Docker also suspends the container's restart policy until it
  is started again, so the node stays off.
- ``off(graceful=True)``: ``docker stop --time N``: kind's stop signal makes systemd shut
  the node down (an ACPI-style shutdown), SIGKILL after ``N`` seconds.
- ``on()``: ``docker start``. ``cycle()``: off (forced), then on.
- ``partition()``: ``docker pause`` freezes every process of the node (the cgroup freezer):
  its kubelet stops renewing its lease and answering, its pods stop serving, but the
  container keeps its network identity, as a node cut off by a network partition.
  ``heal()``: ``docker unpause``.

States: a running container is ON; a created, exited or dead one is OFF; a paused one is
UNKNOWN (frozen: neither running nor off), and ``on()`` thaws it, so a journaled
``power_on`` undo (``powercut recover``) also heals a partition. Restarting or
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
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, Self, TypeVar, runtime_checkable

from harness.errors import ConfigError, PermanentError, TemporaryError
from harness.inventory import NodeSpec, PowerSpec
from harness.power._wait import SYSTEM_CLOCK, Clock, Deadline, retry, wait_until
from harness.power.base import PowerState

__all__ = ["KindDriver", "SupportsPartition"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: ``docker inspect`` format: the container status and whether it is paused.
INSPECT_FORMAT: Final = "{{.State.Status}} {{.State.Paused}}"
#: Options a kind node may set under ``power.extra``.
EXTRA_OPTIONS: Final = frozenset({"docker", "stop_timeout_s", "timeout_s", "poll_s"})

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

    def partition(self, node: str | None = None, *, heal_after_s: float | None = None) -> None: ...

    def heal(self, node: str | None = None) -> None: ...

    def partitioned(self) -> bool: ...


class KindDriver:
    """Power control of kind node ``node`` through its Docker container ``container``."""

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

    @classmethod
    def from_inventory(cls, node: NodeSpec, spec: PowerSpec, **options: Any) -> Self:
        """The driver for ``node`` (entry point ``powercut.power_drivers``: ``kind``)."""
        unknown = sorted(set(spec.extra) - EXTRA_OPTIONS)
        if unknown:
            raise ConfigError(
                f"node {node.name}: unknown power.extra option(s) for driver kind: "
                f"{', '.join(unknown)}; valid: {', '.join(sorted(EXTRA_OPTIONS))}",
                field="power.extra",
            )
        settings: dict[str, Any] = {}
        for key, value in spec.extra.items():
            if key == "docker":
                if not isinstance(value, str) or not value.strip():
                    raise ConfigError(
                        f"node {node.name}: power.extra.docker must be the name or path of "
                        f"the docker CLI, got {value!r}",
                        field="power.extra.docker",
                    )
                settings[key] = value.strip()
            elif isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(
                    f"node {node.name}: power.extra.{key} must be a number of seconds, "
                    f"got {value!r}",
                    field=f"power.extra.{key}",
                )
            else:
                settings[key] = int(value) if key == "stop_timeout_s" else float(value)
        settings.update(options)
        return cls(node.name, spec.endpoint or node.name, **settings)

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
                self._command(("stop", "--time", str(self.stop_timeout_s)), deadline)
            else:
                self._command(("kill", "--signal", "KILL"), deadline)
            self._wait_for(PowerState.OFF, "stop" if graceful else "kill", deadline)

    def on(self) -> None:
        with self._lock:
            deadline = self._deadline()
            status, paused = self._call("report its state", self._inspect, deadline)
            if paused:
                self._command(("unpause",), deadline)
                self._wait_for(PowerState.ON, "unpause", deadline)
                return
            if _power_state(status, paused) is PowerState.ON:
                return
            self._command(("start",), deadline)
            self._wait_for(PowerState.ON, "start", deadline)

    def cycle(self) -> None:
        with self._lock:
            self.off()
            self.on()

    def close(self) -> None:
        """Nothing to close: every call is one CLI run."""

    # -- partitions ---------------------------------------------------------------------

    def _own(self, node: str | None) -> None:
        if node is not None and node != self.node:
            raise PermanentError(f"{self._where}: asked to cut node {node!r}, not this one")

    def partition(self, node: str | None = None, *, heal_after_s: float | None = None) -> None:
        """Freeze the node (``docker pause``); it must be running. ``node`` and
        ``heal_after_s`` are those of :class:`harness.power.base.SupportsPartition`: a paused
        container cannot arm its own heal, so the journal's heal undo (``powercut recover``)
        is what heals it if powercut dies."""
        self._own(node)
        with self._lock:
            deadline = self._deadline()
            status, paused = self._call("report its state", self._inspect, deadline)
            if paused:
                return
            current = _power_state(status, paused)
            if current is not PowerState.ON:
                raise PermanentError(
                    f"{self._where} is {current.value}; only a running node can be partitioned"
                )
            self._command(("pause",), deadline)
            wait_until(
                self._paused,
                lambda paused: paused,
                expected=f"{self._where} paused",
                deadline=deadline,
                poll_s=self.poll_s,
                describe=lambda _paused: "not paused",
            )

    def heal(self, node: str | None = None) -> None:
        """Thaw a partitioned node (``docker unpause``); a no-op when it is not paused."""
        self._own(node)
        with self._lock:
            deadline = self._deadline()
            if not self._call("report its state", self._paused, deadline):
                return
            self._command(("unpause",), deadline)
            self._wait_for(PowerState.ON, "unpause", deadline)

    def partitioned(self) -> bool:
        with self._lock:
            return self._call("report its state", self._paused, self._deadline())

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
