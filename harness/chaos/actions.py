"""chaostoolkit actions: the disruptions of powercut, and their undos, as activities.

Use them as ``{"type": "action", "provider": {"type": "python", "module":
"harness.chaos.actions", "func": "power_off_nodes", "arguments": {...}}}``.

Every failure goes through the same dispatch as the Gherkin steps and ``powercut longevity``
(:mod:`harness.failures`), so a reboot here is the BMC's power cycle there too.
Every action runs in its own :class:`~harness.session.Session`: it takes the cluster lock
for the time of the call, checks the inventory's blast-radius limits, and journals each
disruption with its undo *before* acting, as every powercut run does. The disruption is
left in place when the action returns (it is the experiment's method); the experiment's
rollbacks undo it with the matching action below, which marks the journal entries undone.
If the experiment is interrupted or killed before its rollbacks ran, ``powercut recover
--inventory <the same file>`` finds the journal and undoes what is left.

Undo actions called without a node act on what the journal still owes: ``power_on_nodes()``
powers on every node an experiment powered off, ``recover()`` undoes everything.

Waits take ``within``: a budget name of the inventory's profile (``"pod-eviction"``), a
duration (``"90s"``, ``"6m"``) or seconds; the default is named in each docstring. A wait
that runs out raises :class:`~harness.checks.CheckFailed` saying what was expected and what
was last seen.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from harness import failures
from harness.chaos._common import (
    Configuration,
    Within,
    busiest,
    candidates,
    load,
    log,
    mark_undone,
    names,
    nodes_of,
    observe,
    owed,
    owed_in,
    seconds,
    session,
)
from harness.checks import CheckFailed
from harness.errors import ConfigError, PowercutError, WaitTimeout
from harness.failures import FailureKind
from harness.inventory import Inventory
from harness.journal import UndoFailed
from harness.journal import recover as recover_journal
from harness.kube import waits
from harness.power.base import PowerState
from harness.session import ClusterExecutor, Session, power_protocol_for_restore

__all__ = [
    "cordon_node",
    "delete_node",
    "drain_node",
    "force_delete_pods",
    "heal_partition",
    "partition_node",
    "power_off_nodes",
    "power_on_nodes",
    "reboot_nodes",
    "recover",
    "remove_out_of_service",
    "restart_pods",
    "restore_node",
    "set_out_of_service",
    "start_kubelet",
    "stop_kubelet",
    "uncordon_node",
    "wait_for_eviction",
    "wait_for_node_ready",
]

#: Journal actions that take a node down (powered off, cut off by a partition, its kubelet
#: stopped, or power-cycled and not yet back).
DOWN = ("power_off", "partition", "kubelet", "power_cycle")
#: Of those, what ``power_on_nodes`` settles.
POWERED_DOWN = ("power_off", "power_cycle", "partition")
#: Budgets a node's pods take to be evicted after it went down.
EVICTION_BUDGETS = ("node_not_ready", "taint_applied", "pod_eviction")
NodeNames = str | Sequence[str] | None


def _pick(
    s: Session, nodes: NodeNames, role: str | None, rack: str | None, count: int, busy: list[str]
) -> list[str]:
    """The nodes named, else the ``count`` busiest of ``role``/``rack`` not in ``busy``."""
    chosen = names(nodes)
    if chosen:
        for n in chosen:
            s.inventory.node(n)  # an unknown name fails here, listing the known ones
        return chosen
    if count < 1:
        raise ConfigError(f"count must be at least 1, got {count}", field="count")
    pool = [n for n in candidates(s.inventory, role, rack) if n not in busy]
    if len(pool) < count:
        where = " ".join(
            x for x in (f"role {role}" if role else "", f"rack {rack}" if rack else "") if x
        )
        raise ConfigError(
            f"only {len(pool)} node(s) of {where or 'the inventory'} are available "
            f"(not already disrupted: {', '.join(pool) or 'none'}); asked for {count}",
            field="nodes",
        )
    return busiest(s.client, pool, count)


def _wait_ready(inventory: Inventory, nodes: list[str], within: Within) -> float:
    """Wait until every node is Ready; the seconds it took."""
    started = time.monotonic()
    budget = seconds(inventory, within, ("node_ready_after_power_on",))
    with observe(inventory, ("nodes",)) as observer:
        for n in nodes:
            try:
                waits.wait_node_ready(observer, n, deadline=started + budget)
            except WaitTimeout as exc:
                raise CheckFailed(
                    f"{exc.expected} within {budget:g}s",
                    exc.last_seen,
                    time.monotonic() - started,
                    check="node-ready",
                ) from None
    return round(time.monotonic() - started, 3)


# -- power -----------------------------------------------------------------------------------


def power_off_nodes(
    nodes: NodeNames = None,
    role: str = "worker",
    rack: str | None = None,
    count: int = 1,
    graceful: bool = False,
    protocol: str | None = None,
    configuration: Configuration = None,
) -> dict[str, Any]:
    """Power nodes off through their BMCs, in parallel (journaled: undo with
    ``power_on_nodes`` or ``powercut recover``).

    ``nodes``: names (a list or ``"w1,w2"``). Without names, the ``count`` nodes of
    ``role`` (``worker``, ``control-plane``, or ``""`` for any) and ``rack`` that run the
    most pods a failure would displace, among those not already down. ``graceful``: an
    ACPI-style shutdown instead of a power cut. ``protocol``: one of the node's power
    endpoints (default: its primary). Refused when it would break the inventory's safety
    limits, counting the nodes this journal shows down already.
    """
    inventory = load(configuration)
    with session(inventory) as s:
        down = nodes_of(owed_in(s, DOWN))
        s.down.update(down)
        chosen = _pick(s, nodes, role, rack, count, down)
        kind = FailureKind.GRACEFUL if graceful else FailureKind.POWER_OFF
        done = failures.inflict(s, chosen, kind, undo_after_s=0.0, protocol=protocol or None)
        return {
            "nodes": chosen,
            "graceful": graceful,
            "ack_skew_s": round(done.result.skew_s, 3),
            "journal": str(s.journal_path),
        }


def reboot_nodes(
    nodes: NodeNames = None,
    role: str = "worker",
    rack: str | None = None,
    count: int = 1,
    wait_ready: bool = True,
    within: Within = None,
    protocol: str | None = None,
    configuration: Configuration = None,
) -> dict[str, Any]:
    """Reboot nodes: the BMC's power cycle (as the steps' and longevity's reboot; several
    nodes: off together, then on together), journaled with a power-on as the undo until
    each reads on again. Chosen as ``power_off_nodes`` does. With ``wait_ready`` it then
    waits until they are Ready, ``within`` the ``node-ready-after-power-on`` budget by
    default. Nothing to roll back once it returned."""
    inventory = load(configuration)
    with session(inventory) as s:
        down = nodes_of(owed_in(s, DOWN))
        s.down.update(down)
        chosen = _pick(s, nodes, role, rack, count, down)
        done = failures.inflict(
            s, chosen, FailureKind.REBOOT, undo_after_s=0.0, protocol=protocol or None
        )
        took = {n: round(a - done.result.sent[n], 3) for n, a in done.result.acknowledged.items()}
    ready_s = _wait_ready(inventory, chosen, within) if wait_ready else None
    return {"nodes": chosen, "cycle_s": took, "ready_after_s": ready_s}


def _reads_on(s: Session, node: str, protocol: str | None) -> bool:
    try:
        proto = protocol or power_protocol_for_restore(s.inventory, node)
        return s.driver(node, proto).state() is PowerState.ON
    except PowercutError as exc:
        log.warning("cannot read the power state of %s: %s", node, exc)
        return False


def power_on_nodes(
    nodes: NodeNames = None,
    wait_ready: bool = True,
    within: Within = None,
    protocol: str | None = None,
    configuration: Configuration = None,
) -> dict[str, Any]:
    """Power nodes on (and thaw partitioned kind nodes); marks their power-off undone.

    ``nodes``: names; without, every node the journal shows powered off by an experiment
    or a crashed run. With ``wait_ready`` it then waits until they are Ready, ``within``
    the ``node-ready-after-power-on`` budget by default.
    """
    inventory = load(configuration)
    with session(inventory) as s:
        chosen = names(nodes) or nodes_of(owed_in(s, POWERED_DOWN))
        if not chosen:
            log.info("power_on_nodes: nothing to power on (the journal owes no power-on)")
            return {"nodes": [], "ready_after_s": 0.0}
        try:
            failures.bring_back(s, chosen, FailureKind.POWER_OFF, protocol=protocol or None)
        except BaseException:
            mark_undone(s, POWERED_DOWN, [n for n in chosen if _reads_on(s, n, protocol)])
            raise
        mark_undone(s, POWERED_DOWN, chosen)
    ready_s = _wait_ready(inventory, chosen, within) if wait_ready else None
    return {"nodes": chosen, "ready_after_s": ready_s}


def wait_for_node_ready(
    nodes: NodeNames = None, within: Within = None, configuration: Configuration = None
) -> dict[str, Any]:
    """Wait until the nodes (default: every node of the inventory) are Ready, ``within``
    the ``node-ready-after-power-on`` budget by default."""
    inventory = load(configuration)
    chosen = names(nodes) or inventory.node_names()
    return {"nodes": chosen, "ready_after_s": _wait_ready(inventory, chosen, within)}


def wait_for_eviction(
    nodes: NodeNames = None, within: Within = None, configuration: Configuration = None
) -> dict[str, Any]:
    """Wait until every pod of the nodes is Terminating or gone (DaemonSet and mirror pods
    aside): Kubernetes evicted them from the dead nodes.

    ``nodes``: names; without, the nodes the journal shows down. ``within``: by default the
    sum of the ``node-not-ready``, ``taint-applied`` and ``pod-eviction`` budgets, counted
    from the start of this activity (put it right after the power-off).
    """
    inventory = load(configuration)
    chosen = names(nodes) or nodes_of(owed(inventory, DOWN))
    if not chosen:
        raise ConfigError(
            "wait_for_eviction: no nodes given and the journal shows none down", field="nodes"
        )
    started = time.monotonic()
    budget = seconds(inventory, within, EVICTION_BUDGETS)
    until = started + budget
    still: list[str] = []
    with observe(inventory, ("pods",)) as observer:
        for n in chosen:
            try:
                left = waits.wait_node_evacuated(observer, n, deadline=until)
            except WaitTimeout as exc:
                raise CheckFailed(
                    f"{exc.expected} within {budget:g}s",
                    exc.last_seen,
                    time.monotonic() - started,
                    check="eviction",
                ) from None
            still.extend(f"{p.namespace}/{p.name}" for p in left)
    took = round(time.monotonic() - started, 3)
    log.info("pods of %s evicted after %.1fs", ", ".join(chosen), took)
    return {"nodes": chosen, "seconds": took, "budget_s": budget, "still_terminating": still}


# -- partitions ----------------------------------------------------------------------------

#: Budgets after which a partitioned node heals by itself when the experiment's rollback
#: never ran (the driver arms that heal before the cut; the journal holds it too).
HEAL_BUDGETS = (*EVICTION_BUDGETS, "pod_rescheduled", "recovery")


def partition_node(
    node: str, heal_after: Within = None, configuration: Configuration = None
) -> dict[str, Any]:
    """Cut a node off the network while it keeps running, through the first of its drivers
    that can (:meth:`~harness.session.Session.cut`, as the steps do): journaled with its
    heal as the undo, and counted against the safety limits like a power-off. The driver
    arms a heal after ``heal_after`` (a budget name, a duration or seconds; by default the
    sum of the ``node-not-ready``, ``taint-applied``, ``pod-eviction``, ``pod-rescheduled``
    and ``recovery`` budgets) before it cuts. Undo now with ``heal_partition``,
    ``power_on_nodes`` or ``powercut recover``. A node none of whose drivers can cut it off
    fails with :class:`~harness.power.base.UnsupportedFailure` before anything is cut."""
    undo_after, journal = _cut(node, FailureKind.PARTITION, heal_after, configuration)
    log.info("partitioned %s (heals by itself after %gs)", node, undo_after)
    return {"node": node, "heal_after_s": undo_after, "journal": journal}


def _cut(
    node: str, kind: FailureKind, undo_after: Within, configuration: Configuration
) -> tuple[float, str]:
    """Cut ``node`` off (partition or kubelet stop) with its undo armed after
    ``undo_after``; returns the seconds armed and the journal's path."""
    inventory = load(configuration)
    with session(inventory) as s:
        s.down.update(nodes_of(owed_in(s, DOWN)))
        seconds_armed = seconds(inventory, undo_after, HEAL_BUDGETS)
        failures.inflict(s, [node], kind, undo_after_s=seconds_armed)
        return seconds_armed, str(s.journal_path)


def heal_partition(node: str | None = None, configuration: Configuration = None) -> dict[str, Any]:
    """Heal partitioned nodes now (:meth:`~harness.session.Session.uncut`, which marks
    the journal's heal done); without ``node``, every node the journal shows partitioned."""
    inventory = load(configuration)
    with session(inventory) as s:
        chosen = names(node) or nodes_of(owed_in(s, ("partition",)))
        failures.bring_back(s, chosen, FailureKind.PARTITION)
        mark_undone(s, ("partition",), chosen)  # cut by an earlier session: its entries
        return {"nodes": chosen}


def stop_kubelet(
    node: str, start_after: Within = None, configuration: Configuration = None
) -> dict[str, Any]:
    """Stop a node's kubelet while its containers keep running, through the first of its
    drivers that can (as the steps' and longevity's ``kubelet`` failure): journaled with
    the kubelet's start as the undo, counted against the safety limits. The driver arms a
    start after ``start_after`` (by default the budgets ``partition_node`` uses) before it
    stops it. Undo now with ``start_kubelet`` or ``powercut recover``."""
    undo_after, journal = _cut(node, FailureKind.KUBELET_STOP, start_after, configuration)
    log.info("stopped the kubelet of %s (starts by itself after %gs)", node, undo_after)
    return {"node": node, "start_after_s": undo_after, "journal": journal}


def start_kubelet(node: str | None = None, configuration: Configuration = None) -> dict[str, Any]:
    """Start stopped kubelets now; without ``node``, every node the journal shows with its
    kubelet stopped."""
    inventory = load(configuration)
    with session(inventory) as s:
        chosen = names(node) or nodes_of(owed_in(s, ("kubelet",)))
        failures.bring_back(s, chosen, FailureKind.KUBELET_STOP)
        mark_undone(s, ("kubelet",), chosen)
        return {"nodes": chosen}


# -- Kubernetes actions ----------------------------------------------------------------------


def cordon_node(node: str, configuration: Configuration = None) -> dict[str, Any]:
    """Mark the node unschedulable (journaled; undo with ``uncordon_node``)."""
    inventory = load(configuration)
    with session(inventory) as s:
        s.cordon(node)
    return {"node": node}


def drain_node(
    node: str | None = None,
    role: str = "worker",
    rack: str | None = None,
    within: Within = None,
    grace_period_s: int | None = None,
    configuration: Configuration = None,
) -> dict[str, Any]:
    """Cordon the node and evict its pods through the Eviction API, as ``kubectl drain``:
    PodDisruptionBudgets are respected (a 429 is retried), DaemonSet and mirror pods are
    left. Journaled; undo with ``uncordon_node``.

    ``node``: a name; without, the worker (``role``, ``rack``) running the most pods among
    those not already drained or down. ``within``: the ``drain`` budget by default.
    """
    inventory = load(configuration)
    with session(inventory) as s:
        busy = nodes_of(owed_in(s, (*DOWN, "drain", "cordon")))
        chosen = _pick(s, node, role, rack, 1, busy)[0]
        budget = seconds(inventory, within, ("drain",))
        try:
            result = s.drain(chosen, timeout_s=budget, grace_period_s=grace_period_s)
        except WaitTimeout as exc:
            raise CheckFailed(
                f"{exc.expected} within {budget:g}s", exc.last_seen, exc.waited_s, check="drain"
            ) from None
    return {
        "node": chosen,
        "evicted": list(result.evicted),
        "skipped": dict(result.skipped),
        "attempts": result.attempts,
        "duration_s": round(result.duration_s, 3),
    }


def uncordon_node(node: str | None = None, configuration: Configuration = None) -> dict[str, Any]:
    """Make nodes schedulable again; without ``node``, every node the journal shows
    cordoned or drained."""
    inventory = load(configuration)
    with session(inventory) as s:
        chosen = names(node) or nodes_of(owed_in(s, ("cordon", "drain")))
        for n in chosen:
            s.uncordon(n)
            mark_undone(s, ("cordon", "drain"), [n])
    return {"nodes": chosen}


def delete_node(
    node: str, clear_finalizers: bool = False, configuration: Configuration = None
) -> dict[str, Any]:
    """Delete the Node object (PodGC then force-deletes its pods). Journaled with the
    node's manifest; undo with ``restore_node`` (a real kubelet also re-registers by
    itself when the node comes back)."""
    inventory = load(configuration)
    with session(inventory) as s:
        s.delete_node(node, clear_finalizers=clear_finalizers)
    return {"node": node}


def _undo(s: Session, action: str, node: str | None) -> list[str]:
    """Run the journal's owed undos of ``action`` (on ``node``, or all); the nodes."""
    assert s.journal is not None
    executor = ClusterExecutor(s.inventory, s.client)
    done: list[str] = []
    for entry in owed_in(s, (action,)):
        target = entry.target.removeprefix("node/")
        if node and target != node:
            continue
        entry.undo.run(executor)
        s.journal.mark_undone(entry.id)
        if target not in done:
            done.append(target)
    return done


def restore_node(node: str | None = None, configuration: Configuration = None) -> dict[str, Any]:
    """Re-create Node objects deleted by ``delete_node`` from their journaled manifests
    (a no-op for a node that exists again); without ``node``, every one still owed."""
    inventory = load(configuration)
    with session(inventory) as s:
        return {"nodes": _undo(s, "delete_node", node or None)}


def force_delete_pods(
    node: str,
    namespace: str | None = None,
    only_terminating: bool = False,
    fence_override: str | None = None,
    configuration: Configuration = None,
) -> list[str]:
    """Delete the node's pods with grace period 0 (``kubectl delete --force``), DaemonSet
    and mirror pods aside. Returns ``namespace/name`` of the pods deleted. Nothing to undo:
    their controllers re-create them elsewhere. On a node that is not Ready, refused unless
    its BMC confirms power OFF, or ``fence_override`` gives the reason (journaled)."""
    inventory = load(configuration)
    with session(inventory) as s:
        return s.force_delete_pods(
            node,
            namespace=namespace or None,
            only_terminating=only_terminating,
            fence_override=fence_override or None,
        )


def set_out_of_service(
    node: str, fence_override: str | None = None, configuration: Configuration = None
) -> dict[str, Any]:
    """Taint the node ``node.kubernetes.io/out-of-service=nodeshutdown:NoExecute``: on a
    NotReady node its Terminating pods are force-deleted and their volumes force-detached
    at once. Refused unless the node's BMC confirms power OFF, or ``fence_override`` gives
    the operator's reason (journaled, returned). Journaled; undo with
    ``remove_out_of_service``."""
    inventory = load(configuration)
    with session(inventory) as s:
        s.add_out_of_service_taint(node, fence_override=fence_override or None)
        overrides = list(s.fence_overrides)
    return {"node": node, "fence_overrides": overrides} if overrides else {"node": node}


def remove_out_of_service(
    node: str | None = None, configuration: Configuration = None
) -> dict[str, Any]:
    """Remove the out-of-service taint; without ``node``, from every node the journal shows
    tainted."""
    inventory = load(configuration)
    with session(inventory) as s:
        chosen = names(node) or nodes_of(owed_in(s, ("out_of_service",)))
        for n in chosen:
            s.remove_out_of_service_taint(n)
            mark_undone(s, ("out_of_service",), [n])
    return {"nodes": chosen}


def restart_pods(
    namespace: str,
    selector: str,
    grace_period_s: int | None = None,
    configuration: Configuration = None,
) -> list[str]:
    """Delete the pods matching the label selector so their controllers re-create them;
    returns their names."""
    inventory = load(configuration)
    with session(inventory) as s:
        return s.restart_pods(namespace, selector, grace_period_s=grace_period_s)


# -- everything ------------------------------------------------------------------------------


def recover(configuration: Configuration = None) -> list[dict[str, Any]]:
    """Undo everything the inventory's journal still owes, newest first (what ``powercut
    recover`` does): power on, uncordon, remove taints, re-create nodes. A safe catch-all
    rollback. Raises when an undo failed (the others still ran)."""
    inventory = load(configuration)
    with session(inventory) as s:
        assert s.journal is not None
        results = recover_journal(s.journal, ClusterExecutor(inventory, s.client))
    for r in results:
        log.info("recover: %s: %s", "done" if r.ok else "FAILED", r.description)
    if not all(r.ok for r in results):
        raise UndoFailed(results)
    return [{"undo": r.description, "ok": r.ok} for r in results]
