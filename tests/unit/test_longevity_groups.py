"""Failure groups: disjoint, spread across racks, checked against the blast radius."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.inventory import Inventory, parse_inventory
from harness.longevity.groups import (
    Group,
    auto_groups,
    group_for_cycle,
    load_groups,
    parse_fraction,
    rack_shares,
    validate_groups,
)
from harness.safety import SafetyViolation


def inventory(racks: dict[str, int], *, cps: int = 3, max_down: int = 6) -> Inventory:
    """Control planes spread over the racks, ``racks[r]`` workers in rack ``r``."""
    names = list(racks)
    nodes = []
    for i in range(cps):
        nodes.append(f"- {{name: cp-{i + 1}, role: control-plane, rack: {names[i % len(names)]}, "
                     "power: {driver: ssh}, ssh: {host: 127.0.0.1}}")  # fmt: skip
    for rack, count in racks.items():
        for w in range(count):
            nodes.append(f"- {{name: w-{rack}{w + 1}, role: worker, rack: {rack}, "
                         "power: {driver: ssh}, ssh: {host: 127.0.0.1}}")  # fmt: skip
    text = "cluster: {kubeconfig: /dev/null}\n"
    text += f"safety: {{max_nodes_down: {max_down}}}\nnodes:\n" + "\n".join(nodes) + "\n"
    return parse_inventory(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [("1/3", 1 / 3), ("0.5", 0.5), ("25%", 0.25), (1, 1.0), (" 2 / 4 ", 0.5)],
)
def test_fractions(text: str | float, value: float) -> None:
    assert parse_fraction(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0", "1/0", "3/2", "abc", "-0.1", "nan", "150%"])
def test_bad_fractions_say_what_is_valid(text: str) -> None:
    with pytest.raises(ConfigError, match=r"1/3, 0\.33, 33% or one-third"):
        parse_fraction(text)


@pytest.mark.parametrize(("text", "value"), [("one-third", 1 / 3), ("one half", 0.5), ("all", 1.0)])
def test_fractions_in_the_target_grammars_words(text: str, value: float) -> None:
    assert parse_fraction(text) == pytest.approx(value)


def test_one_third_of_nine_workers_in_three_racks_takes_one_node_per_rack() -> None:
    inv = inventory({"a": 3, "b": 3, "c": 3})
    groups = auto_groups(inv, 1 / 3)
    assert groups == [
        Group("g1", ("w-a1", "w-b1", "w-c1")),
        Group("g2", ("w-a2", "w-b2", "w-c2")),
        Group("g3", ("w-a3", "w-b3", "w-c3")),
    ]
    for g in groups:
        # each rack has a control plane and 3 workers: one node of four goes down
        assert rack_shares(inv, g.nodes) == {"a": (1, 4), "b": (1, 4), "c": (1, 4)}


def test_groups_are_disjoint_and_cover_every_worker_even_when_uneven() -> None:
    inv = inventory({"a": 4, "b": 3, "c": 3})
    groups = auto_groups(inv, 1 / 3)
    members = [n for g in groups for n in g.nodes]
    assert sorted(members) == sorted(n.name for n in inv.nodes_by_role("worker"))
    assert len(members) == len(set(members))
    assert sorted(len(g.nodes) for g in groups) == [3, 3, 4]


def test_a_fraction_that_would_empty_more_than_55_percent_of_a_rack_is_refused() -> None:
    inv = inventory({"a": 2, "b": 2}, cps=0)
    with pytest.raises(ConfigError, match=r"2 of the 2 nodes of rack a .*100% > 55%"):
        auto_groups(inv, 1.0)
    assert [g.nodes for g in auto_groups(inv, 0.5)] == [("w-a1", "w-b1"), ("w-a2", "w-b2")]


def test_the_blast_radius_rules_of_the_inventory_apply() -> None:
    inv = inventory({"a": 3, "b": 3, "c": 3}, max_down=2)
    with pytest.raises(SafetyViolation, match="max_nodes_down"):
        auto_groups(inv, 1 / 3)


def test_too_many_groups_for_the_workers() -> None:
    inv = inventory({"a": 1, "b": 1})
    with pytest.raises(ConfigError, match="needs 4 groups but there are only 2 workers"):
        auto_groups(inv, 0.25)


def test_groups_file_as_a_list_or_a_mapping(tmp_path: Path) -> None:
    inv = inventory({"a": 3, "b": 3, "c": 3})
    as_list = tmp_path / "list.yaml"
    as_list.write_text("groups:\n- {name: left, nodes: [w-a1, w-b1]}\n- [w-a2, w-c2]\n")
    assert load_groups(as_list, inv) == [
        Group("left", ("w-a1", "w-b1")),
        Group("g2", ("w-a2", "w-c2")),
    ]
    as_map = tmp_path / "map.yaml"
    as_map.write_text("groups: {x: [w-a1], y: [w-b2, w-c3]}\n")
    assert [g.name for g in load_groups(as_map, inv)] == ["x", "y"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("groups: [[w-a1], [w-a1, w-b1]]", "w-a1 is in groups g1 and g2; groups must be disjoint"),
        ("groups: [[w-zz]]", "unknown node 'w-zz'"),
        ("groups: [[]]", "group g1 has no nodes"),
        ("groups: 3", "expected 'groups:'"),
        ("groups: [{name: a, nodes: [w-a1], extra: 1}]", "unknown key 'extra'"),
        ("groups: [{name: a, nodes: [w-a1]}, {name: a, nodes: [w-b1]}]", "duplicate group"),
        ("groups: [[w-a1, w-a2, w-a3]]", "3 of the 4 nodes of rack a"),
    ],
)
def test_bad_groups_files(tmp_path: Path, content: str, message: str) -> None:
    inv = inventory({"a": 3, "b": 3, "c": 3})
    path = tmp_path / "g.yaml"
    path.write_text(content + "\n")
    with pytest.raises(ConfigError, match=message):
        load_groups(path, inv)


def test_missing_groups_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="groups file not found"):
        load_groups(tmp_path / "nope.yaml", inventory({"a": 1}))


def test_rotation_keeps_its_place_across_a_resume() -> None:
    groups = [Group("g1", ("a",)), Group("g2", ("b",)), Group("g3", ("c",))]
    assert [group_for_cycle(groups, n).name for n in range(1, 8)] == [
        "g1",
        "g2",
        "g3",
        "g1",
        "g2",
        "g3",
        "g1",
    ]
    with pytest.raises(ValueError, match="count from 1"):
        group_for_cycle(groups, 0)


def test_validate_refuses_no_groups() -> None:
    with pytest.raises(ConfigError, match="no failure groups"):
        validate_groups(inventory({"a": 1}), [])
