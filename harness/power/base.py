"""The power-driver protocol, its enums, and the optional failure-kind capabilities
(partition, kubelet stop, storage-network cut) a driver may offer beyond power."""

from __future__ import annotations

import enum
from typing import Protocol, runtime_checkable

from harness.errors import PermanentError, WaitTimeout
from harness.inventory.storage import StorageEndpoint


class PowerState(enum.StrEnum):
    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"


class ResetType(enum.StrEnum):
    """What a caller may ask a BMC to do (names follow Redfish's ResetType)."""

    ON = "On"
    FORCE_OFF = "ForceOff"
    GRACEFUL_SHUTDOWN = "GracefulShutdown"
    FORCE_RESTART = "ForceRestart"
    GRACEFUL_RESTART = "GracefulRestart"
    POWER_CYCLE = "PowerCycle"


class GracefulIgnored(WaitTimeout):
    """``node`` was asked to shut down gracefully, its BMC took the request, and the node
    was still not off when the budget ran out: its OS did not act on the request (no ACPI
    handling, a shutdown that hangs). A fact about the node, not an error of the harness;
    a forced power-off still works."""

    def __init__(self, node: str, request: str, *, last_seen: str, waited_s: float) -> None:
        self.node = node
        self.request = request
        super().__init__(
            expected=(
                f"{node} to power off after {request} (the BMC accepted it; the node "
                "ignored it: its OS did not shut down)"
            ),
            last_seen=last_seen,
            waited_s=waited_s,
        )


@runtime_checkable
class PowerDriver(Protocol):
    """Power control of one node.

    Every call returns once the BMC acknowledged the request *and* the new state was read
    back, or raises: ``PermanentError`` (bad credentials, unsupported request) at once,
    ``WaitTimeout`` when the state did not change before the deadline.
    """

    node: str

    def state(self) -> PowerState: ...

    def off(self, *, graceful: bool = False) -> None: ...

    def on(self) -> None: ...

    def cycle(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class SupportsPartition(Protocol):
    """A driver that can cut its node off the network while it keeps running.

    ``partition`` arms the heal first, on the node itself where it can (so the node never
    stays cut off if powercut dies), then cuts: the node heals by itself after
    ``heal_after_s``. ``heal`` heals now and is idempotent (a healed node stays healed).
    ``node`` is the driver's own node (a driver is one per node; the name is checked).
    """

    def partition(self, node: str, *, heal_after_s: float) -> None: ...

    def heal(self, node: str) -> None: ...


@runtime_checkable
class SupportsKubeletStop(Protocol):
    """A driver that can stop its node's kubelet (containers keep running).

    ``stop_kubelet`` arms the restart first (on the node where it can), then stops it: the
    kubelet starts again by itself after ``restart_after_s``. ``start_kubelet`` starts it
    now and is idempotent.
    """

    def stop_kubelet(self, node: str, *, restart_after_s: float) -> None: ...

    def start_kubelet(self, node: str) -> None: ...


@runtime_checkable
class SupportsStorageCut(Protocol):
    """A driver that can cut its node off its storage network while everything else on it
    goes on (:mod:`harness.power.storage_cut` builds the firewall rules).

    ``cut_storage`` arms the heal first (on the node itself where it can), then drops the
    node's traffic to and from ``endpoints``: the node heals by itself after
    ``heal_after_s``. ``heal_storage`` heals now and is idempotent (a node not cut, or
    off, is left as it is).
    """

    def cut_storage(
        self, node: str, endpoints: list[StorageEndpoint], *, heal_after_s: float
    ) -> None: ...

    def heal_storage(self, node: str) -> None: ...


@runtime_checkable
class SupportsFailureKinds(Protocol):
    """A driver that says which failure kinds it can do, by their names (``"partition"``);
    the failure kinds ask it first (:func:`harness.failures.supports`)."""

    def supports(self, kind: str) -> bool: ...


class UnsupportedFailure(PermanentError):
    """``node``'s driver cannot fail it with ``kind`` (a failure kind's name): a scenario
    that needs it skips. ``supported``: the kinds that driver can do."""

    def __init__(self, node: str, kind: str, *, driver: str, supported: list[str]) -> None:
        self.node = node
        self.kind = kind
        self.driver = driver
        self.supported = supported
        can = ", ".join(supported) or "none"
        super().__init__(f"{node}: its {driver} driver cannot do a {kind} failure (it can: {can})")


class PreparedPower(Protocol):
    """A power request made ready to send: connection, authentication and the system's
    discovery done, the current state read. For a synchronized cut (a PDU failing takes a
    rack at once): every node is prepared first, then every request is fired together."""

    def fire(self) -> None:
        """Send the request; return once the BMC acknowledged it (HTTP 2xx, IPMI
        completion code 0), without waiting for the new state."""
        ...

    def confirm(self) -> None:
        """Return once the BMC reports the requested state (or raise ``WaitTimeout``)."""
        ...


@runtime_checkable
class PreparesPower(Protocol):
    """A driver that can prepare a power-off ahead of sending it (ipmi and redfish)."""

    def prepare_off(self, *, graceful: bool = False) -> PreparedPower: ...


@runtime_checkable
class PreparesPowerOn(Protocol):
    """A driver that can prepare a power-on ahead of sending it (ipmi and redfish): the
    second half of a synchronized power cycle."""

    def prepare_on(self) -> PreparedPower: ...


class NothingToDo:
    """A prepared request for a node already in the requested state: sends nothing."""

    def fire(self) -> None:
        return None

    def confirm(self) -> None:
        return None


class Unprepared:
    """A driver that cannot prepare (SSH, plugins): its whole ``off()`` runs at the firing,
    so its acknowledgement includes the read-back, as before."""

    def __init__(self, driver: PowerDriver, graceful: bool) -> None:
        self.driver = driver
        self.graceful = graceful

    def fire(self) -> None:
        self.driver.off(graceful=self.graceful)

    def confirm(self) -> None:
        return None


def prepare_off(driver: PowerDriver, *, graceful: bool = False) -> PreparedPower:
    """The driver's prepared power-off, or one that runs ``off()`` when fired."""
    if isinstance(driver, PreparesPower):
        return driver.prepare_off(graceful=graceful)
    return Unprepared(driver, graceful)


class UnpreparedOn:
    """A driver that cannot prepare a power-on: its whole ``on()`` runs at the firing."""

    def __init__(self, driver: PowerDriver) -> None:
        self.driver = driver

    def fire(self) -> None:
        self.driver.on()

    def confirm(self) -> None:
        return None


def prepare_on(driver: PowerDriver) -> PreparedPower:
    """The driver's prepared power-on, or one that runs ``on()`` when fired."""
    if isinstance(driver, PreparesPowerOn):
        return driver.prepare_on()
    return UnpreparedOn(driver)
