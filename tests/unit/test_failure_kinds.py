"""Failure kinds beyond power: the enum, and how a driver says what it can do."""

from __future__ import annotations

import pytest

from harness.failures import REGISTRY, FailureKind, strategy, supported_kinds, supports
from harness.failures.base import registered
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
