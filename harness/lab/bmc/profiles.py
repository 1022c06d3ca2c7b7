"""Vendor profiles of the lab's Redfish BMC: how each vendor's service behaves, as data.

A :class:`RedfishProfile` says what a vendor's Redfish service advertises and how it
answers: the ``ResetType@Redfish.AllowableValues`` of a ComputerSystem, the status of an
accepted reset (204, 200 with a body, or 202 with a Task), whether it has a SessionService
and how many sessions it allows, how long ``PowerState`` takes to show a change and what
it shows meanwhile (PoweringOn / PoweringOff or the old state), and whether it throttles
(503 or 429 with ``Retry-After``). ``harness.lab.bmc.vendor`` plays a profile in front of
sushy-tools' emulator. What each profile models, and from which public source, is in
docs/bmc.md; values no public source gave are marked *assumed* there and below.

Delays are short (seconds) so that tests stay fast: the driver's handling of 10-60 s
read-backs is proven on a fake clock (tests/unit/test_redfish_vendor_driver.py), the lab shows
that the same code paths work over HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

#: What the lab can act on: anything else a profile advertises is answered without effect
#: (Nmi), or mapped (ForceOn -> On, PushPowerButton -> toggles).
ACTING: Final = (
    "On",
    "ForceOff",
    "GracefulShutdown",
    "ForceRestart",
    "GracefulRestart",
    "PowerCycle",
)
#: ResetTypes a profile may advertise beyond :data:`ACTING`.
EXTRA: Final = ("ForceOn", "Nmi", "PushPowerButton")


@dataclass(frozen=True)
class RedfishProfile:
    """One vendor's Redfish behaviour (see the module docstring and docs/bmc.md)."""

    name: str
    vendor: str  # ServiceRoot ``Vendor``
    product: str  # ServiceRoot ``Product``
    reset_types: tuple[str, ...]
    #: The answer to an accepted reset: 204 No Content, 200 with a body, 202 with a Task.
    reset_status: Literal[200, 202, 204] = 204
    #: How long a Task of a 202 answer runs (TaskState Running, then Completed).
    task_s: float = 0.0
    #: How long PowerState takes to show a change after a reset was accepted.
    readback_s: float = 0.0
    #: What PowerState shows during ``readback_s``: PoweringOn/PoweringOff, else the old state.
    transitions: bool = False
    #: Sessions the SessionService allows at once; None: no SessionService (basic auth only).
    max_sessions: int | None = None
    #: The status of a session request beyond ``max_sessions``.
    session_cap_status: int = 503
    #: Every n-th request (0: none) is answered ``throttle_status`` with ``Retry-After``.
    throttle_every: int = 0
    throttle_status: Literal[429, 503] = 503
    retry_after_s: int = 1
    #: Whether the node's OS acts on GracefulShutdown (False: accepted, never carried out).
    graceful_honoured: bool = True
    sources: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        unknown = set(self.reset_types) - set(ACTING) - set(EXTRA)
        if unknown:
            raise ValueError(
                f"profile {self.name}: unknown ResetTypes {sorted(unknown)}; "
                f"valid: {', '.join(ACTING + EXTRA)}"
            )

    @property
    def has_sessions(self) -> bool:
        return self.max_sessions is not None


PROFILES: Final[dict[str, RedfishProfile]] = {
    p.name: p
    for p in (
        RedfishProfile(
            "bmcweb",
            vendor="OpenBMC",
            product="bmcweb",
            # bmcweb's ComputerSystem.Reset (redfish-core/lib/systems.hpp).
            reset_types=(
                "On",
                "ForceOff",
                "ForceOn",
                "ForceRestart",
                "GracefulRestart",
                "GracefulShutdown",
                "PowerCycle",
                "Nmi",
            ),
            reset_status=202,
            task_s=0.5,
            readback_s=0.8,
            transitions=True,  # host state TransitioningToRunning/Off -> PoweringOn/Off
            max_sessions=64,  # assumed
            sources=(
                "openbmc/openbmc-test-automation lib/bmc_redfish_utils.robot",
                "openbmc/docs designs/state-management-and-external-interfaces.md",
            ),
        ),
        RedfishProfile(
            "idrac",
            vendor="Dell",
            product="Integrated Dell Remote Access Controller",
            reset_types=(
                "On",
                "ForceOff",
                "ForceRestart",
                "GracefulRestart",
                "GracefulShutdown",
                "PushPowerButton",
                "Nmi",
                "PowerCycle",
            ),
            reset_status=204,
            readback_s=0.8,
            max_sessions=8,  # assumed: iDRAC caps concurrent sessions; 8 is modelled
            session_cap_status=400,
            sources=(
                "dellemc.openmanage redfish_powerstate module (ResetTypes)",
                "dellemc.openmanage idrac_session module; Dell iDRAC session cmdlets",
            ),
        ),
        RedfishProfile(
            "ilo",
            vendor="HPE",
            product="ProLiant (iLO 5)",
            # No PowerCycle: a power cycle is ForceOff then On.
            reset_types=(
                "On",
                "ForceOff",
                "GracefulShutdown",
                "ForceRestart",
                "Nmi",
                "PushPowerButton",
                "GracefulRestart",
            ),
            reset_status=200,
            readback_s=1.2,
            max_sessions=10,  # assumed
            sources=(
                "HewlettPackard/ilo-rest-api-docs iLO 5 resource definitions",
                "HPE iLO 7 ComputerSystem resource definitions",
            ),
        ),
        RedfishProfile(
            "xcc",
            vendor="Lenovo",
            product="ThinkSystem (XClarity Controller)",
            reset_types=(
                "On",
                "Nmi",
                "GracefulShutdown",
                "GracefulRestart",
                "ForceOn",
                "ForceOff",
                "ForceRestart",
                "PowerCycle",
            ),
            reset_status=204,
            readback_s=0.5,
            transitions=True,
            max_sessions=16,  # assumed
            throttle_every=4,  # assumed: a busy XCC answers 503 with Retry-After
            throttle_status=503,
            retry_after_s=1,
            sources=("lenovo/python-redfish-lenovo examples (reset_server.py)",),
        ),
        RedfishProfile(
            "supermicro",
            vendor="Supermicro",
            product="X12/H12 BMC",
            reset_types=(
                "On",
                "ForceOff",
                "GracefulShutdown",
                "GracefulRestart",
                "ForceRestart",
                "Nmi",
                "ForceOn",
            ),
            reset_status=200,
            readback_s=0.5,
            max_sessions=16,  # Supermicro Redfish reference guide: "up to 16 sessions"
            throttle_every=5,  # assumed
            throttle_status=429,
            retry_after_s=1,
            sources=(
                "Supermicro Redfish reference guide, Using RESTful APIs (sessions)",
                "a Supermicro AllowableValues listing (gist flaviotorres/6e09c16d)",
            ),
        ),
    )
}


def profile(name: str) -> RedfishProfile:
    """The profile called ``name``; a ``ValueError`` naming the valid names otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"unknown Redfish profile {name!r}; valid: {', '.join(PROFILES)}"
        ) from None
