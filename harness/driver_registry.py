"""The installed power drivers: the ``powercut.power_drivers`` entry points.

Every power driver, the built-in ones included, is an entry point of this group whose
object is a *plugin*: it names the driver's options model (a pydantic model of the node's
``power.extra`` mapping), which of the power block's common fields the driver reads, a
``check`` of those fields, and ``build``, which makes the driver. The inventory checks a
node's ``driver`` against the installed names and its options against the plugin when the
file loads, so a typo or a missing package is reported with the file, field and line, and
a driver built later never meets options it does not understand (sushy's OEM extensions
are found the same way)::

    [project.entry-points."powercut.power_drivers"]
    acme-pdu = "powercut_acme.driver:PLUGIN"

Subclass :class:`harness.power.plugin.DriverPlugin` to write one
(``examples/powercut-driver-example/``).

This module sits below the inventory: it knows plugins only by the protocol below and loads
them by name, never by importing :mod:`harness.power`.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from pydantic import BaseModel

from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.budgets import Budgets

__all__ = [
    "COMMON_FIELDS",
    "ENTRY_POINT_GROUP",
    "FieldError",
    "PowerDriverPlugin",
    "installed_drivers",
    "load_plugin",
    "unknown_driver_message",
]

ENTRY_POINT_GROUP: Final = "powercut.power_drivers"

#: The optional fields of an inventory's ``power`` block a driver may read; ``password``
#: stands for ``password_env`` / ``password_file`` / ``password``. A driver that does not
#: list a field refuses it ("does not apply to driver ssh"). ``driver`` and ``extra`` are
#: every driver's.
COMMON_FIELDS: Final = frozenset(
    {
        "endpoint", "username", "password", "verify_tls", "interface", "auth", "system_id",
        "cipher_suite", "privilege",
    }
)  # fmt: skip


class FieldError(ValueError):
    """A bad value in a node's ``power`` block, at ``subpath`` below it (``("endpoint",)``).

    A plugin's ``check`` raises it; the inventory reports it with the file, the full field
    (``nodes[2].power.endpoint``) and the line.
    """

    def __init__(self, subpath: tuple[str | int, ...] | str, message: str) -> None:
        super().__init__(message)
        self.subpath: tuple[str | int, ...] = (
            (subpath,) if isinstance(subpath, str) else tuple(subpath)
        )
        self.message = message


@runtime_checkable
class PowerDriverPlugin(Protocol):
    """What a ``powercut.power_drivers`` entry point names."""

    #: The model of ``power.extra``: its fields are the driver's options.
    options: type[BaseModel]
    #: Which of :data:`COMMON_FIELDS` the driver reads.
    fields: frozenset[str]

    # ``spec`` is a :class:`harness.inventory.PowerSpec` and ``node`` a ``NodeSpec``: this
    # module sits below the inventory, which imports it, so they are typed loosely here.
    def check(self, spec: Any) -> None:
        """Refuse a power block the driver cannot use (raise :class:`FieldError`)."""
        ...

    def build(
        self,
        node: Any,
        spec: Any,
        options: BaseModel,
        *,
        budgets: Budgets | None,
        overrides: Mapping[str, Any],
    ) -> Any:
        """The node's driver (a :class:`harness.power.base.PowerDriver`)."""
        ...


def _entry_points() -> Mapping[str, EntryPoint]:
    return _scan()


@functools.cache
def _scan() -> Mapping[str, EntryPoint]:
    """The group's entry points, read once per process (a scan of every installed
    distribution takes ~10 ms; an inventory of 100 nodes would ask hundreds of times)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return MappingProxyType(found)


def installed_drivers() -> list[str]:
    """The names of the installed power drivers, sorted."""
    return sorted(_entry_points())


def unknown_driver_message(name: str) -> str:
    """``'ipmii' is not an installed power driver (did you mean 'ipmi'?); installed: ...``."""
    names = installed_drivers()
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    if not names:
        return (
            f"{name!r} is not an installed power driver{hint}; none is installed (the "
            "powercut package's metadata is missing: reinstall it)"
        )
    return f"{name!r} is not an installed power driver{hint}; installed: {', '.join(names)}"


def load_plugin(name: str) -> PowerDriverPlugin:
    """The plugin of the installed driver ``name``.

    Raises ``ConfigError`` naming the driver and what is installed when it is not, or naming
    the entry point when it does not load or is not a plugin.
    """
    ep = _entry_points().get(name)
    if ep is None:
        raise ConfigError(unknown_driver_message(name))
    return _load(ep.name, ep.value)


@functools.cache
def _load(name: str, value: str) -> PowerDriverPlugin:
    ep = EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)
    try:
        obj = ep.load()
    except Exception as exc:  # noqa: BLE001 - any import failure of a third-party package
        raise ConfigError(
            f"power driver {name!r} ({value}) does not load: {type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(obj, PowerDriverPlugin) or not (
        isinstance(obj.options, type) and issubclass(obj.options, BaseModel)
    ):
        raise ConfigError(
            f"power driver {name!r} ({value}) is not a powercut driver plugin: it needs "
            "options (a pydantic model), fields, check() and build(); see "
            "harness.power.plugin.DriverPlugin"
        )
    return obj
