"""A session's stop conditions: the inventory's SLOs and alerts watched while it runs.

When one breaches, the scenario stops: the main thread is sent :data:`STOP_SIGNAL`, so a
step blocked in a wait or a socket read raises :class:`StoppedByCondition` at once; a
session used from another thread raises it before its next disruption. The session's undos
then run, even with ``keep_on_failure``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Protocol

from harness.errors import PowercutError
from harness.inventory import Inventory
from harness.kube.names import Event
from harness.kube.timeline import Timeline
from harness.slo.watch import watcher_for

#: The signal a session sends its own main thread when a stop condition breached, so that a
#: step blocked in a wait or a socket read stops at once (a real signal interrupts both).
STOP_SIGNAL = signal.SIGUSR2


class StoppedByCondition(PowercutError):
    """A stop condition breached: the scenario was stopped and its disruptions undone.

    Neither a product failure nor a harness error: the run stopped because the inventory
    said to stop when this happened (``powercut run`` exits 5).
    """

    def __init__(self, condition: str, detail: str) -> None:
        self.condition = condition
        self.detail = detail
        super().__init__(f"stopped by {condition}: {detail}")


class Watcher(Protocol):
    def stop(self) -> None: ...


class StopConditions:
    """The stop conditions of one session: :meth:`watch` from its start, :meth:`stop_watching`
    at its end; ``stopped_by`` is the breach that stopped it, if one did."""

    def __init__(
        self, inventory: Inventory, timeline: Timeline, say: Callable[[str], None]
    ) -> None:
        self.inventory = inventory
        self.timeline = timeline
        self.say = say
        self.stopped_by: StoppedByCondition | None = None  # a stop condition breached
        self._raised = False
        self._armed = False
        self._watchers: list[Watcher] = []
        self._restore_signal: Callable[[], None] | None = None

    def watch(self) -> None:
        """Watch the inventory's stop conditions until :meth:`stop_watching`."""
        inv = self.inventory
        assert inv.prometheus is not None  # the inventory refuses stop conditions without
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(STOP_SIGNAL, self._on_signal)

            def restore() -> None:
                signal.signal(STOP_SIGNAL, previous)

            self._restore_signal = restore
        self._armed = True
        watcher = watcher_for(
            inv.prometheus,
            inv.stop_conditions,
            inv.slos,
            inv.alerts,
            self.request,
            say=self.say,
        )
        self._watchers.append(watcher.start())
        self.say(f"watching {len(inv.stop_conditions)} stop condition(s)")

    def request(self, condition: str, detail: str) -> None:
        """Stop the scenario: a stop condition breached (callable from any thread). The main
        thread raises :class:`StoppedByCondition` at once (blocked or not); a session used
        from another thread raises it before its next disruption. Its undos then run, even
        with ``keep_on_failure``."""
        if not self._armed or self.stopped_by is not None:
            return
        self.stopped_by = StoppedByCondition(condition, detail)
        self.timeline.action("stop-condition", Event.BREACHED, condition=condition, detail=detail)
        self.say(f"STOP: {self.stopped_by}; undoing the scenario's disruptions")
        if self._restore_signal is not None:
            signal.pthread_kill(threading.main_thread().ident or 0, STOP_SIGNAL)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.check()

    def check(self) -> None:
        """Raise :class:`StoppedByCondition` (once) if a stop condition breached."""
        if self._armed and self.stopped_by is not None and not self._raised:
            self._raised = True
            raise self.stopped_by

    def stop_watching(self) -> None:
        self._armed = False  # from here on a breach is no longer raised
        for watcher in self._watchers:
            watcher.stop()
        self._watchers.clear()
        if self._restore_signal is not None:
            self._restore_signal()
            self._restore_signal = None
