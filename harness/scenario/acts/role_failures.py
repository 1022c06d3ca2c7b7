"""The failure steps that choose before they act: a power-off through a named protocol, and
the Dell-style step that draws its nodes by role and fails them with any failure kind.

Both go through the one dispatch of :mod:`harness.scenario.expectations.phases` (``power_off``,
``fail``); what is here is what comes before it: whether the node offers the protocol at
all (a skip, never a product failure), and the draw by role, timed as the harness's own
"target choice" part of the scenario.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from harness.budgets import Budgets
from harness.failures import FailureKind
from harness.inventory import Inventory
from harness.kube.client import KubeClient
from harness.kube.observer import Observer
from harness.power.factory import available_protocols
from harness.scenario.acts import disruptions
from harness.scenario.errors import UnsupportedKind
from harness.scenario.report import Measurements, shown
from harness.scenario.targets import choice as choose
from harness.scenario.targets.choice import Outage, PoweredOn, Targets
from harness.scenario.targets.select import Amount
from harness.scenario.targets.workloads import Workload
from harness.session import Session


def power_off_through(
    session: Session,
    inventory: Inventory,
    targets: Targets,
    observer: Observer,
    budgets: Budgets,
    measurements: Measurements,
    protocol: str,
) -> Outage:
    """Forced power-off of the one target through ``protocol``; a node whose inventory entry
    offers no such way is nothing to act on (:class:`UnsupportedKind`, a skip)."""
    offered = available_protocols(inventory.node(targets.node))
    if protocol not in offered:
        raise UnsupportedKind(
            f"node {targets.node} has no {protocol} power control ({', '.join(offered)})"
        )
    return disruptions.power_off(
        session, targets, observer, budgets, measurements, protocol=protocol
    )


@dataclass(frozen=True)
class Failed:
    """What the Dell-style step chose, the failure and the return."""

    targets: Targets
    outage: Outage
    back: PoweredOn


def fail_by_role(
    session: Session,
    inventory: Inventory,
    observer: Observer,
    kube: KubeClient,
    workloads: tuple[Workload, ...],
    budgets: Budgets,
    measurements: Measurements,
    *,
    workers: Amount,
    primary: Amount,
    kind: FailureKind,
    hold_s: float,
    rng: random.Random,
    seed: int,
) -> Failed:
    """Draw ``workers`` workers and ``primary`` control-plane nodes (from ``seed``), fail
    them all at once with ``kind``, hold the failure ``hold_s``, bring them back
    (:func:`~harness.scenario.acts.disruptions.fail`)."""
    ledger = session.timeline.ledger
    with ledger.part("target choice"):
        targets = shown(
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
    with ledger.part(f"{kind.value} failure and return"):
        outage, back = disruptions.fail(
            session, targets, observer, budgets, measurements, kind, hold_s=hold_s
        )
    return Failed(targets, outage, back)
