"""The power-driver protocol and its enums."""

from __future__ import annotations

import enum
from typing import Protocol, runtime_checkable


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
