"""Targets by count, fraction, range, name, role, rack and label, drawn from a seed."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from harness.errors import ConfigError
from harness.scenario.errors import NoTargets
from harness.scenario.targets.select import Amount, parse_names, select_nodes
from tests.unit.test_longevity_groups import inventory


@pytest.mark.parametrize(
    ("text", "count", "fraction", "span"),
    [
        ("zero", 0, None, None),
        ("one", 1, None, None),
        ("Two", 2, None, None),
        ("3", 3, None, None),
        ("one-third", None, Fraction(1, 3), None),
        ("one third", None, Fraction(1, 3), None),
        ("one-half", None, Fraction(1, 2), None),
        ("two-thirds", None, Fraction(2, 3), None),
        ("all", None, Fraction(1), None),
        ("1/3", None, Fraction(1, 3), None),
        ("50%", None, Fraction(1, 2), None),
        ("1-2", None, None, (1, 2)),
        ("one-two", None, None, (1, 2)),
    ],
)
def test_amounts_in_words_digits_fractions_and_ranges(
    text: str, count: int | None, fraction: Fraction | None, span: tuple[int, int] | None
) -> None:
    a = Amount.parse(text)
    assert (a.count, a.fraction) == (count, fraction)
    assert (a.low, a.high) == (span or (None, None))


@pytest.mark.parametrize("text", ["several", "3/2", "2-1", "150%", "four-thirds", ""])
def test_a_bad_amount_says_what_is_valid(text: str) -> None:
    with pytest.raises(ConfigError, match="one-third"):
        Amount.parse(text)


def test_fractions_round_up_and_ranges_draw_from_the_seed() -> None:
    rng = random.Random(7)
    assert Amount.parse("one-third").resolve(9, rng) == 3
    assert Amount.parse("one-third").resolve(4, rng) == 2
    assert Amount.parse("zero").resolve(4, rng) == 0
    draws = {Amount.parse("1-3").resolve(9, random.Random(s)) for s in range(50)}
    assert draws == {1, 2, 3}
    with pytest.raises(NoTargets, match="asks for 5, but only 4 fit"):
        Amount.parse("five").resolve(4, rng)


def test_workers_by_fraction_spread_over_racks_and_replay_from_the_seed() -> None:
    inv = inventory({"a": 3, "b": 3, "c": 3})
    pick = select_nodes(
        inv, amount=Amount.parse("one-third"), rng=random.Random(42), seed=42, role="worker"
    )
    assert len(pick.nodes) == 3
    assert {n.split("-")[1][0] for n in pick.nodes} == {"a", "b", "c"}  # one per rack
    again = select_nodes(
        inv, amount=Amount.parse("one-third"), rng=random.Random(42), seed=42, role="worker"
    )
    assert again == pick
    assert "3 (one-third) of 9 nodes (role worker)" in pick.why
    assert "seed 42" in pick.describe()
    others = {
        select_nodes(inv, amount=Amount.parse("one"), rng=random.Random(s), role="worker").nodes
        for s in range(30)
    }
    assert len(others) > 3  # the seed matters


def test_by_name_rack_label_and_readiness() -> None:
    inv = inventory({"a": 2, "b": 2})
    rng = random.Random(1)
    named = select_nodes(inv, amount=Amount.parse("all"), rng=rng, names=["w-a1", "w-b2"])
    assert named.nodes == ("w-a1", "w-b2")
    rack = select_nodes(inv, amount=Amount.parse("all"), rng=rng, rack="b", role="worker")
    assert rack.nodes == ("w-b1", "w-b2")
    labelled = select_nodes(
        inv,
        amount=Amount.parse("all"),
        rng=rng,
        label_selector="disk=ssd",
        labelled=lambda sel: {"w-a2", "cp-1"} if sel == "disk=ssd" else set(),
    )
    assert labelled.nodes == ("cp-1", "w-a2")
    ready = select_nodes(
        inv, amount=Amount.parse("all"), rng=rng, role="worker", usable=lambda n: n != "w-a1"
    )
    assert "w-a1" not in ready.nodes and "not Ready or cordoned now: w-a1" in ready.why
    with pytest.raises(ConfigError, match="no node named w-z9"):
        select_nodes(inv, amount=Amount.parse("all"), rng=rng, names=["w-z9"])
    with pytest.raises(ConfigError, match="unknown rack 'q'"):
        select_nodes(inv, amount=Amount.parse("one"), rng=rng, rack="q")
    with pytest.raises(NoTargets, match="asks for 3, but only 2 fit"):
        select_nodes(inv, amount=Amount.parse("three"), rng=rng, rack="a", role="worker")


def test_names_in_a_sentence() -> None:
    assert parse_names('"w-a1", w-b1 and w-c1') == ["w-a1", "w-b1", "w-c1"]
