"""The Givens: the cluster in steady state, and the nodes a scenario fails.

Targets by reason (the busiest worker running a StatefulSet member with a ReadWriteOnce
volume, the singleton's, a PodDisruptionBudget's and a DaemonSet pod's; the rack running the
most critical pods; a third of the workers sparing the critical workloads) and by count,
fraction, range, rack, label selector or name. Each step parses its sentence and calls one
function of :mod:`harness.scenario.givens`, which chooses and shows the choice in the
report; the chosen nodes are the ``targets`` fixture every later step acts on.
"""

from __future__ import annotations

import random

import pytest
from pytest_bdd import given

from harness.inventory import Inventory
from harness.kube.client import KubeClient
from harness.kube.observer import Observer
from harness.scenario import givens
from harness.scenario.expectations.steady_state import Baseline
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Targets
from harness.scenario.targets.select import Amount, parse_names
from harness.scenario.targets.workloads import Workload
from harness.steps.fixtures import inventory_names
from harness.steps.plugin import seed_of
from harness.steps.support.phrases import phrase


@given("the cluster is in steady state")
def cluster_in_steady_state(baseline: Baseline, measurements: Measurements) -> None:
    """Every inventory node Ready without failure taints, every workload fully Ready, every
    volume attached once, every service probe answering (waits up to the recovery budget)."""
    measurements.record(
        "settle before the scenario",
        baseline.settled_s,
        None,
        started_mono=baseline.at_mono - baseline.settled_s,
    )


@given(
    "a worker node running a StatefulSet member with a ReadWriteOnce volume",
    target_fixture="targets",
)
def worker_with_statefulset_member(
    inventory: Inventory, observer: Observer, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """The busiest worker running a pod of an inventory StatefulSet that mounts a
    ReadWriteOnce volume ("the member")."""
    return givens.worker_for(givens.MEMBER, inventory, observer, kube, workloads)


@given(
    "a worker node running a singleton Deployment pod with a ReadWriteOnce volume",
    target_fixture="targets",
)
def worker_with_singleton(
    inventory: Inventory, observer: Observer, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """The busiest worker running the pod of an inventory Deployment with one replica and a
    ReadWriteOnce volume ("the singleton")."""
    return givens.worker_for(givens.SINGLETON, inventory, observer, kube, workloads)


@given(
    "a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod",
    target_fixture="targets",
)
def worker_with_pdb_pods(
    inventory: Inventory, observer: Observer, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """The busiest worker running a pod of a workload with a PodDisruptionBudget and a pod of
    an inventory DaemonSet."""
    return givens.worker_for(givens.PDB_PODS, inventory, observer, kube, workloads)


@given("a worker node running a DaemonSet pod", target_fixture="targets")
def worker_with_daemonset_pod(
    inventory: Inventory, observer: Observer, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """The quietest worker (fewest other pods) running a pod of an inventory DaemonSet."""
    return givens.worker_for(givens.DAEMONSET_POD, inventory, observer, kube, workloads)


@given("a control-plane node", target_fixture="targets")
def control_plane_node(inventory: Inventory, observer: Observer) -> Targets:
    """The first (by name) of at least three Ready control-plane nodes."""
    return givens.control_plane_node(inventory, observer)


@given("every node of the rack running the most critical pods", target_fixture="targets")
def busiest_rack(
    inventory: Inventory, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """Every node (control plane included) of the rack running the most pods of critical
    workloads."""
    return givens.busiest_rack(inventory, kube, workloads)


@given(
    "one third of the worker nodes, one per rack, sparing the critical workloads",
    target_fixture="targets",
)
def third_of_workers(
    inventory: Inventory, observer: Observer, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """ceil(workers / 3) workers, one per rack in turn, such that every critical workload
    keeps at least max(1, min_available) Ready pods on the other nodes; of those sets, the
    one losing the most pods their controllers replace elsewhere (stateless ones first)."""
    return givens.third_of_workers(inventory, observer, kube, workloads)


@given(phrase("{amount:Amount} worker nodes"), target_fixture="targets")
@given(phrase("{amount:Amount} worker node"), target_fixture="targets")
@given(phrase("{amount:Amount} of the worker nodes"), target_fixture="targets")
def some_workers(
    amount: Amount,
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
    rng: random.Random,
    pytestconfig: pytest.Config,
) -> Targets:
    """Ready, schedulable workers: a count (``one``, ``2``), a fraction (``one-third``,
    ``one-half``, ``all``, ``1/3``, rounded up) or a range (``1-2``, drawn from the seed),
    spread over the racks."""
    return givens.some(
        inventory, observer, kube, workloads, rng, seed_of(pytestconfig), amount, role="worker"
    )


@given(phrase("{amount:Amount} control-plane nodes"), target_fixture="targets")
@given(phrase("{amount:Amount} control-plane node"), target_fixture="targets")
def some_control_planes(
    amount: Amount,
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
    rng: random.Random,
    pytestconfig: pytest.Config,
) -> Targets:
    """Ready control-plane nodes, by count, fraction or range (see the worker form)."""
    return givens.some(
        inventory,
        observer,
        kube,
        workloads,
        rng,
        seed_of(pytestconfig),
        amount,
        role="control-plane",
    )


@given(phrase("{amount:Amount} nodes of rack {rack}"), target_fixture="targets")
@given(phrase("{amount:Amount} node of rack {rack}"), target_fixture="targets")
@inventory_names(rack="rack")
def some_nodes_of_rack(
    amount: Amount,
    rack: str,
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
    rng: random.Random,
    pytestconfig: pytest.Config,
) -> Targets:
    """Ready nodes (any role) of the named rack (``every node of rack b``)."""
    return givens.some(
        inventory, observer, kube, workloads, rng, seed_of(pytestconfig), amount, rack=rack
    )


@given(phrase("{amount:Amount} nodes labelled {selector}"), target_fixture="targets")
@given(phrase("{amount:Amount} node labelled {selector}"), target_fixture="targets")
def some_labelled_nodes(
    amount: Amount,
    selector: str,
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
    rng: random.Random,
    pytestconfig: pytest.Config,
) -> Targets:
    """Ready inventory nodes that the label selector matches (the API server evaluates it:
    ``disktype=ssd``, ``topology.kubernetes.io/zone in (a,b)``)."""
    return givens.some(
        inventory,
        observer,
        kube,
        workloads,
        rng,
        seed_of(pytestconfig),
        amount,
        label_selector=selector.strip().strip('"'),
    )


@given(phrase("the node {names}"), target_fixture="targets")
@given(phrase("the nodes {names}"), target_fixture="targets")
@inventory_names(names="nodes")
def named_nodes(
    names: str,
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
    rng: random.Random,
    pytestconfig: pytest.Config,
) -> Targets:
    """The inventory nodes named (``the nodes w-a1, w-b1 and w-c1``); each must be Ready."""
    return givens.some(
        inventory,
        observer,
        kube,
        workloads,
        rng,
        seed_of(pytestconfig),
        Amount.parse("all"),
        names=parse_names(names),
    )
