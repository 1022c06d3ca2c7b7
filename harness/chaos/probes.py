"""chaostoolkit probes: what powercut observes, as values a tolerance can judge.

Use them as ``{"type": "probe", "tolerance": true, "provider": {"type": "python",
"module": "harness.chaos.probes", "func": "workload_available"}}``.

Probes read the cluster through the same observer (list+watch), waits and checks as the
Gherkin scenarios; a probe that waits for a phase (a node Ready, a volume attached) waits for
the one definition of it in :mod:`harness.checks.phase`. When the expectation does not hold
they *return* it (``False``, a count, a node name) rather than raise, and log what they last
saw: a steady-state hypothesis then deviates by its tolerance and chaostoolkit still plays
the rollbacks (with its default rollback strategy a probe that raises makes the run
"failed", and rollbacks are skipped). They raise only for bad input or a cluster they cannot read.

``within`` makes a probe wait for its expectation: a budget name (``"pod-rescheduled"``),
a duration (``"90s"``) or seconds; ``None`` (the default) answers from one listing, now.
"""

from __future__ import annotations

import time
from typing import Any

from harness.chaos import _common
from harness.chaos._common import (
    Configuration,
    Within,
    deadline,
    load,
    log,
    observe,
    owed,
    seconds,
)
from harness.checks import CheckFailed, Prober, probe_health
from harness.checks import phase as P
from harness.errors import ConfigError, PowercutError, WaitTimeout
from harness.inventory import Inventory, WorkloadSpec
from harness.kube import waits
from harness.kube.names import Change
from harness.kube.observer import Observer, workload_of
from harness.kube.timeline import Timeline
from harness.power.factory import driver_for

__all__ = [
    "disruptions_owed",
    "node_ready",
    "pods_on_node",
    "power_state",
    "service_healthy",
    "volume_attached_to",
    "workload_available",
]


def node_ready(node: str, within: Within = None, configuration: Configuration = None) -> bool:
    """Whether the node is Ready (waiting up to ``within`` for it to become so: the phase
    :func:`~harness.checks.phase.node_ready` the scenario's checks measure)."""
    inventory = load(configuration)
    with observe(inventory, ("nodes",)) as observer:
        since = observer.timeline.clock.monotonic()
        state = observer.node(node)
        if state is not None and state.is_ready:
            return True
        try:
            P.await_phase(
                observer.timeline,
                P.node_ready(node, since=since),
                budget_s=max(0.0, deadline(inventory, within) - since),
                expected=f"node {node} Ready",
                last_seen=waits.node_seen(observer, node),
            )
        except CheckFailed as exc:
            log.warning("node_ready: %s", exc.seen)
            return False
    return True


def _targets(
    inventory: Inventory,
    namespace: str | None,
    kind: str | None,
    name: str | None,
    selector: str | None,
    min_available: int | None,
) -> list[WorkloadSpec]:
    if not (name or selector):
        if namespace or kind or min_available is not None:
            raise ConfigError(
                "workload_available: give name or selector with namespace and kind, or "
                "nothing (every critical workload of the inventory)",
                field="name",
            )
        return list(inventory.workloads)
    data: dict[str, Any] = {
        "namespace": namespace or "default",
        "kind": kind or "Deployment",
        "min_available": 1 if min_available is None else min_available,
    }
    if name:
        data["name"] = name
    else:
        data["selector"] = selector
    for known in inventory.workloads:
        if (known.namespace, known.kind, known.name, known.selector) == (
            data["namespace"],
            data["kind"],
            data.get("name"),
            data.get("selector"),
        ):
            data["health"] = known.health
            if min_available is None:
                data["min_available"] = known.min_available
    return [WorkloadSpec.model_validate(data)]


def _owner(inventory: Inventory, spec: WorkloadSpec) -> str:
    """``Kind/name`` of the workload; a selector is resolved through the pods it matches."""
    if spec.name:
        return f"{spec.kind}/{spec.name}"
    client = _common.kube_client(inventory)
    try:
        items, _ = client.list(
            f"/api/v1/namespaces/{spec.namespace}/pods", labelSelector=str(spec.selector)
        )
    finally:
        client.close()
    owners = sorted(
        {
            o
            for p in items
            if (o := workload_of(p.get("metadata") or {})).startswith(f"{spec.kind}/")
        }
    )
    if len(owners) > 1:
        raise ConfigError(
            f"{spec.ref}: the selector matches pods of {', '.join(owners)}; name one",
            field="selector",
        )
    return owners[0] if owners else f"{spec.kind}/(no pods match {spec.selector})"


def workload_available(
    namespace: str | None = None,
    kind: str | None = None,
    name: str | None = None,
    selector: str | None = None,
    min_available: int | None = None,
    within: Within = None,
    configuration: Configuration = None,
) -> bool:
    """Whether workloads have at least ``min_available`` pods Ready and not Terminating.

    Without arguments: every workload of the inventory with its own ``min_available``; a
    miss of a non-critical one (``critical: false``) is logged, not counted (nor waited
    for). Or one
    workload: ``namespace``, ``kind`` (``Deployment``, ``StatefulSet``, ``DaemonSet``) and
    ``name`` or ``selector``; ``min_available`` defaults to the inventory's, else 1.
    """
    inventory = load(configuration)
    specs = _targets(inventory, namespace, kind, name, selector, min_available)
    owners = [(s, _owner(inventory, s)) for s in specs]
    namespaces = sorted({s.namespace for s in specs}) or None
    until = deadline(inventory, within)
    ok = True
    with observe(inventory, ("pods",), namespaces) as observer:
        # Critical workloads first, waited for; the others are only looked at afterwards.
        for spec, owner in sorted(owners, key=lambda so: not so[0].critical):
            try:
                waits.wait_workload_ready(
                    observer,
                    spec.namespace,
                    owner,
                    count=spec.min_available,
                    deadline=until if spec.critical else time.monotonic(),
                )
            except WaitTimeout as exc:
                if spec.critical:
                    log.warning("workload_available: %s: %s", spec.ref, exc.last_seen)
                    ok = False
                else:
                    log.info("workload_available: %s (not critical): %s", spec.ref, exc.last_seen)
    return ok


def service_healthy(
    workload: str | None = None,
    url: str | None = None,
    window: Within = None,
    min_success_ratio: float = 1.0,
    max_outage: Within = None,
    configuration: Configuration = None,
) -> bool:
    """Whether services answer as a client would see them (HTTP 2xx/3xx or a TCP connect).

    Targets: ``url`` (``http(s)://...``, ``tcp://host:port`` or ``host:port``), else the
    health endpoint of the inventory workload named ``workload``, else those of every
    critical workload (none: ``True``, with a warning that nothing was probed). Without
    ``window``: one request each, all must succeed. With
    ``window`` (a duration or a budget): probes every 0.25 s for that long, then requires
    ``min_success_ratio`` and no outage longer than ``max_outage``.
    """
    inventory = load(configuration)
    targets: dict[str, str] = {}
    if url:
        targets[url] = url
    else:
        for spec in inventory.workloads:
            if spec.health is None or (workload and spec.name != workload):
                continue
            if not workload and not spec.critical:
                continue
            targets[spec.ref] = spec.health.http or f"tcp://{spec.health.tcp}"
        if workload and not targets:
            raise ConfigError(
                f"service_healthy: workload {workload!r} has no health endpoint in the "
                "inventory; pass url",
                field="workload",
            )
        if not targets:
            log.warning(
                "service_healthy: no critical workload of the inventory has a health "
                "endpoint (workloads[].health); nothing to probe"
            )
            return True
    timeline = Timeline()
    if window is None or window == "":
        ok = True
        for name, target in targets.items():
            sample = Prober(timeline, target, name=name).probe_once()
            if sample.transition != Change.OK:
                log.warning("service_healthy: %s: %s", name, timeline.describe(sample))
                ok = False
        return ok
    span = seconds(inventory, window)
    outage = None if max_outage in (None, "") else seconds(inventory, max_outage)
    probers = [Prober(timeline, t, name=n) for n, t in targets.items()]
    start = time.monotonic()
    ok = True
    try:
        for p in probers:
            p.start()
        for p in probers:
            try:
                # Blocks on the timeline (woken by each sample) until the window ends, or
                # less when an outage already lasted longer than max_outage.
                probe_health(
                    timeline,
                    p.name,
                    start=start,
                    end=start + span,
                    min_success_ratio=min_success_ratio,
                    max_outage_s=outage,
                )
            except CheckFailed as exc:
                log.warning("service_healthy: %s", exc)
                ok = False
    finally:
        for p in probers:
            p.stop()
    return ok


def pods_on_node(
    node: str,
    namespace: str | None = None,
    include_daemonsets: bool = False,
    configuration: Configuration = None,
) -> int:
    """How many pods run on the node, not Terminating (DaemonSet pods only when
    ``include_daemonsets``; mirror pods never)."""
    inventory = load(configuration)
    with observe(inventory, ("pods",), [namespace] if namespace else None) as observer:
        return _count(observer, node, include_daemonsets)


def _count(observer: Observer, node: str, include_daemonsets: bool) -> int:
    return sum(
        1
        for p in observer.pods(on_node=node)
        if not p.terminating and not p.is_mirror and (include_daemonsets or not p.is_daemonset)
    )


def volume_attached_to(
    pvc: str | None = None,
    namespace: str = "default",
    pv: str | None = None,
    not_on: str | None = None,
    within: Within = None,
    configuration: Configuration = None,
) -> str:
    """The node the volume is attached to (its VolumeAttachment says attached), or ``""``.

    The volume is the PersistentVolume ``pv``, or the one bound to ``pvc`` in
    ``namespace``. With ``not_on``, an attachment to that node does not count (for "the
    volume moved off the dead node"); with ``within``, waits for one that does.
    """
    inventory = load(configuration)
    volume = pv
    if not volume:
        if not pvc:
            raise ConfigError("volume_attached_to: give pvc (and namespace) or pv", field="pvc")
        client = _common.kube_client(inventory)
        try:
            claim = client.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{pvc}")
        finally:
            client.close()
        volume = str((claim.get("spec") or {}).get("volumeName") or "")
        if not volume:
            log.warning("volume_attached_to: PVC %s/%s is not bound", namespace, pvc)
            return ""
    with observe(inventory, ("volumeattachments",)) as observer:
        since = observer.timeline.clock.monotonic()
        for va in observer.volume_attachments(pv=volume):
            if va.attached and not va.terminating and va.node != (not_on or None):
                return va.node
        try:
            m = P.await_phase(
                observer.timeline,
                P.volume_attached(volume, since=since, not_on=not_on or None),
                budget_s=max(0.0, deadline(inventory, within) - since),
                expected=f"volume {volume} attached",
                last_seen=waits.va_seen(observer, volume),
            )
        except CheckFailed as exc:
            log.info("volume_attached_to: %s", exc.seen)
            return ""
    return str(m.detail.get("to_node") or "")


def power_state(node: str, protocol: str | None = None, configuration: Configuration = None) -> str:
    """The node's power as its BMC (or the kind container) reports it: ``on``, ``off`` or
    ``unknown`` (a paused kind node)."""
    inventory = load(configuration)
    driver = driver_for(inventory.node(node), protocol or None)
    try:
        return driver.state().value
    finally:
        try:
            driver.close()
        except PowercutError as exc:
            log.debug("closing the power driver of %s: %s", node, exc)


def disruptions_owed(configuration: Configuration = None) -> int:
    """How many disruptions the inventory's journal still owes an undo (0: the cluster is
    as powercut found it). A steady-state check that an earlier run left nothing behind."""
    inventory = load(configuration)
    entries = owed(inventory)
    for e in entries:
        log.warning("disruptions_owed: %s", e)
    return len(entries)
