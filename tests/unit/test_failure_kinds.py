"""Failure kinds beyond power: the enum, and how a driver says what it can do."""

from __future__ import annotations

from typing import Any

import pytest

from harness.failures import REGISTRY, FailureKind, strategy, supported_kinds, supports
from harness.failures.base import Infliction, registered
from harness.kube.names import BACK_AT, DOWN_FROM
from harness.power.base import PowerState, UnsupportedFailure


class PowerOnly:
    node = "w1"

    def state(self) -> PowerState:
        return PowerState.ON

    def off(self, *, graceful: bool = False) -> None: ...

    def on(self) -> None: ...

    def cycle(self) -> None: ...

    def close(self) -> None: ...


class Partitions(PowerOnly):
    def partition(self, node: str, *, heal_after_s: float) -> None: ...

    def heal(self, node: str) -> None: ...


class SaysSo(PowerOnly):
    def supports(self, kind: str) -> bool:
        return kind == FailureKind.KUBELET_STOP


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("power", FailureKind.POWER_OFF),
        ("POWER_OFF", FailureKind.POWER_OFF),
        ("graceful", FailureKind.GRACEFUL),
        ("reboot", FailureKind.REBOOT),
        (" Partition ", FailureKind.PARTITION),
        ("kubelet", FailureKind.KUBELET_STOP),
        ("kubelet-stop", FailureKind.KUBELET_STOP),
    ],
)
def test_a_kind_parses_from_its_value_or_name(text: str, kind: FailureKind) -> None:
    assert FailureKind.parse(text) is kind


def test_an_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown failure kind 'flood'; valid: power, graceful"):
        FailureKind.parse("flood")


def test_what_a_driver_supports_follows_its_methods_unless_it_says() -> None:
    assert supported_kinds(PowerOnly()) == [
        FailureKind.POWER_OFF,
        FailureKind.GRACEFUL,
        FailureKind.REBOOT,
    ]
    assert supports(Partitions(), strategy(FailureKind.PARTITION))
    assert not supports(Partitions(), strategy(FailureKind.KUBELET_STOP))
    assert supported_kinds(SaysSo()) == [FailureKind.KUBELET_STOP]
    assert not supports(object(), strategy(FailureKind.POWER_OFF))


def test_an_unsupported_kind_names_the_node_the_driver_and_what_it_can_do() -> None:
    err = UnsupportedFailure(
        "w1", FailureKind.PARTITION, driver="PowerOnly", supported=supported_kinds(PowerOnly())
    )
    assert str(err) == (
        "w1: its PowerOnly driver cannot do a partition failure (it can: power, graceful, reboot)"
    )
    assert err.kind == FailureKind.PARTITION


def test_every_kind_has_its_strategy_registered_under_its_name() -> None:
    assert set(REGISTRY) == set(FailureKind)
    for kind, failure in REGISTRY.items():
        assert failure.name == kind.value
    assert list(registered()) == [k.value for k in FailureKind]


def test_where_each_kind_is_down_and_back_is_what_the_timeline_reads() -> None:
    """names.downs (the reports, longevity) reads DOWN_FROM and BACK_AT: every kind's own
    transitions are there, and nothing else is."""
    down = {t for f in REGISTRY.values() for t in f.down_at}
    back = {t for f in REGISTRY.values() for t in f.back_at}
    assert down == set(DOWN_FROM)
    assert back == set(BACK_AT)


def test_a_graceful_shutdown_the_node_ignores_is_a_failed_expectation_not_a_broken_run() -> None:
    import types

    from harness.checks.base import CheckFailed
    from harness.failures.graceful import GracefulShutdown
    from harness.power.base import GracefulIgnored

    calls: list[tuple[list[str], bool]] = []

    def power_off(nodes: list[str], *, graceful: bool, protocol: str | None) -> Any:
        calls.append((nodes, graceful))
        raise GracefulIgnored(
            "w-a1",
            "Redfish ResetType GracefulShutdown",
            last_seen="PowerState On",
            waited_s=60.0,
        )

    session = types.SimpleNamespace(power_off=power_off)
    with pytest.raises(CheckFailed) as caught:
        GracefulShutdown().inflict(session, ["w-a1"], Infliction())  # type: ignore[arg-type]

    assert calls == [(["w-a1"], True)]
    assert isinstance(caught.value, AssertionError)  # pytest and Allure: failed, not broken
    assert caught.value.check == "graceful shutdown"
    assert "w-a1 to shut down after its BMC accepted Redfish ResetType GracefulShutdown" in str(
        caught.value
    )
    assert "the node ignored it: PowerState On" in str(caught.value)
    assert isinstance(caught.value.__cause__, GracefulIgnored)
