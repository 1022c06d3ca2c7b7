"""Which nodes a scenario disrupts, chosen from the inventory and what runs where now.

Feature files never name nodes: a scenario asks for "a worker node running a StatefulSet
member with a ReadWriteOnce volume" and gets the best match in the cluster under test, so
the same feature runs against the lab and against a real cluster. Choices are
deterministic (most relevant pods first, then by name). A cluster that has nothing
matching raises :class:`~harness.scenario.errors.NoTargets` (the steps skip the scenario),
saying what it lacks.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.errors import ConfigError
from harness.failures import FailureKind
from harness.inventory import Inventory, NodeSpec
from harness.kube.client import KubeClient
from harness.kube.observer import Observer
from harness.kube.timeline import Transition
from harness.scenario.errors import NoTargets
from harness.scenario.targets.select import Amount, Selection, select_nodes
from harness.scenario.targets.workloads import PodInfo, Workload, workload_pods

PodFilter = Callable[[PodInfo], bool]


@dataclass(frozen=True)
class Targets:
    """The nodes a scenario disrupts and the pods that run on them when chosen.

    ``subjects`` are the pods the scenario is about (the StatefulSet member, the singleton);
    ``pods`` every pod of an inventory workload on the nodes (DaemonSet pods apart, in
    ``daemon_pods``).
    """

    nodes: tuple[str, ...]
    pods: tuple[PodInfo, ...]
    daemon_pods: tuple[PodInfo, ...] = ()
    subjects: tuple[PodInfo, ...] = ()
    why: str = ""
    racks: dict[str, str] = field(default_factory=dict)  # node -> rack

    @property
    def node(self) -> str:
        """The one node of a single-node scenario."""
        if len(self.nodes) != 1:
            raise ValueError(
                f"this step is about one node, but the scenario chose {len(self.nodes)}: "
                f"{', '.join(self.nodes)}; use the 'every lost node' form"
            )
        return self.nodes[0]

    def only(self) -> Targets:
        """These targets, checked to be a single node."""
        _ = self.node
        return self

    @property
    def subject(self) -> PodInfo:
        if len(self.subjects) != 1:
            raise ValueError(f"expected one subject pod, have {len(self.subjects)}")
        return self.subjects[0]

    def describe(self) -> str:
        pods = ", ".join(p.ref for p in self.pods) or "none"
        return f"{', '.join(self.nodes)} ({self.why}); pods: {pods}"


def _ready_nodes(inventory: Inventory, observer: Observer, role: str) -> list[NodeSpec]:
    out = []
    for spec in inventory.nodes_by_role(role):
        state = observer.node(spec.name)
        if state is not None and state.is_ready and not state.unschedulable:
            out.append(spec)
    return out


def _split(pods: Sequence[PodInfo], node: str) -> tuple[list[PodInfo], list[PodInfo]]:
    mine = [p for p in pods if p.node == node]
    return (
        [p for p in mine if p.kind != "DaemonSet"],
        [p for p in mine if p.kind == "DaemonSet"],
    )


def _racks(inventory: Inventory, nodes: Sequence[str]) -> dict[str, str]:
    return {n: inventory.node(n).rack or "(no rack)" for n in nodes}


def _of_nodes(
    inventory: Inventory, pods: Sequence[PodInfo], nodes: Sequence[str], why: str
) -> Targets:
    """Targets for whole ``nodes``: every pod on them, DaemonSet pods apart."""
    on = [p for p in pods if p.node in nodes]
    return Targets(
        tuple(nodes),
        tuple(p for p in on if p.kind != "DaemonSet"),
        tuple(p for p in on if p.kind == "DaemonSet"),
        why=why,
        racks=_racks(inventory, nodes),
    )


def one_node(
    inventory: Inventory,
    observer: Observer,
    pods: Sequence[PodInfo],
    *,
    role: str,
    subject: PodFilter,
    why: str,
    prefer_busy: bool = True,
    also: PodFilter | None = None,
) -> Targets:
    """The node of ``role`` running a pod that ``subject`` accepts (and one that ``also``
    accepts, if given). Busiest node first (``prefer_busy``), else the quietest."""
    candidates = []
    for spec in _ready_nodes(inventory, observer, role):
        regular, daemons = _split(pods, spec.name)
        subjects = [p for p in regular + daemons if subject(p)]
        if not subjects or (also is not None and not any(also(p) for p in regular + daemons)):
            continue
        busy = len(regular)
        candidates.append(((-busy if prefer_busy else busy), spec.name, regular, daemons, subjects))
    if not candidates:
        raise NoTargets(f"no Ready, schedulable {role} node runs {why} in this cluster")
    _, name, regular, daemons, subjects = min(candidates, key=lambda c: (c[0], c[1]))
    return Targets(
        (name,),
        tuple(regular),
        tuple(daemons),
        (subjects[0],),
        why,
        _racks(inventory, [name]),
    )


def control_plane_node(inventory: Inventory, observer: Observer) -> Targets:
    """A Ready control-plane node (the first by name)."""
    nodes = sorted(
        s.name
        for s in inventory.nodes_by_role("control-plane")
        if (st := observer.node(s.name)) is not None and st.is_ready
    )
    total = len(inventory.nodes_by_role("control-plane"))
    if total < 3 or len(nodes) < total:
        raise NoTargets(
            f"needs at least 3 Ready control-plane nodes in the inventory (has {total}, "
            f"{len(nodes)} Ready): losing one of fewer loses etcd quorum"
        )
    return Targets((nodes[0],), (), why="a control-plane node", racks=_racks(inventory, nodes[:1]))


def busiest_rack(
    inventory: Inventory, pods: Sequence[PodInfo], workloads: Sequence[Workload]
) -> Targets:
    """Every node of the rack that runs the most pods of critical workloads."""
    critical = {(w.namespace, w.key) for w in workloads if w.critical}
    racks = inventory.racks()
    if len(racks) < 2:
        raise NoTargets(f"needs at least 2 racks in the inventory (has {len(racks)})")
    scored = []
    for rack in racks:
        nodes = [n.name for n in inventory.nodes_in_rack(rack)]
        n_critical = sum(
            1 for p in pods if p.node in nodes and (p.namespace, p.workload) in critical
        )
        scored.append((-n_critical, rack, nodes))
    _, rack, nodes = min(scored)
    return _of_nodes(inventory, pods, nodes, f"every node of rack {rack}")


def third_of_workers(
    inventory: Inventory,
    observer: Observer,
    pods: Sequence[PodInfo],
    workloads: Sequence[Workload],
    *,
    max_tries: int = 10_000,
) -> Targets:
    """ceil(workers / 3) Ready workers, taken one per rack in turn, such that every critical
    workload keeps at least max(1, min_available) pods on the others. Of the sets that
    qualify (up to ``max_tries`` candidates looked at) the one losing the most pods that
    their controllers replace elsewhere, stateless first; ties go to the busiest nodes."""
    return workers_sparing(
        inventory, observer, pods, workloads, Amount.parse("one-third"), max_tries=max_tries
    )


def workers_sparing(
    inventory: Inventory,
    observer: Observer,
    pods: Sequence[PodInfo],
    workloads: Sequence[Workload],
    amount: Amount,
    *,
    rng: random.Random | None = None,
    max_tries: int = 10_000,
) -> Targets:
    """``amount`` of the workers (see :func:`third_of_workers`, which asks for a third),
    one per rack in turn, sparing the critical workloads: from where their pods are now."""
    workers = _ready_nodes(inventory, observer, "worker")
    total = len(inventory.nodes_by_role("worker"))
    if len(workers) < total:
        raise NoTargets(f"only {len(workers)} of {total} workers are Ready and schedulable")
    want = amount.resolve(total, rng or random.Random(0))
    by_rack: dict[str, list[str]] = {}
    for spec in sorted(workers, key=lambda s: (-len(_split(pods, s.name)[0]), s.name)):
        by_rack.setdefault(spec.rack or "(no rack)", []).append(spec.name)
    racks = sorted(by_rack)
    slots = [racks[i % len(racks)] for i in range(want)]
    keep = {
        (w.namespace, w.key): max(1, w.min_available)
        for w in workloads
        if w.critical and w.kind != "DaemonSet"
    }

    def spares(chosen: list[str]) -> bool:
        for (ns, key), need in keep.items():
            left = [p for p in pods if p.namespace == ns and p.workload == key]
            if sum(1 for p in left if p.node not in chosen) < need:
                return False
        return True

    def score(chosen: list[str]) -> tuple[int, int]:
        # A set that loses pods its controllers replace elsewhere, stateless ones above all,
        # is what the scenario is about: a set that loses none proves nothing.
        lost = [p for p in pods if p.node in chosen and p.replaced_elsewhere]
        return sum(1 for p in lost if p.stateless), len(lost)

    tries = 0
    best: list[str] | None = None

    def pick(chosen: list[str]) -> None:
        nonlocal tries, best
        if len(chosen) == want:
            if best is None or score(chosen) > score(best):
                best = chosen
            return
        for node in by_rack[slots[len(chosen)]]:
            tries += 1
            if tries > max_tries:
                return
            if node not in chosen and spares([*chosen, node]):
                pick([*chosen, node])

    pick([])
    chosen = best
    if chosen is None:
        raise NoTargets(
            f"no {want} workers (one per rack in turn) whose loss leaves every critical "
            "workload its min_available Ready pods"
        )
    return _of_nodes(
        inventory,
        pods,
        chosen,
        f"{want} of {total} workers, one per rack in turn, sparing the critical workloads",
    )


#: The target phrases :func:`by_phrase` understands (the steps' wording).
PHRASES = (
    "<amount> of the worker nodes, one per rack, sparing the critical workloads",
    "<amount> of the worker nodes, one per rack",
    "<amount> worker nodes",
    "every node of the rack running the most critical pods",
)
DEFAULT_PHRASE = "one third of the worker nodes, one per rack, sparing the critical workloads"
_WORKERS = re.compile(
    r"^(?P<amount>.+?)\s+(?:of\s+the\s+)?worker\s+nodes?"
    r"(?P<per_rack>\s*,\s*one\s+per\s+rack)?"
    r"(?P<sparing>\s*,\s*sparing\s+the\s+critical\s+workloads)?$"
)


def parse_phrase(phrase: str) -> tuple[Amount | None, bool]:
    """A target phrase as (amount of the workers, sparing the critical workloads); amount
    None: every node of the busiest rack. Else a :class:`ConfigError` listing the phrases."""
    text = " ".join(phrase.strip().lower().split())
    if text == PHRASES[-1]:
        return None, False
    m = _WORKERS.match(text)
    if m is None:
        raise ConfigError(
            f"target {phrase!r} is not understood; valid: " + "; ".join(PHRASES),
            field="--target",
        )
    words = m["amount"].replace("one third", "one-third").replace("one half", "one-half")
    try:
        amount = Amount.parse(words)
    except ConfigError as exc:
        raise ConfigError(str(exc), field="--target") from None
    return amount, m["sparing"] is not None


def by_phrase(
    phrase: str,
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: Sequence[Workload],
    *,
    rng: random.Random,
    seed: int,
) -> Targets:
    """The targets a phrase of :data:`PHRASES` names, chosen from where the workloads' pods
    are now (the same choices as the steps of that wording)."""
    amount, sparing = parse_phrase(phrase)
    pods = workload_pods(kube, workloads)
    if amount is None:
        return busiest_rack(inventory, pods, workloads)
    if sparing:
        return workers_sparing(inventory, observer, pods, workloads, amount, rng=rng)
    return select_targets(
        inventory, observer, kube, workloads, rng=rng, seed=seed, amount=amount, role="worker"
    )


def from_selection(inventory: Inventory, selection: Selection, pods: Sequence[PodInfo]) -> Targets:
    """Targets for the nodes a :class:`~harness.scenario.targets.select.Selection` chose, with the
    inventory workloads' pods that run on them now."""
    why = selection.why + (f"; seed {selection.seed}" if selection.seed is not None else "")
    return _of_nodes(inventory, pods, selection.nodes, why)


@dataclass(frozen=True)
class Outage:
    """What a failure step did (a power-off, or with ``kind`` a partition or a kubelet
    stop): the lost nodes and pods, and the actions' transitions."""

    targets: Targets
    lost: tuple[PodInfo, ...]  # targets.pods still alive when the power went
    sent: Transition  # the first "power-off sent"
    acks: Mapping[str, Transition]  # node -> its "power-off acknowledged"
    protocol: str  # "" for each node's primary power driver
    graceful: bool
    skew_s: float
    kind: FailureKind = FailureKind.POWER_OFF

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.targets.nodes

    @property
    def subjects(self) -> tuple[PodInfo, ...]:
        lost = {p.uid for p in self.lost}
        return tuple(p for p in self.targets.subjects if p.uid in lost)


@dataclass(frozen=True)
class PoweredOn:
    """What a power-on step did. Phases after a power-on are measured from the request
    (``sent``): a node can come up before its BMC's acknowledgement (with the power state
    read back) returns."""

    nodes: tuple[str, ...]
    sent: Mapping[str, Transition]  # node -> its "power-on sent"
    acks: Mapping[str, Transition]  # node -> its "power-on acknowledged"
    restored: tuple[str, ...]  # Node objects the harness re-created (deleted earlier)

    @property
    def last_sent(self) -> Transition:
        return max(self.sent.values(), key=lambda t: t.mono)


@dataclass(frozen=True)
class Restarted:
    """What a restart of pods by label selector did: the pods deleted (name -> uid) and
    the request."""

    namespace: str
    selector: str
    pods: Mapping[str, str]
    sent: Transition


# -- choosing from the live cluster ------------------------------------------------------------


def _usable(observer: Observer) -> Callable[[str], bool]:
    """Ready and schedulable now: a node a scenario may fail."""

    def usable(name: str) -> bool:
        state = observer.node(name)
        return state is not None and state.is_ready and not state.unschedulable

    return usable


def _labelled(kube: KubeClient) -> Callable[[str], set[str]]:
    def labelled(selector: str) -> set[str]:
        items, _ = kube.list("/api/v1/nodes", labelSelector=selector)
        return {str(i["metadata"]["name"]) for i in items}

    return labelled


def select_targets(
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: Sequence[Workload],
    *,
    rng: random.Random,
    seed: int,
    amount: Amount,
    **filters: Any,
) -> Targets:
    """``amount`` usable nodes drawn (with ``rng``, replayable by ``seed``) from the inventory's
    nodes that match ``filters`` (role, rack, names, label_selector, exclude: as
    :func:`~harness.scenario.targets.select.select_nodes`), with the workload pods they run."""
    chosen = select_nodes(
        inventory,
        amount=amount,
        rng=rng,
        seed=seed,
        usable=_usable(observer),
        labelled=_labelled(kube),
        **filters,
    )
    if not chosen.nodes:
        raise NoTargets(f"{chosen.why}: no node to fail")
    return from_selection(inventory, chosen, workload_pods(kube, workloads))


def select_by_role(
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: Sequence[Workload],
    *,
    rng: random.Random,
    seed: int,
    amounts: Mapping[str, Amount],
    nothing: str,
) -> Targets:
    """Each role's ``amount`` of usable nodes, drawn in the order given (Dell's "<workers>
    worker nodes and <primary> primary nodes"), as one set of targets saying why each."""
    picks = [
        select_nodes(
            inventory, amount=amount, rng=rng, seed=seed, role=role, usable=_usable(observer)
        )
        for role, amount in amounts.items()
    ]
    nodes = tuple(sorted({n for p in picks for n in p.nodes}))
    if not nodes:
        raise NoTargets(f"{nothing}: no node to fail")
    why = "; ".join(p.why for p in picks)
    return from_selection(inventory, Selection(nodes, why, seed), workload_pods(kube, workloads))


def worker_running(
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: Sequence[Workload],
    *,
    subject: PodFilter,
    why: str,
    also: PodFilter | None = None,
    prefer_busy: bool = True,
) -> Targets:
    """The worker :func:`one_node` picks among the pods of the inventory's workloads."""
    return one_node(
        inventory,
        observer,
        workload_pods(kube, workloads),
        role="worker",
        subject=subject,
        why=why,
        prefer_busy=prefer_busy,
        also=also,
    )
