"""What a lab BMC acts on: the power of one node.

The Redfish, IPMI and SSH servers of this package translate protocol requests into calls on
a ``PowerTarget``. The lab supervisor provides targets that stop and start a node's
processes; tests use ``MemoryTarget``.

Calls may come from several server threads at once (one HTTP request thread per Redfish
request, the IPMI loop thread, one thread per SSH connection), so implementations must be
thread-safe. They should also be quick (well under a second): the IPMI servers of a process
share one loop thread, and a slow call delays every IPMI answer in the process.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Final, NamedTuple, Protocol, runtime_checkable

from harness.power.base import PowerState

_NODE_UUID_NAMESPACE: Final = uuid.UUID("6f1f3a52-5c6e-4a53-9a7e-2a4f7f1f6b10")


def system_uuid(node: str) -> str:
    """The stable Redfish system Id/UUID of a lab node (its inventory's ``system_id``)."""
    return str(uuid.uuid5(_NODE_UUID_NAMESPACE, node))


@runtime_checkable
class PowerTarget(Protocol):
    """The power switch of one node, as its BMC sees it."""

    name: str

    def power_state(self) -> PowerState: ...

    def power_on(self) -> None:
        """Turn the node on; nothing happens if it is on already."""
        ...

    def power_off(self, graceful: bool) -> None:
        """Turn the node off (``graceful``: as the OS would on ACPI shutdown); no-op if off."""
        ...

    def reset(self) -> None:
        """Power off, then on again (from off, this simply turns the node on)."""
        ...


@runtime_checkable
class NodeAgent(Protocol):
    """What a node's own operating system can do to it besides power (reached over SSH):
    cut it off the network, stop its kubelet. Each arms its undo first."""

    name: str

    def partition(self, *, heal_after_s: float) -> None: ...

    def heal(self) -> None: ...

    def stop_kubelet(self, *, restart_after_s: float) -> None: ...

    def start_kubelet(self) -> None: ...


@runtime_checkable
class StorageAgent(Protocol):
    """What a node's own operating system does to its storage path (reached over SSH): cut
    it off the storage network (the heal armed first), heal it now."""

    name: str

    def cut_storage(self, *, heal_after_s: float) -> None: ...

    def heal_storage(self) -> None: ...


class CallbackTarget:
    """A ``PowerTarget`` made of callables, to wire a BMC to whatever owns a node's power.

    Example (the lab supervisor)::

        CallbackTarget(
            name,
            state=lambda: lab.power_state(name),
            on=lambda: lab.power_on(name),
            off=lambda graceful: lab.power_off(name, graceful=graceful),
            reset=lambda: lab.reset(name),
        )

    Without ``reset``, a reset is a forced power-off followed by a power-on.
    """

    def __init__(
        self,
        name: str,
        *,
        state: Callable[[], PowerState],
        on: Callable[[], None],
        off: Callable[[bool], None],
        reset: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._state = state
        self._on = on
        self._off = off
        self._reset = reset

    def __repr__(self) -> str:
        return f"CallbackTarget({self.name!r})"

    def power_state(self) -> PowerState:
        return self._state()

    def power_on(self) -> None:
        self._on()

    def power_off(self, graceful: bool) -> None:
        self._off(graceful)

    def reset(self) -> None:
        if self._reset is not None:
            self._reset()
        else:
            self._off(False)
            self._on()


class PowerCall(NamedTuple):
    """One call a ``MemoryTarget`` received: ``action`` is on, off or reset."""

    action: str
    graceful: bool | None = None

    def __str__(self) -> str:
        if self.graceful is None:
            return self.action
        return f"{self.action}({'graceful' if self.graceful else 'forced'})"


class MemoryTarget:
    """A thread-safe in-memory ``PowerTarget`` that records every call it receives.

    ``fail_with`` makes the next calls raise (to test how servers report a failing node);
    ``on_change`` is called with the new state after every transition, outside the lock.
    """

    def __init__(
        self,
        name: str,
        state: PowerState = PowerState.ON,
        *,
        on_change: Callable[[PowerState], None] | None = None,
    ) -> None:
        if state is PowerState.UNKNOWN:
            raise ValueError("a MemoryTarget starts ON or OFF")
        self.name = name
        self.fail_with: Exception | None = None
        self._state: PowerState = state
        self._calls: list[PowerCall] = []
        self._transitions = 0
        self._lock = threading.Lock()
        self._on_change = on_change

    def __repr__(self) -> str:
        return f"MemoryTarget({self.name!r}, state={self.power_state().value})"

    # -- PowerTarget --------------------------------------------------------------------

    def power_state(self) -> PowerState:
        with self._lock:
            return self._state

    def power_on(self) -> None:
        self._apply(PowerCall("on"), [PowerState.ON])

    def power_off(self, graceful: bool) -> None:
        self._apply(PowerCall("off", graceful), [PowerState.OFF])

    def reset(self) -> None:
        self._apply(PowerCall("reset"), [PowerState.OFF, PowerState.ON])

    # -- inspection ---------------------------------------------------------------------

    def calls(self) -> list[PowerCall]:
        """A copy of the calls received so far, oldest first."""
        with self._lock:
            return list(self._calls)

    def clear_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    @property
    def transitions(self) -> int:
        """How many times the state changed (a reset from on counts two)."""
        with self._lock:
            return self._transitions

    def set_state(self, state: PowerState) -> None:
        """Force a state without recording a call (what a test does behind the BMC's back)."""
        if state is PowerState.UNKNOWN:
            raise ValueError("a MemoryTarget is ON or OFF")
        self._apply(None, [state])

    # -- internals ----------------------------------------------------------------------

    def _apply(self, call: PowerCall | None, states: list[PowerState]) -> None:
        changes: list[PowerState] = []
        with self._lock:
            if call is not None:
                self._calls.append(call)
                if self.fail_with is not None:
                    raise self.fail_with
            for state in states:
                if state is not self._state:
                    self._state = state
                    self._transitions += 1
                    changes.append(state)
        if self._on_change is not None:
            for state in changes:
                self._on_change(state)
