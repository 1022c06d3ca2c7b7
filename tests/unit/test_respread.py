"""``Given the critical workloads are spread across racks again`` (harness.scenario.acts.spread):
evictions one at a time, as a descheduler would, each through the session (journaled, PDB
respected), until every critical workload covers the racks it can; a spread that cannot be
restored is not judged, saying why. Over a fake clock and a simulated scheduler."""

from __future__ import annotations

from collections.abc import Callable, Set
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness.budgets import PROFILES
from harness.errors import WaitTimeout
from harness.inventory import Inventory, load_inventory
from harness.journal import Journal
from harness.kube.drain import evict_pod
from harness.kube.observer.states import NodeState, Taint
from harness.kube.timeline import FakeClock, Timeline
from harness.scenario.acts.spread import respread, usable_racks
from harness.scenario.errors import NotApplicable, PreconditionNotMet
from harness.session import Session, journal_path_for
from tests.fakes.api import FakeApiServer, pod
from tests.fakes.power import FakeBmcs, add_nodes, write_inventory

BUDGETS = PROFILES["fast"]
RACKS = {"w1": "a", "w2": "a", "w3": "b", "w4": "b", "w5": "c", "w6": "c"}


class Cluster:
    """The pods of ``ns/web`` on a fake clock, and a scheduler that places a replacement
    ``delay_s`` after an eviction on the node ``place`` picks."""

    def __init__(self, place: Callable[[dict[str, str]], str], delay_s: float = 2.0) -> None:
        self.clock = FakeClock()
        self.tl = Timeline(self.clock)
        self.place, self.delay_s = place, delay_s
        self.nodes: dict[str, str] = {}  # pod name -> node
        self.uids: dict[str, str] = {}
        self.made = 0
        self.evicted: list[str] = []
        self.refusals = 0  # evictions a PodDisruptionBudget refuses first

    def pod(self, name: str, node: str, *, ready: bool = True) -> None:
        self.made += 1
        uid = f"{name}-{self.made}"
        self.nodes[name], self.uids[name] = node, uid
        self.tl.record(
            "Pod",
            name,
            "observed",
            namespace="ns",
            detail={
                "uid": uid,
                "node": node,
                "phase": "Running",
                "ready": ready,
                "terminating": False,
                "workload": "Deployment/web",
            },
        )

    # the session's primitive, as harness.session.Session.evict
    def evict(self, namespace: str, name: str, *, timeout_s: float, why: str) -> int:
        if self.refusals:
            self.refusals -= 1
            raise WaitTimeout(f"pod {namespace}/{name} evicted", "429: would violate PDB", 60.0)
        self.evicted.append(f"{name} ({why})")
        uid = self.uids.pop(name)
        node = self.nodes.pop(name)
        self.tl.record(
            "Pod",
            name,
            "deleted",
            namespace="ns",
            detail={"uid": uid, "node": node, "workload": "Deployment/web"},
        )
        new = f"web-r{self.made}"
        target = self.place(dict(self.nodes))
        self.clock.call_later(self.delay_s, lambda: self.pod(new, target))
        return 1


class Observer:
    def __init__(self, down: Set[str] = frozenset(), cordoned: Set[str] = frozenset()) -> None:
        self.down, self.cordoned = down, cordoned

    def node(self, name: str) -> NodeState:
        taints = (Taint("node-role.kubernetes.io/control-plane", "", "NoSchedule"),)
        return NodeState(
            name,
            name,
            "False" if name in self.down else "True",
            "",
            name in self.cordoned,
            taints if name == "cp1" else (),
            RACKS.get(name, "a"),
        )


def _inventory(*extra: tuple[str, str]) -> Any:
    nodes = [SimpleNamespace(name=n, rack=r) for n, r in [*RACKS.items(), *extra]]
    return SimpleNamespace(nodes=nodes)


WEB = SimpleNamespace(
    critical=True, kind="Deployment", namespace="ns", name="web", key="Deployment/web",
    ref="ns/web", desired=3,
)  # fmt: skip


def _empty_rack(pods: dict[str, str]) -> str:
    """A DoNotSchedule spread: the first node of a rack without a pod of web."""
    held = {RACKS[n] for n in pods.values()}
    return next(n for n, r in RACKS.items() if r not in held)


def _run(c: Cluster, observer: Observer | None = None, *extra: tuple[str, str]) -> Any:
    return respread(
        cast(Any, c),
        _inventory(*extra),
        cast(Any, observer or Observer()),
        c.tl,
        [cast(Any, WEB)],
        BUDGETS,
    )


def test_web_left_on_two_racks_is_spread_over_three_by_one_eviction() -> None:
    c = Cluster(_empty_rack)
    c.pod("web-0", "w1")
    c.pod("web-1", "w2")
    c.pod("web-2", "w3")
    done = _run(c)
    assert len(c.evicted) == 1 and c.evicted[0].startswith("web-0 (ns/web on 2 of 3 racks")
    assert done.evicted == ("ns/web-0: from a",)
    assert set(done.racks["ns/web"]) == {"a", "b", "c"}
    assert c.clock.monotonic() >= 1000.0 + c.delay_s  # it waited for the replacement Ready


def test_a_spread_workload_is_left_alone() -> None:
    c = Cluster(_empty_rack)
    for name, node in (("web-0", "w1"), ("web-1", "w3"), ("web-2", "w5")):
        c.pod(name, node)
    assert _run(c).evicted == () and c.evicted == []


def test_only_the_racks_a_pod_can_be_scheduled_on_count() -> None:
    """Rack c down and cordoned: two racks are all web can have; nothing to evict."""
    c = Cluster(_empty_rack)
    for name, node in (("web-0", "w1"), ("web-1", "w2"), ("web-2", "w3")):
        c.pod(name, node)
    observer = Observer(down={"w5"}, cordoned={"w6"})
    assert usable_racks(_inventory(("cp1", "c")), cast(Any, observer)) == {"a", "b"}
    assert _run(c, observer, ("cp1", "c")).evicted == ()


def test_a_replacement_placed_on_a_rack_it_ran_in_is_not_judged_naming_the_constraint() -> None:
    c = Cluster(lambda pods: "w2")  # no spread constraint: back to rack a
    for name, node in (("web-0", "w1"), ("web-1", "w2"), ("web-2", "w3")):
        c.pod(name, node)
    with pytest.raises(PreconditionNotMet, match=r"not judged: .*DoNotSchedule") as err:
        _run(c)
    assert isinstance(err.value, NotApplicable)  # the scenario is skipped, never failed
    assert len(c.evicted) == 1  # it stopped there, not looping over the workload


def test_a_pdb_that_keeps_refusing_or_a_replacement_never_ready_is_not_judged() -> None:
    c = Cluster(_empty_rack)
    for name, node in (("web-0", "w1"), ("web-1", "w2"), ("web-2", "w3")):
        c.pod(name, node)
    c.refusals = 1
    with pytest.raises(PreconditionNotMet, match=r"not judged: .*429: would violate PDB"):
        _run(c)
    slow = Cluster(_empty_rack, delay_s=BUDGETS.pod_rescheduled + 5)
    for name, node in (("web-0", "w1"), ("web-1", "w2"), ("web-2", "w3")):
        slow.pod(name, node)
    with pytest.raises(PreconditionNotMet, match=r"not judged: .*Ready again.*2 of 3 Ready"):
        _run(slow)


def test_too_few_ready_pods_to_spread_is_not_judged_without_evicting() -> None:
    c = Cluster(_empty_rack)
    c.pod("web-0", "w1")
    c.pod("web-1", "w3", ready=False)
    with pytest.raises(PreconditionNotMet, match="only 1 of its 3 pods are Ready"):
        _run(c)
    assert c.evicted == []


@pytest.fixture
def inventory(tmp_path: Path, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> Inventory:
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    FakeBmcs().install(monkeypatch)
    add_nodes(api)
    return load_inventory(write_inventory(tmp_path, api.url))


def _refusing(times: int) -> Callable[[str, str], int | None]:
    """An eviction hook: a PodDisruptionBudget that refuses ``times`` evictions (429)."""
    left = [times]

    def hook(namespace: str, name: str) -> int | None:
        if left[0] > 0:
            left[0] -= 1
            return 429
        return None

    return hook


def test_an_eviction_refused_by_a_pdb_is_retried_until_its_deadline(api: FakeApiServer) -> None:
    api.add("pods", pod("web-0", node_name="w1", namespace="ns"))
    api.eviction_hook = _refusing(2)
    clock = FakeClock()
    tl = Timeline(clock)
    client = api.client()
    attempts = evict_pod(client, "ns", "web-0", deadline=1030.0, timeline=tl, clock=clock)
    assert attempts == 3 and clock.monotonic() == pytest.approx(1001.5)  # 0.5 + 1 s backoff
    [t] = [t for t in tl.all() if t.transition == "evicted"]
    assert t.name == "web-0" and t.detail["attempts"] == 3
    api.add("pods", pod("web-1", node_name="w1", namespace="ns"))
    api.eviction_hook = _refusing(1000)
    with pytest.raises(WaitTimeout, match="disruption budget"):
        evict_pod(client, "ns", "web-1", deadline=clock.monotonic() + 10, clock=clock)


def test_the_sessions_eviction_is_kept_in_the_journal_owing_nothing(
    inventory: Inventory, api: FakeApiServer
) -> None:
    api.add("pods", pod("web-0", node_name="w1", namespace="ns"))
    with Session(inventory, client=api.client()) as s:
        assert s.evict("ns", "web-0", timeout_s=5.0, why="ns/web on 2 of 3 racks") == 1
    path = journal_path_for(inventory)
    [note] = Journal.read_notes(path)
    assert note.action == "evict" and note.target == "pod/ns/web-0"
    assert "ns/web on 2 of 3 racks" in note.detail and "nothing to undo" in note.detail
    assert [e for e in Journal.read(path) if e.owes_undo] == []
    dry = Session(inventory, client=api.client(), dry_run=True)
    assert dry.evict("ns", "web-1", timeout_s=5.0, why="w") == 0
    assert dry.plan == ["evict pod ns/web-1 (w); nothing to undo"]
