"""The shared step vocabulary of powercut's features: parsing and delegation only.

Each step parses its sentence (typed fields: ``{limit:Limit}``, ``{amount:Amount}``,
``{pods:Pods}``), resolves its limit to seconds and calls the library: targets in
:mod:`harness.scenario.targets` / :mod:`harness.scenario.select`, failures and expectations in
:mod:`harness.scenario.phases`, operator actions in :mod:`harness.scenario.operator`, Jobs in
:mod:`harness.scenario.jobs`. The fixtures and the hooks around the steps live in
:mod:`harness.steps.fixtures`.

Steps pass state on only through fixtures (``target_fixture``): ``targets`` (the chosen
nodes and their pods), ``outage`` (the failure), ``powered_on``, ``drained``, ``resolution``
(the operator action that freed the stuck pods), ``restarted`` and ``rerun``. Every limit is
a named budget or a literal number of seconds.

``docs/steps.md`` is generated from this module: run ``scripts/gen_steps_doc.py`` after
changing a step.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import allure
import pytest
from pytest_bdd import given, parsers, then, when
from pytest_bdd.compat import inject_fixture
from pytest_bdd.parsers import StepParser

from harness.budgets import Budgets
from harness.checks import (
    CheckFailed,
    available_throughout,
    probe_health,
    quorum_kept,
    spread_over_racks,
    still_terminating,
)
from harness.errors import ConfigError
from harness.inventory import Inventory
from harness.kube.actions import DrainResult
from harness.kube.client import KubeClient
from harness.kube.names import Act, Change, Kind, Stage
from harness.kube.observer import Observer
from harness.kube.timeline import ACTION, Timeline, Transition, match
from harness.power.base import FailureKind
from harness.power.factory import available_protocols
from harness.scenario import jobs, operator, phases, starts, steady, subjects
from harness.scenario import lost as L
from harness.scenario import targets as choose
from harness.scenario.apiprobe import API_PROBE, ETCD_PROBE, ApiProber, longest_outage
from harness.scenario.data import Tokens, moved_off, read_back_tokens, write_tokens_of
from harness.scenario.errors import MissingStep, NothingToMeasure
from harness.scenario.report import Measurements
from harness.scenario.select import Amount, parse_names
from harness.scenario.steady import Baseline
from harness.scenario.targets import Outage, PoweredOn, Targets
from harness.scenario.workloads import PodInfo, Workload, workload_pods
from harness.session import Session
from harness.steps.fixtures import PROVIDED, also_provides, current_step, inventory_names
from harness.steps.plugin import seed_of
from harness.steps.support.limits import TYPES, Limit, Subject

#: How long after the API showed a change its watch event may still be on its way.
OBSERVER_LAG_S = 5.0


def _p(text: str) -> StepParser:
    """A step sentence with typed fields: ``{limit:Limit}``, ``{count:d}``, ``{protocol:w}``."""
    return parsers.parse(text, extra_types=TYPES)


# -- helpers ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _waiting(what: str, seconds: float) -> Iterator[None]:
    with allure.step(f"wait up to {seconds:g}s: {what}"):
        yield


@contextlib.contextmanager
def _within(limit: Limit, budgets: Budgets, what: str | Callable[[], str]) -> Iterator[float]:
    """Resolve ``limit`` to seconds and run the body, given them, inside the Allure step
    "wait up to <seconds>s: ``what``". A callable ``what`` (a label that reads the one node
    or the one subject pod) is called only once the limit is resolved."""
    seconds = limit.seconds(budgets)
    with _waiting(what if isinstance(what, str) else what(), seconds):
        yield seconds


def _stopped_blocking(timeline: Timeline, pods: Sequence[PodInfo], budgets: Budgets) -> None:
    """The start of rescheduling: every lost pod Terminating or gone (waited for within the
    recovery budget, so an expectation placed right after the failure waits for eviction)."""
    with _waiting("the lost pods Terminating or gone", budgets.recovery):
        starts.lost_pods_stopped_blocking(timeline, pods, budgets.recovery)


def _lost(outage: Outage, *, stateless_only: bool = False) -> list[PodInfo]:
    """The lost pods whose controllers replace them elsewhere (DaemonSet pods apart)."""
    pods = [p for p in outage.lost if p.replaced_elsewhere]
    return [p for p in pods if p.stateless] if stateless_only else pods


def _about(
    request: pytest.FixtureRequest,
    outage: Outage,
    pods: Subject,
    workloads: Sequence[Workload],
    plural: str,
) -> Sequence[PodInfo]:
    """The lost pods a step is about: all of them, or the one its subject phrase names
    (``plural``: the step's form for every lost pod, named when the phrase is ambiguous)."""
    if pods is Subject.LOST:
        return _lost(outage)
    return (_subject(request, outage, pods, workloads, plural),)


def _subject(
    request: pytest.FixtureRequest,
    outage: Outage,
    pods: Subject,
    workloads: Sequence[Workload],
    plural: str,
) -> PodInfo:
    """The one lost pod "the member" / "the singleton" stands for, whatever chose the nodes
    (:mod:`harness.scenario.subjects`): several are a harness error naming ``plural``, none
    one naming the Givens that provide such a pod."""
    return subjects.resolve(outage, pods.kind, workloads, step=current_step(request), plural=plural)


def _members(outage: Outage, workloads: Sequence[Workload]) -> Sequence[PodInfo]:
    """Every lost StatefulSet member (the chosen one first, if the target step chose one);
    none is a harness error naming the Givens that provide one."""
    found = subjects.candidates(outage, subjects.SubjectKind.MEMBER, workloads)
    if not found:
        raise NothingToMeasure(
            f"no StatefulSet member ran on the lost nodes ({', '.join(outage.nodes)})"
        )
    return found


def _workload(baseline: Baseline, pod: PodInfo) -> Workload:
    return next(
        w for w in baseline.workloads if w.namespace == pod.namespace and w.key == pod.workload
    )


def _chosen(t: Targets) -> Targets:
    # excluded from the history id: the nodes chosen may differ from run to run
    allure.dynamic.parameter("nodes", ", ".join(t.nodes), excluded=True)
    allure.dynamic.parameter("why these nodes", t.why, excluded=True)
    return t


def _select(
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
    rng: random.Random,
    seed: int,
    amount: Amount,
    **filters: Any,
) -> Targets:
    return _chosen(
        choose.select_targets(
            inventory, observer, kube, workloads, rng=rng, seed=seed, amount=amount, **filters
        )
    )


def _worker_running(
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
    **how: Any,
) -> Targets:
    return _chosen(choose.worker_running(inventory, observer, kube, workloads, **how))


def _probe_outage(
    probe: str,
    what: str,
    limit: Limit,
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    seconds = limit.seconds(budgets)
    longest_outage(probe, what, seconds, outage.sent, timeline, measurements)


# -- Given -----------------------------------------------------------------------------------


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
    return _worker_running(
        inventory,
        observer,
        kube,
        workloads,
        subject=lambda p: p.kind == "StatefulSet" and bool(p.pvs),
        why="a StatefulSet member with a ReadWriteOnce volume",
    )


@given(
    "a worker node running a singleton Deployment pod with a ReadWriteOnce volume",
    target_fixture="targets",
)
def worker_with_singleton(
    inventory: Inventory, observer: Observer, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """The busiest worker running the pod of an inventory Deployment with one replica and a
    ReadWriteOnce volume ("the singleton")."""
    single = {(w.namespace, w.key) for w in workloads if w.kind == "Deployment" and w.desired == 1}
    return _worker_running(
        inventory,
        observer,
        kube,
        workloads,
        subject=lambda p: (p.namespace, p.workload) in single and bool(p.pvs),
        why="a singleton Deployment pod with a ReadWriteOnce volume",
    )


@given(
    "a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod",
    target_fixture="targets",
)
def worker_with_pdb_pods(
    inventory: Inventory, observer: Observer, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """The busiest worker running a pod of a workload with a PodDisruptionBudget and a pod of
    an inventory DaemonSet."""
    protected = {(w.namespace, w.key) for w in workloads if w.pdb is not None}
    return _worker_running(
        inventory,
        observer,
        kube,
        workloads,
        subject=lambda p: (p.namespace, p.workload) in protected,
        also=lambda p: p.kind == "DaemonSet",
        why="pods protected by a PodDisruptionBudget and a DaemonSet pod",
    )


@given("a worker node running a DaemonSet pod", target_fixture="targets")
def worker_with_daemonset_pod(
    inventory: Inventory, observer: Observer, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """The quietest worker (fewest other pods) running a pod of an inventory DaemonSet."""
    return _worker_running(
        inventory,
        observer,
        kube,
        workloads,
        subject=lambda p: p.kind == "DaemonSet",
        why="a DaemonSet pod",
        prefer_busy=False,
    )


@given("a control-plane node", target_fixture="targets")
def control_plane_node(inventory: Inventory, observer: Observer) -> Targets:
    """The first (by name) of at least three Ready control-plane nodes."""
    return _chosen(choose.control_plane_node(inventory, observer))


@given("every node of the rack running the most critical pods", target_fixture="targets")
def busiest_rack(
    inventory: Inventory, kube: KubeClient, workloads: tuple[Workload, ...]
) -> Targets:
    """Every node (control plane included) of the rack running the most pods of critical
    workloads."""
    return _chosen(choose.busiest_rack(inventory, workload_pods(kube, workloads), workloads))


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
    pods = workload_pods(kube, workloads)
    return _chosen(choose.third_of_workers(inventory, observer, pods, workloads))


@given(_p("every critical workload has Ready replicas in at least {count:d} racks"))
def critical_spread(
    count: int, inventory: Inventory, timeline: Timeline, baseline: Baseline
) -> None:
    """The Ready pods of every critical Deployment and StatefulSet run in >= count racks."""
    racks = {n.name: n.rack or "(no rack)" for n in inventory.nodes}
    for w in baseline.workloads:
        if w.critical and w.kind != "DaemonSet":
            m = spread_over_racks(timeline, w.namespace, w.key, racks=racks, min_racks=count)
            allure.dynamic.parameter(f"{w.ref} racks", m.detail.get("racks"), excluded=True)


# -- Given: targets by count, fraction, range, name, role, rack, label -------------------------


@given(_p("{amount:Amount} worker nodes"), target_fixture="targets")
@given(_p("{amount:Amount} worker node"), target_fixture="targets")
@given(_p("{amount:Amount} of the worker nodes"), target_fixture="targets")
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
    return _select(
        inventory, observer, kube, workloads, rng, seed_of(pytestconfig), amount, role="worker"
    )


@given(_p("{amount:Amount} control-plane nodes"), target_fixture="targets")
@given(_p("{amount:Amount} control-plane node"), target_fixture="targets")
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
    return _select(
        inventory,
        observer,
        kube,
        workloads,
        rng,
        seed_of(pytestconfig),
        amount,
        role="control-plane",
    )


@given(_p("{amount:Amount} nodes of rack {rack}"), target_fixture="targets")
@given(_p("{amount:Amount} node of rack {rack}"), target_fixture="targets")
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
    return _select(
        inventory, observer, kube, workloads, rng, seed_of(pytestconfig), amount, rack=rack
    )


@given(_p("{amount:Amount} nodes labelled {selector}"), target_fixture="targets")
@given(_p("{amount:Amount} node labelled {selector}"), target_fixture="targets")
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
    return _select(
        inventory,
        observer,
        kube,
        workloads,
        rng,
        seed_of(pytestconfig),
        amount,
        label_selector=selector.strip().strip('"'),
    )


@given(_p("the node {names}"), target_fixture="targets")
@given(_p("the nodes {names}"), target_fixture="targets")
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
    return _select(
        inventory,
        observer,
        kube,
        workloads,
        rng,
        seed_of(pytestconfig),
        Amount.parse("all"),
        names=parse_names(names),
    )


@given(_p("a token is written to each volume of {names}"), target_fixture="tokens")
@inventory_names(names="workloads")
def tokens_written(
    names: str, kube: KubeClient, baseline: Baseline, measurements: Measurements
) -> Tokens:
    """The data check's first half: a fresh token on each data volume of every ready pod of
    the inventory workloads named (``of quorum and singleton``), read back at once."""
    return write_tokens_of(kube, baseline.workloads, parse_names(names), measurements)


@given("the API is probed through the cluster endpoint", target_fixture="api_probed")
def api_is_probed(api_probes: list[ApiProber]) -> list[ApiProber]:
    """GET /readyz and a quorum read (GET a namespace) through the kubeconfig's server, four
    times a second, until the scenario ends. Put it before the failure: "the API answered
    ..." and "etcd kept its quorum ..." judge these probes' samples from the failure on."""
    return api_probes


# -- When: power -----------------------------------------------------------------------------


@when("the node loses power", target_fixture="outage")
@when("the nodes lose power at once", target_fixture="outage")
def lose_power(
    session: Session,
    targets: Targets,
    observer: Observer,
    budgets: Budgets,
    measurements: Measurements,
) -> Outage:
    """Forced power-off of every chosen node in parallel through its primary power driver;
    returns once each BMC confirmed the new state (within power-ack + power-state-verify)."""
    return phases.power_off(session, targets, observer, budgets, measurements)


@when(_p("the node loses power through {protocol:w}"), target_fixture="outage")
def lose_power_through(
    protocol: str,
    session: Session,
    inventory: Inventory,
    targets: Targets,
    observer: Observer,
    budgets: Budgets,
    measurements: Measurements,
) -> Outage:
    """Forced power-off through ``protocol`` (ipmi, redfish or ssh); skips when the node's
    inventory entry offers no such way."""
    offered = available_protocols(inventory.node(targets.node))
    if protocol not in offered:
        pytest.skip(f"node {targets.node} has no {protocol} power control ({', '.join(offered)})")
    return phases.power_off(session, targets, observer, budgets, measurements, protocol=protocol)


@when("the node is shut down gracefully", target_fixture="outage")
@when("the nodes are shut down gracefully", target_fixture="outage")
def shut_down_gracefully(
    session: Session,
    targets: Targets,
    observer: Observer,
    budgets: Budgets,
    measurements: Measurements,
) -> Outage:
    """Graceful shutdown (GracefulShutdown, ACPI soft-off) of every chosen node in parallel
    through its BMC (a rack can be shut down gracefully)."""
    return phases.power_off(session, targets, observer, budgets, measurements, graceful=True)


@when("the node is powered on again", target_fixture="powered_on")
@when("the nodes are powered on again", target_fixture="powered_on")
def power_on_again(
    session: Session, targets: Targets, budgets: Budgets, measurements: Measurements
) -> PoweredOn:
    """Power the chosen nodes on through their BMC (SSH cannot power on); a Node object
    deleted earlier is re-created if the node did not re-register it."""
    return phases.power_on(session, targets, budgets, measurements)


# -- When: partition, kubelet stop, reboot ---------------------------------------------------


@when(_p("the node is cut off from the network for {limit:Limit}"), target_fixture="outage")
@when(_p("the nodes are cut off from the network for {limit:Limit}"), target_fixture="outage")
def cut_off_network(
    limit: Limit,
    session: Session,
    targets: Targets,
    observer: Observer,
    budgets: Budgets,
) -> Outage:
    """Network partition: every chosen node keeps running (its BMC reads On, its pods keep
    running and writing) but is cut off from the API server. The heal is armed on the node
    itself before the cut and runs after the limit at the latest (``recover`` heals too);
    skips when the node's drivers cannot partition it (SSH can; IPMI and Redfish cannot)."""
    return phases.cut(
        session, targets, observer, FailureKind.PARTITION, undo_after_s=limit.seconds(budgets)
    )


@when(_p("the node's kubelet is stopped for {limit:Limit}"), target_fixture="outage")
@when(_p("the nodes' kubelets are stopped for {limit:Limit}"), target_fixture="outage")
def stop_kubelets(
    limit: Limit,
    session: Session,
    targets: Targets,
    observer: Observer,
    budgets: Budgets,
) -> Outage:
    """The kubelet of every chosen node stops (containers keep running); its restart is
    armed on the node first and runs after the limit at the latest. Skips when the node's
    drivers cannot do it."""
    return phases.cut(
        session, targets, observer, FailureKind.KUBELET_STOP, undo_after_s=limit.seconds(budgets)
    )


@when("the node is reconnected", target_fixture="powered_on")
@when("the nodes are reconnected", target_fixture="powered_on")
@when("the node's kubelet is started again", target_fixture="powered_on")
@when("the nodes' kubelets are started again", target_fixture="powered_on")
def undo_cut(session: Session, outage: Outage) -> PoweredOn:
    """Heal the partition (or start the kubelets) now, before the armed undo would; the
    phases that follow (Ready again) measure from this request."""
    return phases.uncut(session, outage)


@when("the node is rebooted", target_fixture="powered_on")
@when("the nodes are rebooted", target_fixture="powered_on")
@also_provides("outage")
def reboot_nodes(
    request: pytest.FixtureRequest,
    session: Session,
    targets: Targets,
    observer: Observer,
    measurements: Measurements,
) -> PoweredOn:
    """Power-cycle every chosen node through its power driver (off, then on again at once:
    for one node the BMC's own reset), in parallel; returns once each reads back as on
    (a BMC reads On while the server boots; its kubelet comes back later). Provides both
    the failure ("NotReady within" measures from the power going off) and the return
    ("Ready within" measures from the power-on request)."""
    rebooted = phases.reboot(session, targets, observer, measurements)
    _provide(request, "outage", rebooted.outage)
    return rebooted.back


# -- When: the generic failure step, in the spirit of Dell's resiliency suite ------------------


def _dell(workers: str, primary: str) -> StepParser:
    return _p(
        f"I fail {{workers:Amount}} {workers} and {{primary:Amount}} {primary} with "
        "{failure:Failure} failure for {limit:Limit}"
    )


@when(_dell("worker nodes", "primary nodes"), target_fixture="outage")
@when(_dell("worker node", "primary nodes"), target_fixture="outage")
@when(_dell("worker nodes", "primary node"), target_fixture="outage")
@when(_dell("worker node", "primary node"), target_fixture="outage")
@also_provides("targets", "powered_on")
def fail_nodes(
    workers: Amount,
    primary: Amount,
    failure: FailureKind,
    limit: Limit,
    request: pytest.FixtureRequest,
    session: Session,
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
    rng: random.Random,
    budgets: Budgets,
    measurements: Measurements,
) -> Outage:
    """Draw the workers and the primary (control-plane) nodes (counts as words or digits,
    fractions such as ``one-third``, ranges such as ``1-2`` drawn from the seed), fail them
    all at once with ``power``, ``graceful``, ``reboot``, ``partition`` or ``kubelet``,
    hold the failure for the limit, then bring them back (power on, heal, start the
    kubelet). Provides the chosen nodes, the failure and the return, so every later step
    can follow it.

    What "for N seconds" holds: the power off (``power``, ``graceful``: from the
    power-off's read-back to the power-on request), the cut (``partition``, ``kubelet``),
    and for ``reboot`` the power off within one power cycle: each node is powered off, held
    off N seconds from the read-back, and powered on by the step, through its power driver
    (a BMC, the kind driver, the lab's BMCs alike; a driver that cannot power on, SSH,
    fails the step). The node then boots by itself: Kubernetes sees it gone for N seconds
    plus its boot, and the step does not wait for that. "NotReady within" measures from
    the power going off, "Ready within" from the power-on request (so it holds the boot;
    the lab's nodes boot in ``lab up --boot-seconds``)."""
    kind = failure
    seed = seed_of(request.config)
    with session.timeline.ledger.part("target choice"):
        targets = _chosen(
            choose.select_by_role(
                inventory,
                observer,
                kube,
                workloads,
                rng=rng,
                seed=seed,
                amounts={"worker": workers, "control-plane": primary},
                nothing=f"{workers.text} workers and {primary.text} primaries",
            )
        )
    with session.timeline.ledger.part(f"{kind.value} failure and return"):
        outage, back = phases.fail(
            session,
            targets,
            observer,
            budgets,
            measurements,
            kind,
            hold_s=limit.seconds(budgets),
        )
    _provide(request, "targets", targets)
    _provide(request, "powered_on", back)
    return outage


def _provide(request: pytest.FixtureRequest, name: str, value: object) -> None:
    """What a step provides besides its ``target_fixture``."""
    inject_fixture(request, name, value)
    request.node.stash.setdefault(PROVIDED, set()).add(name)


# -- When: the repopulation runbook (after an etcd rebuild) ----------------------------------


@when(
    _p("the pods labelled {selector} in namespace {namespace} are restarted"),
    target_fixture="restarted",
)
def restart_pods_by_selector(selector: str, namespace: str, session: Session) -> phases.Restarted:
    """Delete the pods the label selector matches so their controllers re-create them (the
    repopulation runbook's "restart pods by selector"). Skips when none matches."""
    return phases.restart_pods(session, namespace.strip(), selector.strip().strip('"'))


@then(_p("the restarted pods are replaced by Ready pods within {limit:Limit}"))
def restarted_pods_ready(
    limit: Limit,
    restarted: phases.Restarted,
    timeline: Timeline,
    kube: KubeClient,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """As many new Ready pods match the selector as were restarted (none of them one of the
    deleted pods, by uid), measured from the restart request."""
    with _within(limit, budgets, f"{restarted.selector} Ready again") as seconds:
        phases.restarted_ready(timeline, kube, restarted, seconds, measurements)


@when(
    _p("the Job {name} in namespace {namespace} is re-run from its manifest"),
    target_fixture="rerun",
)
def rerun_job(name: str, namespace: str, session: Session, budgets: Budgets) -> jobs.Rerun:
    """Delete the Job (propagation Background: its pods go too) and create it again from
    the manifest stored in the journal before the delete (the repopulation runbook's "re-run
    the Jobs"), within the job-rerun budget. Skips when there is no such Job."""
    seconds = budgets.job_rerun
    with _waiting(f"Job {namespace.strip()}/{name.strip()} re-run", seconds):
        return jobs.rerun(session, namespace.strip(), name.strip(), seconds)


@then(_p("the Job {name} completes within {limit:Limit}"))
def job_completes(
    name: str,
    limit: Limit,
    rerun: jobs.Rerun,
    timeline: Timeline,
    kube: KubeClient,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The re-run Job (the new one, by uid) has its Complete condition, measured from its
    re-creation; a Failed condition fails at once."""
    if name.strip() != rerun.name:
        raise ConfigError(
            f"the Job {name.strip()!r} was not re-run in this scenario (re-run: {rerun.ref})",
            field="scenario",
        )
    with _within(limit, budgets, f"Job {rerun.ref} complete") as seconds:
        jobs.completes(timeline, kube, rerun, seconds, measurements)


# -- When: operator actions ------------------------------------------------------------------


@when("the Node object is deleted", target_fixture="resolution")
@when("the Node objects are deleted", target_fixture="resolution")
def delete_node_object(session: Session, targets: Targets) -> Transition:
    """Delete the Node object of every chosen node (undo: re-create it from its manifest)."""
    return operator.delete_nodes(session, targets.nodes)


@when("the node's stuck pods are force-deleted", target_fixture="resolution")
@when("the nodes' stuck pods are force-deleted", target_fixture="resolution")
def force_delete_stuck_pods(session: Session, targets: Targets, outage: Outage) -> Transition:
    """Delete every non-DaemonSet pod bound to each chosen node with grace period 0; on a
    node that is not Ready, only once its BMC confirmed power OFF."""
    return operator.force_delete_pods(session, targets.nodes, outage)


@when("the node is tainted out-of-service", target_fixture="resolution")
@when("the nodes are tainted out-of-service", target_fixture="resolution")
def taint_out_of_service(session: Session, targets: Targets) -> Transition:
    """Add node.kubernetes.io/out-of-service=nodeshutdown:NoExecute to every chosen node,
    each once its BMC confirmed power OFF (undo: remove it)."""
    return operator.taint_out_of_service(session, targets.nodes)


@when("the out-of-service taint is removed")
@when("the out-of-service taints are removed")
def remove_out_of_service_taint(session: Session, targets: Targets) -> None:
    """Remove the out-of-service taint from every chosen node (do it only once they are
    back)."""
    operator.remove_out_of_service_taint(session, targets.nodes)


@when(_p("the node is drained within {limit:Limit}"), target_fixture="drained")
@when(_p("the nodes are drained within {limit:Limit}"), target_fixture="drained")
def drain_node(
    limit: Limit,
    session: Session,
    targets: Targets,
    budgets: Budgets,
    measurements: Measurements,
) -> DrainResult:
    """Drain every chosen node in turn: cordon, evict every pod through the Eviction API (a
    PodDisruptionBudget's 429 is retried with backoff), skip DaemonSet pods, wait until the
    evicted pods are gone; all within the limit (undo: uncordon)."""
    with _within(limit, budgets, lambda: "drain " + ", ".join(targets.nodes)) as seconds:
        deadline = time.monotonic() + seconds
        return operator.drain(session, targets.nodes, deadline, measurements, seconds)


@when("the node is cordoned")
@when("the nodes are cordoned")
def cordon_nodes(session: Session, targets: Targets) -> None:
    """Mark every chosen node unschedulable (undo: uncordon)."""
    operator.cordon(session, targets.nodes)


@when("the node is uncordoned")
@when("the nodes are uncordoned")
def uncordon_node(session: Session, targets: Targets) -> None:
    """Mark every chosen node schedulable again."""
    operator.uncordon(session, targets.nodes)


# -- Then: nodes -----------------------------------------------------------------------------


@then(_p("the node is NotReady within {limit:Limit}"))
@then(_p("every lost node is NotReady within {limit:Limit}"))
def nodes_not_ready(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """Each node's Ready condition turns False or Unknown, measured from its BMC's power-off
    acknowledgement (a reboot's: its power cycle's power-off, or for a BMC's own reset the
    cycle's acknowledgement). A node that never goes NotReady fails the scenario."""
    with _within(limit, budgets, "NotReady: " + ", ".join(outage.nodes)) as seconds:
        phases.nodes_not_ready(timeline, outage, seconds, measurements)


@then(_p("the node is tainted unreachable within {limit:Limit}"))
@then(_p("every lost node is tainted unreachable within {limit:Limit}"))
def nodes_tainted_unreachable(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """The node.kubernetes.io/unreachable:NoExecute taint, measured from NotReady. Tainting is
    rate-limited per zone (one node per 10 s upstream), so the k-th node of a rack to be
    tainted gets the limit plus 10 * (k - 1) seconds, as the taint-applied budget documents."""
    seconds = limit.seconds(budgets)
    most = seconds + phases.ZONE_TAINT_INTERVAL_S * (len(outage.nodes) - 1)
    with _waiting("unreachable taint: " + ", ".join(outage.nodes), most):
        phases.nodes_tainted(timeline, outage, seconds, measurements, budgets)


@then(_p("the Node object is gone within {limit:Limit}"))
@then(_p("every lost Node object is gone within {limit:Limit}"))
def node_object_gone(
    limit: Limit,
    resolution: Transition,
    targets: Targets,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each chosen node's Node object disappears, measured from its delete request."""
    what = "Node deleted: " + ", ".join(targets.nodes)
    with _within(limit, budgets, what) as seconds:
        for node in targets.nodes:
            sent = L.last_action(timeline, node, {Act.DELETE_NODE.at(Stage.SENT)}) or resolution
            phases.node_gone(timeline, node, sent, seconds, measurements)


@then(_p("the node is Ready within {limit:Limit}"))
@then(_p("every lost node is Ready within {limit:Limit}"))
def nodes_ready_again(
    limit: Limit,
    powered_on: PoweredOn,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each node's Ready condition turns True, measured from its power-on request (after a
    deletion: the re-registered Node turns Ready). A node that never went NotReady (a cut
    or reboot shorter than the node monitor's grace period) is Ready at once (0 s, noted):
    put "NotReady within" before the return to require the transition."""
    with _within(limit, budgets, "Ready: " + ", ".join(powered_on.nodes)) as seconds:
        phases.nodes_ready(timeline, powered_on, seconds, measurements)


@then(_p("the node no longer has the out-of-service taint within {limit:Limit}"))
@then(_p("no lost node has the out-of-service taint within {limit:Limit}"))
def out_of_service_taint_gone(
    limit: Limit,
    targets: Targets,
    powered_on: PoweredOn,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The out-of-service taint was removed from each chosen node after it powered on (not
    before), and the Node no longer carries it, measured from the removal request."""
    unremoved = [
        n for n in targets.nodes if L.last_action(timeline, n, {Act.UNTAINT.at(Stage.SENT)}) is None
    ]
    if unremoved:  # the feature never asked: a harness error, not the cluster's failure
        raise MissingStep(
            f"the out-of-service taint gone from {', '.join(unremoved)}",
            "the out-of-service taint's removal",
            [
                "When the out-of-service taint is removed",
                "When the out-of-service taints are removed",
            ],
        )
    what = "out-of-service taint gone from " + ", ".join(targets.nodes)
    with _within(limit, budgets, what) as seconds:
        for node in targets.nodes:
            phases.out_of_service_removed(timeline, node, powered_on, seconds, measurements)


# -- Then: pods ------------------------------------------------------------------------------


@then(_p("the node's pods are Terminating within {limit:Limit}"))
@then(_p("every lost node's pods are Terminating within {limit:Limit}"))
def pods_terminating(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """Every non-DaemonSet pod on each lost node gets a deletionTimestamp, measured from the
    node's unreachable NoExecute taint (their tolerations run out), which it waits for
    first. Skipped when no pod of an inventory workload ran on the lost nodes."""
    with _within(limit, budgets, "pods Terminating on " + ", ".join(outage.nodes)) as seconds:
        phases.pods_terminating(timeline, outage, seconds, measurements, budgets)


@then(_p("{pod:One} is Terminating within {limit:Limit}"))
def subject_terminating(
    pod: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    outage: Outage,
    workloads: tuple[Workload, ...],
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The pod the scenario is about ("the member", "the singleton") gets a
    deletionTimestamp, measured from its node's unreachable NoExecute taint, which it waits
    for first."""
    plural = "Then every lost node's pods are Terminating within <limit>"
    one = _subject(request, outage, pod, workloads, plural)
    with _within(limit, budgets, f"{one.ref} Terminating") as seconds:
        phases.subject_terminating(timeline, outage, one, seconds, measurements, budgets)


@then(_p("the lost pods are deleted within {limit:Limit}"))
def lost_pods_deleted(
    limit: Limit,
    outage: Outage,
    resolution: Transition,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Every lost pod is gone from the API, measured from the operator's action (Node
    deleted, pods force-deleted, out-of-service taint)."""
    with _within(limit, budgets, "the lost pods deleted") as seconds:
        phases.pods_deleted(timeline, _lost(outage), resolution, seconds, measurements)


@then(_p("{pods:Pods} is rescheduled on another node within {limit:Limit}"))
def lost_pods_rescheduled(
    pods: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """A replacement of every lost pod (or of the singleton) is scheduled on a node that is
    not lost, measured from when the lost pod stopped blocking it (Deployment: Terminating;
    StatefulSet: gone). Scheduled, not Ready: a replacement that needs a volume the dead
    node holds cannot start yet."""
    plural = "Then every lost pod is rescheduled on another node within <limit>"
    about = _about(request, outage, pods, workloads, plural)
    _stopped_blocking(timeline, about, budgets)
    with _within(limit, budgets, "replacements scheduled") as seconds:
        phases.rescheduled(timeline, about, outage, seconds, measurements)


@then(_p("every lost pod is replaced by a Ready pod on another node within {limit:Limit}"))
def lost_pods_replaced_ready(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """Every lost pod's replacement is Ready on a node that is not lost, measured from when
    the lost pod stopped blocking it (Deployment: Terminating; StatefulSet: gone)."""
    _stopped_blocking(timeline, _lost(outage), budgets)
    with _within(limit, budgets, "replacements Ready") as seconds:
        phases.replaced_by_ready(timeline, _lost(outage), outage, seconds, measurements)


@then(
    _p("every lost stateless pod is replaced by a Ready pod on another node within {limit:Limit}")
)
def lost_stateless_pods_replaced_ready(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """As above, for the lost pods without a ReadWriteOnce volume (StatefulSet members and
    pods whose volume the dead node holds must wait). None lost: nothing to judge, skips."""
    _stopped_blocking(timeline, _lost(outage, stateless_only=True), budgets)
    with _within(limit, budgets, "stateless replacements Ready") as seconds:
        phases.replaced_by_ready(
            timeline, _lost(outage, stateless_only=True), outage, seconds, measurements
        )


@then(_p("{pods:Pods_} replacement is Ready within {limit:Limit}"))
def replacements_ready(
    pods: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each replacement (of every lost pod, or of the singleton) is Ready, measured from
    when it could start: scheduled and, if it mounts a ReadWriteOnce volume, that volume
    attached to its node."""
    plural = "Then every lost pod's replacement is Ready within <limit>"
    about = _about(request, outage, pods, workloads, plural)
    with _waiting("replacements scheduled, their volumes attached", budgets.recovery):
        starts.replacement_volumes_attached(timeline, about, outage, budgets.recovery)
    with _within(limit, budgets, "replacements Ready") as seconds:
        phases.replacement_ready(timeline, about, outage, seconds, measurements)


# -- Then: volumes ---------------------------------------------------------------------------


@then(_p("{pods:Volumes} reports a Multi-Attach error within {limit:Limit}"))
def lost_volumes_multi_attach(
    pods: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """For each ReadWriteOnce volume the lost node held (of every lost pod, or of the
    singleton), the replacement pod gets a "Multi-Attach error" event, measured from when
    the lost pod stopped blocking it; the messages are attached to the report."""
    plural = (
        "Then every ReadWriteOnce volume of a lost pod reports a Multi-Attach error within <limit>"
    )
    about = _about(request, outage, pods, workloads, plural)
    held = [p for p, _ in L.held_volumes(timeline, about, outage.sent.mono)]
    with _waiting("replacements of the pods holding a volume scheduled", budgets.recovery):
        starts.replacements_scheduled(timeline, held, outage, budgets.recovery)
    with _within(limit, budgets, "Multi-Attach errors") as seconds:
        phases.multi_attach(timeline, about, outage, seconds, measurements)


@then(_p("the node still holds {pods:Volumes}"))
def node_still_holds_volumes(
    pods: Subject,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    measurements: Measurements,
) -> None:
    """Each ReadWriteOnce volume the lost node held at the failure (of every lost pod, or the
    singleton's) is still attached to it now: no VolumeAttachment of it on that node was
    detached or deleted since. What a powered-off node's volumes do in Kubernetes until the
    node returns, its pods are deleted (then the 6-minute force detach) or it is declared
    out of service. How long each was held since the failure is recorded."""
    plural = "Then the node still holds the ReadWriteOnce volumes of the lost pods"
    about = _about(request, outage, pods, workloads, plural)
    phases.still_held(timeline, about, outage, measurements)


@then(_p("the node releases {pods:Volumes} within {limit:Limit}"))
def node_releases_volumes(
    pods: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The lost node's VolumeAttachment of each ReadWriteOnce volume it held is detached or
    deleted, measured from the deletion of the pod that held it (the attach/detach
    controller cannot let go before): with the volume-detach budget this is its 6-minute
    force detach, with the volume-detach-out-of-service budget the out-of-service taint's
    immediate one. Of every lost pod, or the singleton's volume."""
    plural = "Then the node releases every ReadWriteOnce volume of a lost pod within <limit>"
    about = _about(request, outage, pods, workloads, plural)
    with _waiting("the pods holding a volume deleted", budgets.recovery):
        starts.held_pods_deleted(timeline, about, outage, budgets.recovery)
    with _within(limit, budgets, "volumes released by " + ", ".join(outage.nodes)) as seconds:
        phases.released(timeline, about, outage, seconds, measurements)


@then(_p("{pods:Volumes} is attached to its replacement's node within {limit:Limit}"))
def lost_volumes_reattached(
    pods: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each ReadWriteOnce volume the lost node held (of every lost pod, or the singleton's)
    is attached to the node of its pod's replacement, measured from its release by the lost
    node."""
    plural = (
        "Then every ReadWriteOnce volume of a lost pod is attached to its replacement's node "
        "within <limit>"
    )
    about = _about(request, outage, pods, workloads, plural)
    with _waiting("the held volumes released by the lost nodes", budgets.recovery):
        starts.held_volumes_released(timeline, about, outage, budgets.recovery)
    with _within(limit, budgets, "volumes re-attached") as seconds:
        phases.reattached(timeline, about, outage, seconds, measurements)


# -- Then: StatefulSet members ---------------------------------------------------------------


def _member_or_members(
    request: pytest.FixtureRequest,
    outage: Outage,
    workloads: Sequence[Workload],
    every: bool,
    plural: str,
) -> Sequence[PodInfo]:
    """``every``: every lost member (none: nothing to judge, skip); else the one "the
    member" stands for (several: a harness error naming ``plural``)."""
    if every:
        return _members(outage, workloads)
    return (_subject(request, outage, Subject.MEMBER, workloads, plural),)


@then(_p("the member stays Terminating for {limit:Limit}"))
@then(_p("every lost member stays Terminating for {limit:Limit}"))
def member_stays_terminating(
    limit: Limit,
    request: pytest.FixtureRequest,
    outage: Outage,
    workloads: tuple[Workload, ...],
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The StatefulSet member (or every lost one) stays Terminating (never deleted) for the
    whole limit, counted from when it became Terminating: nothing may give up on it while
    its node is away."""
    seconds = limit.seconds(budgets)
    every = current_step(request).split(" ", 1)[-1].startswith("every")
    plural = "Then every lost member stays Terminating for <limit>"
    for pod in _member_or_members(request, outage, workloads, every, plural):
        since = L.pod_event(timeline, pod, {"terminating"})
        if since is None:
            raise CheckFailed(f"{pod.ref} Terminating first", "not Terminating", 0.0)
        with _waiting(f"{pod.ref} still Terminating", seconds):
            m = still_terminating(timeline, pod.namespace, pod.name, since=since, hold_s=seconds)
        measurements.record(
            f"{pod.ref} held Terminating", m.duration_s, None, started_mono=m.started_mono
        )


@then("no second copy of the member was started")
@then("no second copy of any lost member was started")
def no_second_member(
    request: pytest.FixtureRequest,
    outage: Outage,
    workloads: tuple[Workload, ...],
    timeline: Timeline,
    baseline: Baseline,
) -> None:
    """While the lost member (or each lost member) existed no other pod had its name, and
    its StatefulSet never had more pods than replicas."""
    every = "any lost member" in current_step(request)
    plural = "Then no second copy of any lost member was started"
    for pod in _member_or_members(request, outage, workloads, every, plural):
        phases.no_second_member(timeline, outage, pod, _workload(baseline, pod))


@then("the StatefulSet kept a majority of its members Ready throughout")
def statefulset_quorum_kept(
    outage: Outage, timeline: Timeline, baseline: Baseline, measurements: Measurements
) -> None:
    """A majority (replicas // 2 + 1) of the lost member's StatefulSet was Ready from the
    power-off until now (of each StatefulSet that lost a member)."""
    members = _members(outage, baseline.workloads)
    now = timeline.clock.monotonic()
    for ref in dict.fromkeys((p.namespace, p.workload) for p in members):
        w = _workload(baseline, next(p for p in members if (p.namespace, p.workload) == ref))
        m = quorum_kept(
            timeline, w.namespace, w.name, replicas=w.desired, start=outage.sent, end=now
        )
        measurements.note(f"{w.ref} fewest Ready", m.detail.get("lowest"))


@then(_p("the member is re-created and Ready within {limit:Limit}"))
@then(_p("every lost member is re-created and Ready within {limit:Limit}"))
def member_recreated(
    limit: Limit,
    request: pytest.FixtureRequest,
    outage: Outage,
    workloads: tuple[Workload, ...],
    powered_on: PoweredOn,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The lost member (or each) is deleted only once its node is back, and a new pod with
    its name is Ready within the limit of that deletion."""
    every = current_step(request).split(" ", 1)[-1].startswith("every")
    plural = "Then every lost member is re-created and Ready within <limit>"
    pods = _member_or_members(request, outage, workloads, every, plural)
    label = ", ".join(p.ref for p in pods)
    with _within(limit, budgets, f"{label} re-created and Ready") as seconds:
        for pod in pods:
            phases.member_recreated(timeline, outage, pod, powered_on, seconds, measurements)


# -- Then: DaemonSets ------------------------------------------------------------------------


@then(_p("the node's DaemonSet pods are NotReady within {limit:Limit}"))
def daemon_pods_not_ready(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """Each DaemonSet pod of the node turns NotReady, measured from the power-off
    acknowledgement."""
    pods = list(outage.targets.daemon_pods)
    with _within(limit, budgets, "DaemonSet pods NotReady") as seconds:
        timed = L.wait_pod_transitions(
            timeline,
            pods,
            {"not-ready"},
            refs={p.uid: outage.acks[p.node] for p in pods},
            limit_s=seconds,
            what="every DaemonSet pod of the node NotReady",
            check="daemonset-not-ready",
        )
    for t in timed:
        measurements.record(
            f"{t.detail['pod']} NotReady", t.duration_s, seconds, started_mono=t.started_mono
        )


@then(_p("the node's DaemonSet pods are Ready again within {limit:Limit}"))
def daemon_pods_ready_again(
    limit: Limit,
    outage: Outage,
    powered_on: PoweredOn,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """For each DaemonSet that had a pod on the node, a pod of it is Ready on the node after
    the power-on, measured from the power-on request."""
    with _within(limit, budgets, "DaemonSet pods Ready again") as seconds:
        phases.daemon_pods_ready_again(timeline, outage, powered_on, seconds, measurements)


@then("the node's DaemonSet pods were never evicted")
def daemon_pods_not_evicted(outage: Outage, timeline: Timeline) -> None:
    """None of the node's DaemonSet pods got a deletionTimestamp or was deleted."""
    phases.daemon_pods_kept(timeline, outage)


# -- Then: drain -----------------------------------------------------------------------------


@then("every pod of the node was evicted through the Eviction API")
@then("every pod of the nodes was evicted through the Eviction API")
def drain_evicted_all(drained: DrainResult, targets: Targets, timeline: Timeline) -> None:
    """The drain evicted every non-DaemonSet pod of the inventory's workloads on the chosen
    nodes, and each is gone. Nodes that ran none (a count's random choice can draw them)
    give it nothing to judge: skipped, saying so."""
    expected = {p.ref for p in targets.pods}
    if not expected:
        raise NothingToMeasure(
            f"no pod of an inventory workload (DaemonSets apart) ran on "
            f"{', '.join(targets.nodes)}: the drain had nothing to evict"
        )
    missing = sorted(expected - set(drained.evicted))
    if missing:
        raise CheckFailed(
            f"every pod of {drained.node} evicted ({len(expected)} expected)",
            f"not evicted: {', '.join(missing) or 'none'}; evicted: {', '.join(drained.evicted)}",
            drained.duration_s,
        )
    # The drain saw them gone through the API; the observer's watch reports it a moment later.
    seen_by = timeline.clock.monotonic() + OBSERVER_LAG_S
    still = [
        p.ref for p in targets.pods if L.await_pod_event(timeline, p, {"deleted"}, seen_by) is None
    ]
    if still:
        raise CheckFailed("every evicted pod gone", f"still there: {', '.join(still)}", 0.0)
    allure.dynamic.parameter("evicted", ", ".join(drained.evicted), excluded=True)


@then("the node's DaemonSet pods were left running")
@then("the nodes' DaemonSet pods were left running")
def drain_left_daemon_pods(drained: DrainResult, targets: Targets, observer: Observer) -> None:
    """The drain skipped the node's DaemonSet pods, and they still run there."""
    if not targets.daemon_pods:
        raise NothingToMeasure(f"no DaemonSet pod ran on {', '.join(targets.nodes)}")
    for p in targets.daemon_pods:
        now = observer.pod(p.namespace, p.name)
        if drained.skipped.get(p.ref) != "DaemonSet pod":
            raise CheckFailed(
                f"the drain to skip {p.ref}", f"skipped: {dict(drained.skipped) or 'none'}", 0.0
            )
        if now is None or now.uid != p.uid or now.terminating or now.node != p.node:
            raise CheckFailed(f"{p.ref} still running on {p.node}", str(now), 0.0)


@then("no workload went below its PodDisruptionBudget during the drain")
def drain_respected_pdbs(
    drained: DrainResult,
    targets: Targets,
    timeline: Timeline,
    baseline: Baseline,
    measurements: Measurements,
) -> None:
    """From the drain's start to its end, each workload with a PodDisruptionBudget had at
    least the pods its budget wants healthy Ready (status.desiredHealthy)."""
    start, end = operator.drain_window(timeline, targets.nodes)
    protected = [w for w in baseline.workloads if w.pdb_min_healthy is not None]
    if not protected:
        raise NothingToMeasure("no inventory workload has a PodDisruptionBudget")
    for w in protected:
        assert w.pdb_min_healthy is not None
        m = available_throughout(
            timeline, w.namespace, w.key, min_ready=w.pdb_min_healthy, start=start, end=end
        )
        measurements.note(
            f"{w.ref} fewest Ready during the drain (PDB {w.pdb} wants {w.pdb_min_healthy})",
            m.detail.get("lowest"),
        )


# -- Then: services and availability ---------------------------------------------------------


@then(_p("every critical service stayed available, with no outage longer than {limit:Limit}"))
def services_available(
    limit: Limit,
    timeline: Timeline,
    baseline: Baseline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each critical workload's health probe had no run of failures longer than the limit
    since the scenario started; non-critical ones are measured, not judged."""
    seconds = limit.seconds(budgets)
    probed = [w for w in baseline.workloads if w.health is not None]
    if not any(w.critical for w in probed):
        raise NothingToMeasure(
            "no critical inventory workload has a health endpoint (workloads[].health)"
        )
    now = timeline.clock.monotonic()
    for w in probed:
        budget = seconds if w.critical else None
        m = probe_health(
            timeline,
            w.probe,
            start=baseline.at_mono,
            end=now,
            min_success_ratio=0.0,
            max_outage_s=budget,
        )
        measurements.record(
            f"{w.ref} longest outage", m.duration_s, budget, m.detail, started_mono=m.started_mono
        )


@then(_p("every critical workload kept at least {count:d} Ready replica throughout"))
@then(_p("every critical workload kept at least {count:d} Ready replicas throughout"))
def critical_workloads_kept(
    count: int,
    outage: Outage,
    timeline: Timeline,
    baseline: Baseline,
    measurements: Measurements,
) -> None:
    """From the power-off until now, each critical Deployment and StatefulSet had at least
    ``count`` pods Ready and not Terminating."""
    now = timeline.clock.monotonic()
    for w in baseline.workloads:
        if w.critical and w.kind != "DaemonSet":
            m = available_throughout(
                timeline, w.namespace, w.key, min_ready=count, start=outage.sent, end=now
            )
            measurements.note(f"{w.ref} fewest Ready", m.detail.get("lowest"))


@then(_p("the API answered through the cluster endpoint, with no outage longer than {limit:Limit}"))
def api_answered(
    limit: Limit,
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
    api_probed: list[ApiProber],
) -> None:
    """GET /readyz through the cluster endpoint: no run of failures longer than the limit,
    from the power-off until now."""
    _probe_outage(API_PROBE, "API", limit, outage, timeline, budgets, measurements)


@then(_p("etcd kept its quorum, with no failed quorum read for longer than {limit:Limit}"))
def etcd_kept_quorum(
    limit: Limit,
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
    api_probed: list[ApiProber],
) -> None:
    """Quorum reads through the cluster endpoint (GET a namespace, no resourceVersion): no
    run of failures longer than the limit, from the power-off until now."""
    _probe_outage(ETCD_PROBE, "etcd quorum reads", limit, outage, timeline, budgets, measurements)


@then(_p("the API reports every readiness check passing within {limit:Limit}"))
def api_fully_ready(
    limit: Limit,
    powered_on: PoweredOn,
    kube: KubeClient,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
    api_probes: list[ApiProber],
) -> None:
    """GET /readyz answers 200 (every check passing) after the power-on, within the limit;
    the verbose answer is attached. Asked through the cluster endpoint, so any ready API
    server may answer: that the powered-on node's own API server and etcd member are back is
    the step "the node's own API server reports every readiness check passing"."""
    seconds = limit.seconds(budgets)
    ack = powered_on.last_sent
    with _waiting("/readyz passing", seconds):
        ok = timeline.wait_for(
            match(Kind.PROBE, API_PROBE, Change.OK, after=ack),
            ack.mono + seconds,
            "GET /readyz passing after the power-on",
        )
    measurements.record(
        "API ready after power-on", ok.mono - ack.mono, seconds, started_mono=ack.mono
    )
    verbose = kube.request("GET", "/readyz", params={"verbose": "true"})
    allure.attach(
        str(verbose.get("text", verbose)),
        name="readyz?verbose",
        attachment_type=allure.attachment_type.TEXT,
    )


@then(_p("the node's own API server reports every readiness check passing within {limit:Limit}"))
def node_api_ready(
    limit: Limit,
    powered_on: PoweredOn,
    kube: KubeClient,
    inventory: Inventory,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """GET /readyz on each powered-on control-plane node's own API server (its inventory
    ``api_endpoint``, not the cluster endpoint) answers 200 after the power-on, within the
    limit. In kubeadm's stacked layout that server talks to its own etcd member only, so its
    etcd check passing shows the member is back in the quorum."""
    seconds = limit.seconds(budgets)
    ack = powered_on.last_sent
    nodes = [inventory.node(n) for n in powered_on.nodes]
    cps = [n for n in nodes if n.role == "control-plane"]
    if not cps:
        raise ConfigError("no control-plane node was powered on", field="scenario")
    for node in cps:
        if node.api_endpoint is None:
            raise ConfigError(
                f"node {node.name} has no api_endpoint ('https://host:port' of its own API "
                "server), so whether it came back cannot be checked",
                source=str(inventory.source or ""),
                field=f"nodes[{node.name}].api_endpoint",
            )
        name = f"{API_PROBE}@{node.name}"
        prober = ApiProber(kube, timeline, name, server=node.api_endpoint, path="/readyz")
        prober.start()
        try:
            with _waiting(f"{node.name}'s own /readyz passing", seconds):
                ok = timeline.wait_for(
                    match(Kind.PROBE, name, Change.OK, after=ack),
                    ack.mono + seconds,
                    f"GET {node.api_endpoint}/readyz passing after the power-on",
                )
        finally:
            prober.stop()
        measurements.record(
            f"{node.name} API server ready", ok.mono - ack.mono, seconds, started_mono=ack.mono
        )


@then(_p("the cluster is back to steady state within {limit:Limit}"))
def back_to_steady_state(
    limit: Limit,
    inventory: Inventory,
    observer: Observer,
    timeline: Timeline,
    baseline: Baseline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Every node as found (Ready, same cordon flag and taints), every workload fully Ready
    with nothing Terminating, every volume attached once, every service answering; measured
    from the harness's last recorded action (a request or its acknowledgement), whatever it
    was: normally the return (power-on, heal, kubelet start, uncordon, untaint); in a
    scenario with no return step, the failure's own last action (its limit then covers the
    armed heal or kubelet start too); with no action at all, from the steady state found
    at the start."""
    seconds = limit.seconds(budgets)
    last = timeline.last(ACTION)
    start = last.mono if last is not None else baseline.at_mono
    with _waiting("the cluster as the scenario found it", seconds):
        steady.wait_steady(
            inventory,
            observer,
            baseline.workloads,
            timeout_s=max(0.0, start + seconds - time.monotonic()),
            found=baseline.nodes,
            description="the cluster as the scenario found it",
        )
    measurements.record("recovery", time.monotonic() - start, seconds, started_mono=start)


@then(
    _p("every token is read back from its volume within {limit:Limit}"),
    target_fixture="tokens_read_on",
)
def tokens_read_back(
    limit: Limit,
    tokens: Tokens,
    kube: KubeClient,
    budgets: Budgets,
    measurements: Measurements,
) -> dict[str, str]:
    """The data check's second half: each token written before the failure is read back
    from the pod that now holds its volume (the pod mounting the same claim; for an
    emptyDir, the pod of the same name); a lost or different token fails, naming the volume."""
    with _within(limit, budgets, "every token read back from its volume") as seconds:
        return read_back_tokens(kube, tokens, seconds, measurements)


@then("every token of the lost node's volumes was read back on another node")
def tokens_moved(
    tokens: Tokens,
    tokens_read_on: dict[str, str],
    outage: Outage,
    measurements: Measurements,
) -> None:
    """After ``every token is read back``: each token on a claim written by a pod of the
    lost node was read by a pod on another node, so the volume moved with its data (the
    node itself still off, or back). Fails when one was read on the lost node, or when no
    token was written on the lost node at all."""
    moved = moved_off(tokens, tokens_read_on, outage.nodes, [p.name for p in outage.targets.pods])
    measurements.record(
        "data moved to another node", 0.0, None, {"volumes": moved}, started_mono=None
    )
