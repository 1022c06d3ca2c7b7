"""Longevity chooses each cycle's group as the steps choose targets: by a target phrase,
from where the pods are at that cycle, sparing the critical workloads by default.

On the lab (3 cycles) the fixed groups once put every ``web`` replica and every ``quorum``
member in cycle 3's group: 0 Ready of each, a 108 s outage against a 25 s budget. Here the
pods sit where that happened, and the default phrase chooses a group that leaves each
critical workload its Ready pods.
"""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.errors import ConfigError
from harness.inventory import Inventory, parse_inventory
from harness.longevity.groups import auto_groups
from harness.longevity.run import RunOptions, target_phrase
from harness.scenario.targets.choice import DEFAULT_PHRASE, PHRASES, parse_phrase, workers_sparing
from harness.scenario.targets.select import Amount
from harness.scenario.targets.workloads import PodInfo, Workload


def inventory() -> Inventory:
    nodes = [
        f"- {{name: cp-{i}, role: control-plane, rack: {r}, power: {{driver: ssh}}, "
        "ssh: {host: 127.0.0.1}}"
        for i, r in enumerate("abc", 1)
    ]
    nodes += [
        f"- {{name: w-{r}{i}, role: worker, rack: {r}, power: {{driver: ssh}}, "
        "ssh: {host: 127.0.0.1}}"
        for r in "abc"
        for i in (1, 2, 3)
    ]
    text = "cluster: {kubeconfig: /dev/null}\nsafety: {max_nodes_down: 6}\nnodes:\n"
    return parse_inventory(text + "\n".join(nodes) + "\n")


def wl(kind: str, name: str, replicas: int, keep: int, critical: bool = True) -> Workload:
    return Workload("lab", kind, name, replicas, {}, False, critical, keep, None)


WORKLOADS = [
    wl("Deployment", "web", 3, 2),
    wl("StatefulSet", "quorum", 3, 2),
    wl("Deployment", "registry", 1, 0, critical=False),
]


def pods_on(nodes: tuple[str, ...], others: list[str]) -> list[PodInfo]:
    """Every web replica and quorum member on ``nodes`` (one each), a registry elsewhere."""
    out = []
    for i, node in enumerate(nodes):
        out.append(PodInfo("lab", f"web-{i}", f"uw{i}", node, "Deployment/web", ()))
        out.append(PodInfo("lab", f"quorum-{i}", f"uq{i}", node, "StatefulSet/quorum", ("pv",)))
    out.append(PodInfo("lab", "registry-0", "ur", others[0], "Deployment/registry", ()))
    return out


def test_the_default_group_spares_the_critical_workloads_where_a_fixed_group_took_them_all() -> (
    None
):
    inv = inventory()
    fixed = auto_groups(inv, 1 / 3)[2]  # cycle 3's group
    pods = pods_on(fixed.nodes, [n for n in inv.node_names() if n.startswith("w-")])
    lost = [p for p in pods if p.node in fixed.nodes]
    assert {p.workload for p in lost if p.workload != "Deployment/registry"} == {
        "Deployment/web",
        "StatefulSet/quorum",
    }
    assert sum(p.workload == "Deployment/web" for p in lost) == 3  # every replica: the bug

    amount, sparing = parse_phrase(DEFAULT_PHRASE)
    assert amount is not None and sparing
    ready = SimpleNamespace(is_ready=True, unschedulable=False)
    observer = SimpleNamespace(node=lambda name: ready)
    chosen = workers_sparing(
        inv,
        observer,  # type: ignore[arg-type]
        pods,
        WORKLOADS,
        amount,
        rng=random.Random(3),
    )
    assert len(chosen.nodes) == 3 and {inv.node(n).rack for n in chosen.nodes} == {"a", "b", "c"}
    for w in WORKLOADS:
        if w.critical:
            left = [p for p in pods if p.workload == w.key and p.node not in chosen.nodes]
            assert len(left) >= max(1, w.min_available), (w.key, chosen.nodes)
    assert chosen.nodes != fixed.nodes


@pytest.mark.parametrize(
    ("phrase", "count", "fraction", "sparing"),
    [
        (DEFAULT_PHRASE, None, "1/3", True),
        ("one third of the worker nodes, one per rack", None, "1/3", False),
        ("2 worker nodes", 2, None, False),
        ("Two of the worker nodes, one per rack, sparing the critical workloads", 2, None, True),
        (
            "1/2 of the worker nodes, one per rack, sparing the critical workloads",
            None,
            "1/2",
            True,
        ),
    ],
)
def test_target_phrases_parse_as_the_steps_say_them(
    phrase: str, count: int | None, fraction: str | None, sparing: bool
) -> None:
    amount, spares = parse_phrase(phrase)
    assert isinstance(amount, Amount) and spares is sparing
    assert amount.count == count
    assert (str(amount.fraction) if amount.fraction is not None else None) == fraction


def test_a_phrase_not_understood_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_phrase("the quietest rack")
    assert exc.value.field == "--target"
    for phrase in PHRASES:
        assert phrase in str(exc.value)
    assert parse_phrase(PHRASES[-1]) == (None, False)


def test_the_run_chooses_by_target_unless_fixed_groups_are_asked_for(tmp_path: Path) -> None:
    base = RunOptions(inventory=tmp_path / "i.yaml", out=tmp_path)
    assert target_phrase(base) == DEFAULT_PHRASE
    half = RunOptions(inventory=tmp_path / "i.yaml", out=tmp_path, fraction=0.5)
    assert target_phrase(half) == (
        "1/2 of the worker nodes, one per rack, sparing the critical workloads"
    )
    fixed = RunOptions(inventory=tmp_path / "i.yaml", out=tmp_path, groups="auto")
    assert target_phrase(fixed) is None
    both = RunOptions(inventory=tmp_path / "i.yaml", out=tmp_path, groups="auto", target="x")
    with pytest.raises(ConfigError, match="either --target or --groups"):
        target_phrase(both)
