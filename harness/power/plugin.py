"""The base of a power-driver plugin: what a ``powercut.power_drivers`` entry point names.

A driver package ships a plugin object and registers it::

    # powercut_acme/driver.py
    class AcmeOptions(DriverOptions):
        outlet_delay_s: Seconds = 2.0

    class AcmePlugin(DriverPlugin[AcmeOptions]):
        options = AcmeOptions
        fields = frozenset({"endpoint", "username", "password"})

        def check(self, spec: PowerSpec) -> None:
            self.require(spec, "endpoint", "username", "password")

        def make(self, node, spec, options, timeout_s):
            return AcmeDriver(node.name, spec.endpoint, spec.username,
                              self.password(node, spec), delay_s=options.outlet_delay_s)

    PLUGIN = AcmePlugin()

    # pyproject.toml
    [project.entry-points."powercut.power_drivers"]
    acme-pdu = "powercut_acme.driver:PLUGIN"

The inventory then accepts ``driver: acme-pdu`` and checks its ``extra`` against
``AcmeOptions`` when the file loads; ``powercut power status`` and every scenario build the
driver through :func:`harness.power.factory.driver_for`. The built-in drivers
(:mod:`harness.power.builtin`) are plugins of the same kind, registered the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict

from harness.budgets import Budgets
from harness.driver_registry import FieldError
from harness.errors import ConfigError
from harness.inventory import NodeSpec, PowerSpec
from harness.power.base import PowerDriver

__all__ = [
    "Command",
    "DriverOptions",
    "DriverPlugin",
    "FieldError",
    "Seconds",
    "WholeSeconds",
    "power_timeout_s",
]


def _seconds(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError("must be a positive number of seconds")
    return float(value)


def _whole_seconds(value: object) -> object:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError("must be a positive whole number")
    return value


def _command(value: object) -> object:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a command line")
    return value.strip()


#: A positive number of seconds (``timeout_s: 30``).
Seconds = Annotated[float, BeforeValidator(_seconds)]
#: A positive whole number of seconds.
WholeSeconds = Annotated[int, BeforeValidator(_whole_seconds)]
#: A shell command line run on the node (stripped, not empty).
Command = Annotated[str, BeforeValidator(_command)]


class DriverOptions(BaseModel):
    """The base of a driver's options model: unknown keys are refused, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def power_timeout_s(budgets: Budgets) -> float:
    """The deadline of one power action: the BMC acknowledges, then reports the new state."""
    return budgets.power_ack + budgets.power_state_verify


OptionsT = TypeVar("OptionsT", bound=DriverOptions)


class DriverPlugin(Generic[OptionsT]):
    """A power driver as the inventory and the factory see it.

    Set ``options`` (the model of ``power.extra``) and ``fields`` (which of
    :data:`harness.driver_registry.COMMON_FIELDS` the driver reads), override ``check`` for
    rules on those fields and ``make`` to build the driver.
    """

    options: type[OptionsT]
    fields: frozenset[str] = frozenset()
    #: Whether the driver takes the budgets' power deadline as ``timeout_s`` (the built-in
    #: BMC drivers do; a driver with its own documented deadline does not).
    budget_timeout: ClassVar[bool] = False

    def check(self, spec: PowerSpec) -> None:
        """Refuse a power block the driver cannot use; raise :class:`FieldError`."""

    def make(
        self, node: NodeSpec, spec: PowerSpec, options: OptionsT, settings: dict[str, Any]
    ) -> Any:
        """The driver; ``settings`` are the options given in ``extra`` (converted), over the
        budget deadline, under the caller's overrides: pass them on as keyword arguments."""
        raise NotImplementedError(f"{type(self).__name__}.make")

    # -- what the factory calls ----------------------------------------------------------

    def build(
        self,
        node: NodeSpec,
        spec: PowerSpec,
        options: BaseModel,
        *,
        budgets: Budgets | None,
        overrides: Mapping[str, Any],
    ) -> PowerDriver:
        if not isinstance(options, self.options):
            raise ConfigError(
                f"node {node.name}: power driver {spec.driver} got options of type "
                f"{type(options).__name__}, expected {self.options.__name__}"
            )
        settings: dict[str, Any] = {}
        if budgets is not None and self.budget_timeout:
            settings["timeout_s"] = power_timeout_s(budgets)
        settings.update(options.model_dump(exclude_unset=True))
        settings.update(overrides)
        driver = self.make(node, spec, options, settings)
        if not isinstance(driver, PowerDriver):
            raise ConfigError(
                f"power driver {spec.driver}: {type(self).__name__}.make returned "
                f"{type(driver).__name__}, not a PowerDriver (state, off, on, cycle, close)"
            )
        return driver

    # -- helpers for check and make ------------------------------------------------------

    @staticmethod
    def require(spec: PowerSpec, *names: str) -> None:
        """Each of ``names`` must be set (``password``: one of its three sources)."""
        for name in names:
            if name == "password":
                if not (spec.password_env or spec.password_file or spec.password is not None):
                    raise FieldError(
                        ("password_env",),
                        f"driver {spec.driver} needs a password: set password_env (an "
                        "environment variable) or password_file",
                    )
            elif not getattr(spec, name):
                raise FieldError((name,), f"is required for driver {spec.driver}")

    @staticmethod
    def password(node: NodeSpec, spec: PowerSpec) -> str:
        """The password, read from its environment variable or file now (never logged)."""
        secret = spec.secret
        if secret is None:
            raise ConfigError(
                f"node {node.name}: power driver {spec.driver} has no password source"
            )
        return secret.reveal()
