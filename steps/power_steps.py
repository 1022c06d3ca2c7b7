"""The failures of whole machines and of their links: power off (forced, graceful, through
a named protocol), power on, reboot (a power cycle), network partition and kubelet stop
with their undo, and the Dell-style step that draws nodes by role and fails them with any
of these.

Each step parses its sentence and calls the one dispatch of
:mod:`harness.scenario.acts.disruptions` (through :mod:`harness.scenario.acts.role_failures`
where a choice comes first). The failure is the ``outage`` fixture, the return the ``powered_on``
fixture; the later steps measure from them.
"""

from __future__ import annotations

import random

import pytest
from pytest_bdd import when
from pytest_bdd.parsers import StepParser

from harness.budgets import Budgets
from harness.failures import FailureKind
from harness.inventory import Inventory
from harness.kube.client import KubeClient
from harness.kube.observer import Observer
from harness.scenario.acts import disruptions, role_failures
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage, PoweredOn, Targets
from harness.scenario.targets.select import Amount
from harness.scenario.targets.workloads import Workload
from harness.session import Session
from harness.steps.fixtures import also_provides
from harness.steps.plugin import seed_of
from harness.steps.support.limits import Limit
from harness.steps.support.phrases import phrase, provide


@when("the node loses power", target_fixture="outage")
@when("the node is fenced through its BMC", target_fixture="outage")
@when("the nodes lose power at once", target_fixture="outage")
def lose_power(
    session: Session,
    targets: Targets,
    observer: Observer,
    budgets: Budgets,
    measurements: Measurements,
) -> Outage:
    """Forced power-off of every chosen node in parallel through its primary power driver;
    returns once each BMC confirmed the new state (within power-ack + power-state-verify).
    Fencing a node that still runs (cut off its storage or the network) is the same cut:
    its BMC confirms it OFF, so its pods can be moved without a second writer."""
    return disruptions.power_off(session, targets, observer, budgets, measurements)


@when(phrase("the node loses power through {protocol:w}"), target_fixture="outage")
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
    return role_failures.power_off_through(
        session, inventory, targets, observer, budgets, measurements, protocol
    )


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
    return disruptions.power_off(session, targets, observer, budgets, measurements, graceful=True)


@when("the node is powered on again", target_fixture="powered_on")
@when("the nodes are powered on again", target_fixture="powered_on")
def power_on_again(
    session: Session, targets: Targets, budgets: Budgets, measurements: Measurements
) -> PoweredOn:
    """Power the chosen nodes on through their BMC (SSH cannot power on); a Node object
    deleted earlier is re-created if the node did not re-register it."""
    return disruptions.power_on(session, targets, budgets, measurements)


@when(phrase("the node is cut off from the network for {limit:Limit}"), target_fixture="outage")
@when(phrase("the nodes are cut off from the network for {limit:Limit}"), target_fixture="outage")
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
    return disruptions.cut(
        session, targets, observer, FailureKind.PARTITION, undo_after_s=limit.seconds(budgets)
    )


@when(phrase("the node loses its storage network for {limit:Limit}"), target_fixture="outage")
@when(phrase("the nodes lose their storage network for {limit:Limit}"), target_fixture="outage")
def lose_storage_network(
    limit: Limit,
    session: Session,
    targets: Targets,
    observer: Observer,
    budgets: Budgets,
) -> Outage:
    """Storage-network cut ("array I/O network failure"): every chosen node keeps running,
    its kubelet and API connection go on, but its traffic to and from the storage
    endpoints the inventory names (``storage_network``) is dropped, so its pods' I/O hangs.
    The heal is armed on the node itself before the cut and runs after the limit at the
    latest (``recover`` and a power cycle heal too); skips when the node's drivers cannot
    cut it (SSH and kind can; IPMI and Redfish cannot)."""
    return disruptions.cut(
        session, targets, observer, FailureKind.STORAGE_CUT, undo_after_s=limit.seconds(budgets)
    )


@when(phrase("the node's kubelet is stopped for {limit:Limit}"), target_fixture="outage")
@when(phrase("the nodes' kubelets are stopped for {limit:Limit}"), target_fixture="outage")
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
    return disruptions.cut(
        session, targets, observer, FailureKind.KUBELET_STOP, undo_after_s=limit.seconds(budgets)
    )


@when("the node's storage network is back", target_fixture="powered_on")
@when("the nodes' storage networks are back", target_fixture="powered_on")
@when("the node is reconnected", target_fixture="powered_on")
@when("the nodes are reconnected", target_fixture="powered_on")
@when("the node's kubelet is started again", target_fixture="powered_on")
@when("the nodes' kubelets are started again", target_fixture="powered_on")
def undo_cut(session: Session, outage: Outage) -> PoweredOn:
    """Heal the partition or the storage network (or start the kubelets) now, before the
    armed undo would; the phases that follow (Ready again) measure from this request."""
    return disruptions.uncut(session, outage)


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
    rebooted = disruptions.reboot(session, targets, observer, measurements)
    provide(request, "outage", rebooted.outage)
    return rebooted.back


def _dell(workers: str, primary: str) -> StepParser:
    return phrase(
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
    failed = role_failures.fail_by_role(
        session,
        inventory,
        observer,
        kube,
        workloads,
        budgets,
        measurements,
        workers=workers,
        primary=primary,
        kind=failure,
        hold_s=limit.seconds(budgets),
        rng=rng,
        seed=seed_of(request.config),
    )
    provide(request, "targets", failed.targets)
    provide(request, "powered_on", failed.back)
    return failed.outage
