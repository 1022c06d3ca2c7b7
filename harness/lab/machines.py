"""The lab's machines as their BMCs and their OS see them: power on and off (forced or
graceful, a boot time before the processes start), read-back, reset, and the cuts a node's SSH
server is asked for (off the network, kubelet stopped), each undone by a timer armed first.

:class:`NodeMachines` is the part of the lab supervisor's :class:`~harness.lab.supervisor.Lab`
that the BMCs act on; the supervisor owns the processes, the state file and start-up.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from harness.errors import PowercutError
from harness.lab.boot import Cancel, Schedule
from harness.lab.procs import Proc
from harness.lab.resync import Resync
from harness.lab.spec import LabSpec
from harness.lab.storage import StorageController
from harness.power.base import PowerState

log = logging.getLogger("powercut.lab")


def _log_failure(done: Future[None]) -> None:
    """A power change's follow-up that nobody waits for: its failure is logged, not lost."""
    exc = done.exception()
    if exc is not None:
        log.error("after a power change: %s", exc, exc_info=exc)


class LabError(PowercutError):
    pass


class Boot:
    """One power-on's boot in progress; ``armed`` cancels its timer."""

    def __init__(self) -> None:
        self.armed: Cancel | None = None

    def cancel(self) -> None:
        if self.armed is not None:
            self.armed()


class NodeMachines:
    """Power and cuts of the lab's nodes; the state it works on is the Lab's (declared here)."""

    spec: LabSpec
    kwok: dict[str, Proc]
    cp_procs: dict[str, list[Proc]]
    power: dict[str, bool]
    cut: dict[str, tuple[str, threading.Timer]]
    storage_cut: dict[str, threading.Timer]
    power_lock: threading.RLock
    _node_locks: dict[str, threading.RLock]
    _stopping: set[str]
    _booting: dict[str, Boot]
    _after: ThreadPoolExecutor
    _pending: dict[str, Future[None]]
    _schedule: Schedule
    resync: Resync | None
    storage: StorageController | None

    def progress(self, msg: str) -> None:
        raise NotImplementedError  # the Lab's

    def write_state(self, status: str, **extra: Any) -> None:
        raise NotImplementedError  # the Lab's

    # -- power (what the BMCs act on) -------------------------------------------------------

    def is_on(self, node: str) -> bool:
        with self.power_lock:
            return self.power.get(node, False)

    def reporting(self, node: str) -> bool:
        """On, booted, and its kubelet (kwok) reports: not cut off the network, kubelet
        running."""
        with self.power_lock:
            return (
                self.power.get(node, False) and node not in self.cut and node not in self._booting
            )

    def booting(self, node: str) -> bool:
        """Powered on, its processes not started yet (POST and boot)."""
        with self.power_lock:
            return node in self._booting

    def os_state(self, node: str) -> PowerState:
        """What the node's own OS answers (its SSH server): up once booted, down while it
        shuts down."""
        with self.power_lock:
            up = self.power.get(node, False) and node not in self._booting
        return PowerState.ON if up else PowerState.OFF

    def power_state(self, node: str) -> PowerState:
        """What the node's BMCs read: on until its processes are stopped."""
        with self.power_lock:
            on = self.power.get(node, False) or node in self._stopping
        return PowerState.ON if on else PowerState.OFF

    def power_off(self, node: str, *, graceful: bool) -> None:
        """Cut the node's power, and return as soon as it is cut, as a BMC answers.

        Forced: every process of the node gets SIGKILL at once (none of them runs another
        instruction). Graceful: they stop in order (SIGTERM, SIGKILL after 10 s), as an OS
        shuts down after a BMC accepted the request. Either way the node reads on until
        every process has exited (a killed process keeps its listening sockets open until
        then, and a connection could still be accepted), so a read-back of "off" means
        nothing of the node answers. Waiting for the exits, the state file and the progress
        log are left to a thread of their own: a BMC request used to wait for them, each
        node's for a different time (the exit was polled at 1, 2, 4 ... 50 ms), and the
        IPMI BMCs, which answer one request at a time, for every earlier node's too."""
        with self._node_locks[node]:
            with self.power_lock:
                if not self.power[node]:
                    return
                self._forget_cut(node)
                self._forget_storage_cut(node)  # the firewall rules die with the kernel
                # Not to run from here on (keep_alive, which holds power_lock for its whole
                # pass, no longer restarts what is stopped next).
                self.power[node] = False
                boot = self._booting.pop(node, None)
                if boot is not None:  # off while booting: its processes never start
                    boot.cancel()
                self._stopping.add(node)  # reads on until its processes have exited
            procs = [self.kwok[node], *reversed(self.cp_procs.get(node, []))]
            if not graceful:
                for proc in procs:
                    proc.kill()
            self._pending[node] = self._after.submit(self._reap, node, procs, graceful)

    def _reap(self, node: str, procs: list[Proc], graceful: bool) -> None:
        try:
            for proc in procs:
                proc.stop(force=not graceful, timeout_s=10)
        finally:
            with self.power_lock:
                self._stopping.discard(node)
        self.progress(f"power off {node} ({'graceful' if graceful else 'forced'})")
        self.write_state("ready")

    def _settle(self, node: str) -> None:
        """Wait for the node's last power-off to have reaped its processes (a process being
        killed still reads alive, and ``Proc.start`` would leave it be)."""
        pending = self._pending.pop(node, None)
        if pending is not None:
            try:
                pending.result()
            except Exception:  # logged; the power-on goes ahead
                log.exception("stopping %s's processes failed", node)

    def power_on(self, node: str) -> None:
        """Turn the node on and return: it reads on from then on. Its processes start after
        its boot time (``LabSpec.boot_s``; at once with 0), then the kubelet resync, the
        state file and the progress log follow on another thread."""
        boot_s = self.spec.boot_s(node)
        with self._node_locks[node]:
            self._settle(node)
            with self.power_lock:
                if self.power[node]:
                    return
                self._forget_cut(node)
                self._forget_storage_cut(node)
                if boot_s > 0:
                    # On (its BMCs read On, as a server's during POST), booting: keep_alive
                    # leaves it alone, its kubelet reports nothing.
                    self.power[node] = True
                    boot = Boot()
                    self._booting[node] = boot
                    boot.armed = self._schedule(boot_s, lambda: self._booted(node, boot))
            if boot_s > 0:
                self.progress(f"power on {node}: booting for {boot_s:g}s")
                self._after.submit(self.write_state, "ready").add_done_callback(_log_failure)
                return
            # Started while the node still reads off, so keep_alive leaves them alone.
            self._start_node(node)
            with self.power_lock:
                self.power[node] = True
            self._after.submit(self._powered_on, node).add_done_callback(_log_failure)

    def _start_node(self, node: str) -> None:
        for proc in [*self.cp_procs.get(node, []), self.kwok[node]]:
            proc.start()

    def _booted(self, node: str, boot: Boot) -> None:
        """The boot timer of ``node`` fired: start its processes, unless it was powered off
        (or off and on again: another boot) meanwhile."""
        with self._node_locks[node]:
            with self.power_lock:
                if self._booting.get(node) is not boot:
                    return
            # Started while still booting, so keep_alive leaves them alone.
            try:
                self._start_node(node)
            finally:
                with self.power_lock:
                    self._booting.pop(node, None)
        try:
            self._after.submit(self._powered_on, node, "booted").add_done_callback(_log_failure)
        except RuntimeError:  # the lab is stopping
            log.info("%s booted while the lab stops", node)

    def _powered_on(self, node: str, what: str = "power on") -> None:
        """Nothing waits for this one: a failure is logged by :func:`_log_failure`."""
        if self.resync:
            self.resync.powered_on(node)
        self.progress(f"{what} {node}")
        self.write_state("ready")

    # -- partition and kubelet stop (what the node's SSH server is asked to do) -------------

    def cut_off(self, node: str, kind: str, *, undo_after_s: float) -> None:
        """The node stays on (its BMC reads On) but stops reporting: its kwok process (the
        kubelet's stand-in) stops, as when the node is cut off the network or its kubelet
        stops; its pods keep "running". The undo is armed first: after ``undo_after_s`` the
        node reports again by itself."""
        with self._node_locks[node]:
            with self.power_lock:
                if not self.power[node]:
                    raise LabError(f"{node} is off: nothing to cut")
                if node in self._booting:
                    raise LabError(f"{node} is booting: its kubelet does not run yet")
                if node in self.cut:
                    raise LabError(f"{node} is already cut ({self.cut[node][0]})")
                timer = threading.Timer(undo_after_s, self.reconnect, args=(node, kind))
                timer.daemon = True
                self.cut[node] = (kind, timer)
                timer.start()
            self.kwok[node].stop(force=True, timeout_s=10)
            self.progress(f"{kind} {node} (undone in {undo_after_s:g}s at the latest)")
        self.write_state("ready")

    def reconnect(self, node: str, kind: str) -> None:
        """Undo a cut of ``kind`` (idempotent: a node not cut that way is left alone)."""
        with self._node_locks[node]:
            with self.power_lock:
                if self.cut.get(node, ("", None))[0] != kind:
                    return
                self._forget_cut(node)
                on = self.power[node] and node not in self._booting  # booting: starts later
            if on:
                self.kwok[node].start()
                if self.resync:
                    self.resync.powered_on(node)
            self.progress(f"{kind} of {node} undone")
        self.write_state("ready")

    def _forget_cut(self, node: str) -> None:
        found = self.cut.pop(node, None)
        if found is not None:
            found[1].cancel()

    # -- storage-network cut (harness/power/storage_cut.py over the node's SSH server) ------

    def storage_reachable(self, node: str) -> bool:
        """Whether the node reaches its storage (not cut off it by a storage cut)."""
        with self.power_lock:
            return node not in self.storage_cut

    def cut_storage(self, node: str, *, undo_after_s: float) -> None:
        """The node stays on and its kubelet (kwok) keeps reporting, but its path to the
        storage is gone: the lab's storage controller marks its pods' volumes failed
        (their I/O hangs, so their readiness drops, as a kubelet's probes would see) and
        mounts nothing new there. The heal is armed first: after ``undo_after_s`` the node
        reaches its storage again by itself."""
        with self._node_locks[node]:
            with self.power_lock:
                if not self.power[node] or node in self._booting:
                    raise LabError(f"{node} is not running: nothing to cut")
                self._forget_storage_cut(node)  # iptables -N fails on a second cut: re-arm
                timer = threading.Timer(undo_after_s, self.heal_storage, args=(node,))
                timer.daemon = True
                self.storage_cut[node] = timer
                timer.start()
            self.progress(f"storage cut {node} (healed in {undo_after_s:g}s at the latest)")
        if self.storage is not None:
            self.storage.nudge()
        self.write_state("ready")

    def heal_storage(self, node: str) -> None:
        """Give the node its storage network back (idempotent)."""
        with self._node_locks[node]:
            with self.power_lock:
                if node not in self.storage_cut:
                    return
                self._forget_storage_cut(node)
            self.progress(f"storage cut of {node} healed")
        if self.storage is not None:
            self.storage.nudge()
        self.write_state("ready")

    def _forget_storage_cut(self, node: str) -> None:
        timer = self.storage_cut.pop(node, None)
        if timer is not None:
            timer.cancel()

    def reset(self, node: str) -> None:
        with self._node_locks[node]:
            self.power_off(node, graceful=False)
            self.power_on(node)
