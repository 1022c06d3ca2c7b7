"""The disruptions as a scenario's steps inflict them, and their return: each calls the one
dispatch (:mod:`harness.failures`) inside ``allure.step``, records what the BMCs
took to acknowledge it in :class:`~harness.scenario.report.Measurements`, and returns the
:class:`~harness.scenario.targets.choice.Outage` and
:class:`~harness.scenario.targets.choice.PoweredOn` (or
:class:`~harness.scenario.targets.choice.Restarted`) that the expectations
(:mod:`harness.scenario.expectations.phases`, :mod:`harness.scenario.expectations.volumes`) measure
from.

Power off (forced or graceful) and on, a reboot (the BMC's power cycle), a partition or a
kubelet stop and their undo, a failure held for a while and brought back (the failure
step's one call, :func:`fail`), and the restart of pods by label selector. Each waits only
for its own acknowledgement, never for what the cluster does next.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import allure

from harness import failures
from harness.budgets import Budgets
from harness.checks.base import fail_if
from harness.errors import PermanentError
from harness.failures import FailureKind
from harness.kube.ledger import HOLD
from harness.kube.observer import Observer
from harness.kube.timeline import ACTION
from harness.scenario import reads
from harness.scenario.errors import NothingToMeasure, UnsupportedKind
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage, PoweredOn, Restarted, Targets
from harness.session import PowerResult, Session

__all__ = [
    "Rebooted",
    "cut",
    "fail",
    "power_off",
    "power_on",
    "reboot",
    "restart_pods",
    "uncut",
]


# -- power ---------------------------------------------------------------------------------


def _confirmed(
    result: PowerResult,
    nodes: Sequence[str],
    what: str,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each node's BMC confirmed ``what`` (``power-off``, ``power-on``) within power-ack +
    power-state-verify: each recorded, the late ones failed at once (a budget overrun)."""
    limit = budgets.power_ack + budgets.power_state_verify
    late = []
    for node in nodes:
        took = result.acknowledged[node] - result.sent[node]
        measurements.record(f"{node} {what} confirmed", took, limit, started_mono=result.sent[node])
        if took > limit:
            late.append(f"{node} after {took:.1f}s")
    fail_if(late, f"every BMC to confirm the {what} within {limit:g}s", limit, what, late=True)


def _outage(targets: Targets, alive: set[str], done: failures.Inflicted, skew_s: float) -> Outage:
    """The failure the expectations measure from: the targets' pods that were alive when
    it began (uids in ``alive``), its first request and where each node went down."""
    return Outage(
        targets,
        tuple(p for p in targets.pods if p.uid in alive),
        done.first_sent,
        done.acks,
        done.protocol,
        done.graceful,
        skew_s,
        done.kind,
    )


def power_off(
    session: Session,
    targets: Targets,
    observer: Observer,
    budgets: Budgets,
    measurements: Measurements,
    *,
    graceful: bool = False,
    protocol: str | None = None,
) -> Outage:
    """Power the targets off in parallel; each BMC must confirm within power-ack +
    power-state-verify."""
    alive = {p.uid for p in observer.pods()}
    how = ("graceful shutdown" if graceful else "power off") + (
        f" through {protocol}" if protocol else ""
    )
    kind = FailureKind.GRACEFUL if graceful else FailureKind.POWER_OFF
    with allure.step(f"{how}: {', '.join(targets.nodes)}"):
        done = failures.inflict(session, targets.nodes, kind, undo_after_s=0.0, protocol=protocol)
    result = done.result
    _confirmed(result, targets.nodes, "power-off", budgets, measurements)
    if len(targets.nodes) > 1:
        measurements.record(
            "power-off acknowledgement skew", result.skew_s, None, started_mono=result.first_ack
        )
    return _outage(targets, alive, done, result.skew_s)


def power_on(
    session: Session, targets: Targets, budgets: Budgets, measurements: Measurements
) -> PoweredOn:
    """Power the targets on; re-create a Node object deleted earlier if it is still absent
    (a real kubelet re-registers by itself; the lab's simulated one does not)."""
    with allure.step(f"power on: {', '.join(targets.nodes)}"):
        back = failures.bring_back(session, targets.nodes, FailureKind.POWER_OFF)
    restored = []
    for node in targets.nodes:
        if not reads.node_exists(session.client, node):
            session.restore_node(node)
            restored.append(node)
    _confirmed(back.result, targets.nodes, "power-on", budgets, measurements)
    return PoweredOn(targets.nodes, back.sent, back.acks, tuple(restored))


# -- failures beyond power: partition, kubelet stop, reboot -----------------------------------


def fail(
    session: Session,
    targets: Targets,
    observer: Observer,
    budgets: Budgets,
    measurements: Measurements,
    kind: FailureKind,
    *,
    hold_s: float,
) -> tuple[Outage, PoweredOn]:
    """Fail the targets with ``kind``, hold the failure ``hold_s``, then bring them back:
    the outage and the return, which the later phases measure from. A reboot holds the
    power off ``hold_s`` within one power cycle (the node then boots by itself). The one
    dispatch of a failure step (:mod:`harness.failures`)."""
    failure = failures.strategy(kind)
    if failure.back_by_itself:
        rebooted = reboot(session, targets, observer, measurements, off_s=hold_s)
        return rebooted.outage, rebooted.back
    if failure.undone_on_node:
        outage = cut(session, targets, observer, kind, undo_after_s=hold_s + budgets.recovery)
        _hold(kind, targets.nodes, hold_s, session)
        return outage, uncut(session, outage)
    outage = power_off(session, targets, observer, budgets, measurements, graceful=failure.graceful)
    _hold(kind, targets.nodes, hold_s, session)
    return outage, power_on(session, targets, budgets, measurements)


def _hold(kind: FailureKind, nodes: Sequence[str], seconds: float, session: Session) -> None:
    with (
        allure.step(f"hold the {kind.value} failure of {', '.join(nodes)} for {seconds:g}s"),
        session.timeline.ledger.waiting(HOLD),
    ):
        time.sleep(seconds)


def cut(
    session: Session,
    targets: Targets,
    observer: Observer,
    kind: FailureKind,
    *,
    undo_after_s: float,
) -> Outage:
    """Cut the targets off the network or stop their kubelets; they stay powered on and
    their pods keep running. The undo is armed on each node first (back by itself after
    ``undo_after_s``). A node whose drivers cannot do ``kind`` skips the scenario."""
    why = failures.unsupported(session, targets.nodes, kind)
    if why is not None:
        raise UnsupportedKind(why)
    alive = {p.uid for p in observer.pods()}
    with allure.step(f"{kind.value}: {', '.join(targets.nodes)} (undone after {undo_after_s:g}s)"):
        done = failures.inflict(session, targets.nodes, kind, undo_after_s=undo_after_s)
    return _outage(targets, alive, done, done.result.skew_s)


def uncut(session: Session, outage: Outage) -> PoweredOn:
    """Undo a partition or a kubelet stop now; later phases measure from the request."""
    verb = failures.strategy(outage.kind).undo_verb
    with allure.step(f"{verb.value}: {', '.join(outage.nodes)}"):
        back = failures.bring_back(session, outage.nodes, outage.kind)
    return PoweredOn(outage.nodes, back.sent, back.acks, ())


@dataclass(frozen=True)
class Rebooted:
    """What a reboot did: the failure (from the power going off) and the return (from the
    power-on request; the node then boots)."""

    outage: Outage
    back: PoweredOn


def reboot(
    session: Session,
    targets: Targets,
    observer: Observer,
    measurements: Measurements,
    *,
    off_s: float = 0.0,
) -> Rebooted:
    """Power-cycle the targets (:func:`harness.failures.inflict`), the power held off
    ``off_s`` within the cycle; returns once each reads back as on. Where the failure and
    the return are measured from: :mod:`harness.failures.reboot`."""
    alive = {p.uid for p in observer.pods()}
    held = f", off for {off_s:g}s" if off_s > 0 else ""
    with allure.step(f"reboot (power cycle{held}): {', '.join(targets.nodes)}"):
        done = failures.inflict(
            session, targets.nodes, FailureKind.REBOOT, undo_after_s=0.0, off_s=off_s
        )
    result = done.result
    for node in targets.nodes:
        measurements.record(
            f"{node} power cycle confirmed",
            result.acknowledged[node] - result.sent[node],
            None,
            started_mono=result.sent[node],
        )
    back = failures.restore(session, done)
    return Rebooted(
        _outage(targets, alive, done, 0.0), PoweredOn(targets.nodes, back.sent, back.acks, ())
    )


# -- repopulation runbook: restart pods by selector -----------------------------------------


def restart_pods(session: Session, namespace: str, selector: str) -> Restarted:
    """Delete the pods the selector matches so their controllers re-create them (a step of
    the etcd-rebuild repopulation runbook). Nothing to undo: the controllers put them back.
    No pod matching is nothing to measure."""
    old = {
        str(p["metadata"]["name"]): str(p["metadata"]["uid"])
        for p in reads.matching_pods(session.client, namespace, selector)
    }
    if not old:
        raise NothingToMeasure(f"no pod in namespace {namespace} matches {selector!r}")
    timeline = session.timeline
    before = len(timeline)
    with allure.step(f"restart the pods {selector} in {namespace}: {', '.join(sorted(old))}"):
        session.restart_pods(namespace, selector)
    sent = next((t for t in timeline.read_from(before) if t.kind == ACTION), None)
    if sent is None:
        raise PermanentError(f"the restart of {selector} in {namespace} recorded no action")
    return Restarted(namespace, selector, old, sent)
