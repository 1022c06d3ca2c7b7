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
