"""One cycle against a real cluster: steady state, power off, measure, power on, clean up.

Each cycle gets a fresh :class:`~harness.kube.timeline.Timeline` and probers, so memory
stays flat however long the run: nothing of a cycle outlives its record (and its saved
timeline, when kept). The observer lives as long as the run (one initial list and one set
of watches for the whole run, not one per cycle). At the start of a cycle it is pointed at
the cycle's timeline, which is seeded with the state it holds (``observed`` transitions, as
a fresh observer's initial list records them); it is started afresh only if it failed.

1. **Steady state** (waited for, up to ``settle_s``): every inventory node Ready without the
   ``node.kubernetes.io/{unreachable,not-ready,out-of-service}`` taints, the group's nodes
   schedulable, every inventory workload at its desired Ready count (``spec.replicas``; a
   DaemonSet's ``desiredNumberScheduled``) with no pod Terminating, and the last sample of
   every critical service probe successful. The Ready counts found are the cycle's
   baselines, and the racks its Ready pods span are the spread to come back to. A cluster
   that does not get there stops the run (:class:`SteadyStateLost`), before anything is
   disrupted.
2. **Power off** the group in parallel through the session (journaled first, blast radius
   checked, acknowledgement skew kept).
3. **Outage**: waits (on the observer, never a sleep loop) until every node is NotReady,
   every protected pod is evicted and every critical Deployment is back to its baseline, each
   for at most its budget, and at least ``outage_s`` after the first acknowledgement. The
   outage is a minimum: nodes stay off while an outage phase is still within its budget.
4. **Power on**, then **cleanup**: waits for the steady state again, and for every volume
   released from a failed node to be attached again. Half-way through the cleanup budget,
   if it has not settled by itself, :meth:`LiveRunner._remediate` does what an operator
   would (force-delete pods stuck Terminating, restart pods never Ready again, evict a pod
   so a workload spreads over its racks again); each action is recorded and makes the cycle
   ``missed``. If the steady state is not back within ``settle_s`` the cycle is ``failed``
   and the run stops (the session has powered the nodes on; nothing else was changed).
5. The timeline is measured (:func:`~harness.longevity.measure.measure_cycle`).
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from harness.checks import phase as P
from harness.checks.base import wait_until_time
from harness.checks.replay import RELEASED
from harness.checks.service import PROBE, Prober
from harness.errors import ConfigError, PermanentError, WaitTimeout
from harness.inventory import Inventory, WorkloadSpec
from harness.journal import Terminated
from harness.kube import actions
from harness.kube.client import JSON, KubeClient, NotFound, TooManyRequests
from harness.kube.names import Change, Event
from harness.kube.observer import NODE, POD, VOLUME_ATTACHMENT, Observer, PodState
from harness.kube.timeline import Timeline, Transition, WaitFailed
from harness.kube.waits import wait_state
from harness.longevity.engine import Say, SteadyStateLost, StopControl
from harness.longevity.groups import Group
from harness.longevity.measure import (
    CLEANUP_DONE,
    CYCLE_START,
    MARK,
    OBSERVATION_END,
    OUTAGE_END,
    STEADY,
    CyclePlan,
    ProbeTarget,
    WorkloadTarget,
    measure_cycle,
    summarize_measured,
)
from harness.longevity.records import CycleRecord, PhaseBudgets
from harness.power.base import FailureKind
from harness.safety import NO_RACK
from harness.scenario import disrupt
from harness.scenario.errors import NoTargets
from harness.scenario.steady import node_problems, workload_problems
from harness.scenario.targets import by_phrase, parse_phrase
from harness.scenario.workloads import resolve_workloads as resolve_scenario_workloads
from harness.session import Session
from harness.slo.client import PrometheusClient
from harness.slo.evaluate import window_verdicts

__all__ = ["KeepTimelines", "LiveRunner", "resolve_probes"]

log = logging.getLogger(__name__)

KeepTimelines = Literal["all", "missed", "none"]
PLURAL: Final = {
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
}
TIMELINES_DIR: Final = "timelines"


def resolve_probes(inventory: Inventory) -> tuple[ProbeTarget, ...]:
    """One probe per workload with a health URL (HTTP) or address (TCP)."""
    out: list[ProbeTarget] = []
    for spec in inventory.workloads:
        if spec.health is None:
            continue
        target = spec.health.http or f"tcp://{spec.health.tcp}"
        out.append(ProbeTarget(spec.name or str(spec.selector), target, spec.critical))
    return tuple(out)


class _Tracker:
    """What the steady-state check needs from the timeline, read incrementally: the latest
    sample of each probe, and the volumes released from a failed node and not attached
    again yet."""

    def __init__(self, tl: Timeline) -> None:
        self.tl = tl
        self.pos = 0
        self.last: dict[str, str] = {}
        self.volumes: set[str] = set()
        self.nodes: set[str] = set()
        self.released: set[str] = set()
        self.reattached: set[str] = set()

    def watch_volumes(self, pvs: set[str], nodes: set[str]) -> None:
        self.update()
        self.volumes, self.nodes = pvs, nodes

    def update(self) -> None:
        new = self.tl.read_from(self.pos)
        self.pos += len(new)
        for t in new:
            if t.kind == PROBE:
                self.last[t.name] = t.transition
            elif t.kind == VOLUME_ATTACHMENT and self.volumes:
                pv = str(t.detail.get("pv") or "")
                if pv not in self.volumes:
                    continue
                if t.transition in RELEASED and t.detail.get("node") in self.nodes:
                    self.released.add(pv)
                elif t.transition == Change.ATTACHED and pv in self.released:
                    self.reattached.add(pv)

    @property
    def detached(self) -> set[str]:
        return self.released - self.reattached


def seed_timeline(tl: Timeline, observer: Observer) -> None:
    """Record the observer's current nodes, pods and VolumeAttachments in ``tl`` as
    ``observed`` transitions (the details a fresh observer's initial list records), so the
    timeline can be replayed from its start."""
    mono, wall = tl.clock.monotonic(), tl.clock.time()
    batch: list[Transition] = []
    for n in observer.nodes():
        detail = {
            "uid": n.uid,
            "ready": n.ready,
            "unschedulable": n.unschedulable,
            "taints": [t.id for t in n.taints],
            "zone": n.zone,
        }
        batch.append(Transition(mono, wall, NODE, "", n.name, "observed", detail))
    for p in observer.pods():
        detail = {
            "uid": p.uid,
            "node": p.node,
            "phase": p.phase,
            "ready": p.ready,
            "terminating": p.terminating,
            "workload": p.workload,
        }
        batch.append(Transition(mono, wall, POD, p.namespace, p.name, "observed", detail))
    for v in observer.volume_attachments():
        detail = {
            "uid": v.uid,
            "node": v.node,
            "pv": v.pv,
            "attached": v.attached,
            "attacher": v.attacher,
        }
        batch.append(Transition(mono, wall, VOLUME_ATTACHMENT, "", v.name, "observed", detail))
    tl.extend(batch)


#: The failure kinds a longevity cycle can inflict, through the steps' dispatch
#: (:func:`harness.scenario.disrupt.inflict`). A reboot is the BMC's power cycle of the
#: group (several nodes: off together, then on together; no minimum outage), measured from
#: the cycle's request to its acknowledgement (the BMC answers once the node reads on).
LONGEVITY_KINDS = (
    FailureKind.POWER_OFF,
    FailureKind.GRACEFUL,
    FailureKind.REBOOT,
    FailureKind.PARTITION,
    FailureKind.KUBELET_STOP,
)


class LiveRunner:
    """Runs cycles against the inventory's cluster (see the module docstring)."""

    def __init__(
        self,
        inventory: Inventory,
        client: KubeClient,
        *,
        out: Path,
        budgets: PhaseBudgets,
        stop: StopControl,
        outage_s: float = 120.0,
        protocol: str | None = None,
        failure: FailureKind = FailureKind.POWER_OFF,
        keep_timelines: KeepTimelines = "missed",
        probe_interval_s: float = 0.5,
        settle_s: float | None = None,
        journal_path: Path | None = None,
        session_factory: Callable[[Timeline], Session] | None = None,
        say: Say | None = None,
        target: str | None = None,
    ) -> None:
        self.inventory = inventory
        self.client = client
        self.out = out
        self.budgets = budgets
        self.stop = stop
        self.outage_s = outage_s
        self.protocol = protocol
        if failure not in LONGEVITY_KINDS:
            raise ConfigError(
                f"longevity cannot fail nodes with {failure.value}; valid: "
                + ", ".join(k.value for k in LONGEVITY_KINDS),
                field="--failure",
            )
        self.failure = failure
        if target is not None:
            parse_phrase(target)  # a phrase not understood fails before any cycle
        #: The steps' target phrase each cycle's group is chosen with, from where the pods
        #: are at that cycle (None: the group the engine hands over, from a groups file).
        self.target = target
        self.keep_timelines = keep_timelines
        self.probe_interval_s = probe_interval_s
        self.settle_s = settle_s if settle_s is not None else max(60.0, 3 * budgets.cleanup)
        self.journal_path = journal_path
        self.session_factory = session_factory or self._session
        self.say = say or (lambda msg: log.info("%s", msg))
        self.probes = resolve_probes(inventory)
        self.namespaces = sorted({w.namespace for w in inventory.workloads}) or None
        self.racks = {n.name: n.rack or NO_RACK for n in inventory.nodes}
        self._observer: Observer | None = None
        self._slo_client: PrometheusClient | None = None

    # -- plumbing --------------------------------------------------------------------------

    def observer_for(self, tl: Timeline) -> Observer:
        """The run's observer, now recording into ``tl`` (seeded with what it knows)."""
        obs = self._observer
        if obs is not None and obs.failure() is None:
            obs.timeline = tl
            seed_timeline(tl, obs)
            return obs
        if obs is not None:
            log.warning("restarting the observer: %s", obs.failure())
            obs.stop()
            self._observer = None
        obs = Observer(self.client, self.namespaces, timeline=tl).start()
        self._observer = obs
        return obs

    def close(self) -> None:
        """Stop the run's observer."""
        if self._observer is not None:
            self._observer.stop()
            self._observer = None
        if self._slo_client is not None:
            self._slo_client.close()
            self._slo_client = None

    def _slo_verdicts(self, start: float, end: float) -> dict[str, dict[str, Any]] | None:
        """The inventory's SLOs over one cycle (None when it has none)."""
        prometheus, slos = self.inventory.prometheus, self.inventory.slos
        if prometheus is None or not slos:
            return None
        if self._slo_client is None:
            self._slo_client = PrometheusClient(prometheus)
        return window_verdicts(self._slo_client, slos, start, end)

    def _session(self, tl: Timeline) -> Session:
        return Session(
            self.inventory,
            client=self.client,
            timeline=tl,
            journal_path=self.journal_path,
            lock=False,  # the run holds the cluster lock for all its cycles
            say=lambda msg: log.info("%s", msg),
        )

    def _rack(self, observer: Observer, node: str) -> str:
        if node in self.racks:
            return self.racks[node]
        n = observer.node(node)
        return (n.zone if n is not None and n.zone else "") or NO_RACK

    def resolve_workloads(self) -> list[tuple[WorkloadSpec, str, int]]:
        """(spec, ``Kind/name``, desired Ready count) of every inventory workload."""
        out: list[tuple[WorkloadSpec, str, int]] = []
        for spec in self.inventory.workloads:
            base = f"/apis/apps/v1/namespaces/{spec.namespace}/{PLURAL[spec.kind]}"
            objs: list[JSON]
            if spec.name is not None:
                try:
                    objs = [self.client.get(f"{base}/{spec.name}")]
                except NotFound:
                    raise ConfigError(
                        f"workload {spec.ref} does not exist", field="workloads"
                    ) from None
            else:
                objs, _ = self.client.list(base, labelSelector=spec.selector)
                if not objs:
                    raise ConfigError(f"no workload matches {spec.ref}", field="workloads")
            for obj in objs:
                name = str((obj.get("metadata") or {}).get("name"))
                if spec.kind == "DaemonSet":
                    desired = int((obj.get("status") or {}).get("desiredNumberScheduled") or 0)
                else:
                    replicas = (obj.get("spec") or {}).get("replicas")
                    desired = 1 if replicas is None else int(replicas)
                out.append((spec, f"{spec.kind}/{name}", desired))
        return out

    def choose_group(self, cycle: int, observer: Observer) -> Group:
        """This cycle's group: the nodes :attr:`target` names now, chosen as the steps do
        (:func:`harness.scenario.targets.by_phrase`; by default sparing the critical
        workloads, from where their pods run at this cycle). Seeded by the cycle number, so
        a resumed run draws the same way."""
        assert self.target is not None
        workloads = resolve_scenario_workloads(self.client, self.inventory)
        try:
            chosen = by_phrase(
                self.target,
                self.inventory,
                observer,
                self.client,
                workloads,
                rng=random.Random(cycle),
                seed=cycle,
            )
        except NoTargets as exc:
            raise PermanentError(f"cycle {cycle}: no group for {self.target!r}: {exc}") from None
        self.say(f"cycle {cycle}: {', '.join(chosen.nodes)} ({chosen.why})")
        return Group(f"c{cycle}", chosen.nodes)

    # -- the steady state ------------------------------------------------------------------

    def _problems(
        self,
        observer: Observer,
        probes: _Tracker,
        workloads: list[WorkloadTarget],
        group: Group,
    ) -> list[tuple[str, str]]:
        """What keeps the cluster from its steady state: (category, text), empty if none."""
        # The nodes and the workloads: the scenarios' definition (harness.scenario.steady).
        out = node_problems(observer, self.inventory.node_names(), schedulable=group.nodes)
        for w in workloads:
            out.extend(
                workload_problems(
                    observer, w.namespace, w.workload, w.baseline, ref=w.key, exact=False
                )
            )
            avail = [
                p
                for p in observer.pods(namespace=w.namespace, workload=w.workload)
                if p.ready and not p.terminating
            ]
            if w.racks and len(avail) >= w.baseline:
                racks = {self._rack(observer, p.node) for p in avail}
                if len(racks) < w.racks:
                    out.append(
                        ("spread", f"{w.key}: Ready pods in {len(racks)} of {w.racks} racks")
                    )
        probes.update()
        for pv in sorted(probes.detached):
            out.append(("volume", f"volume {pv} detached from a failed node, not attached again"))
        for probe in self.probes:
            if not probe.critical:
                continue
            last = probes.last.get(probe.name)
            if last != Change.OK:
                out.append(("probe", f"service {probe.name}: last probe {last or 'none yet'}"))
        return out

    def _wait_steady(
        self,
        observer: Observer,
        probes: _Tracker,
        workloads: list[WorkloadTarget],
        group: Group,
        *,
        deadline: float,
        stoppable: bool,
    ) -> None:
        def check() -> bool | None:
            return None if self._problems(observer, probes, workloads, group) else True

        def seen() -> str:
            found = self._problems(observer, probes, workloads, group)
            return "; ".join(text for _, text in found) or "steady"

        wait_state(
            observer,
            check,
            deadline=deadline,
            description="the steady state (nodes Ready and untainted, workloads at baseline)",
            last_seen=seen,
            terminal=(lambda: "stop requested" if self.stop.requested else None)
            if stoppable
            else None,
        )

    def _targets(
        self, observer: Observer, resolved: list[tuple[WorkloadSpec, str, int]]
    ) -> list[WorkloadTarget]:
        out = []
        for spec, workload, desired in resolved:
            racks = 0
            if spec.kind != "DaemonSet":
                avail = [
                    p
                    for p in observer.pods(namespace=spec.namespace, workload=workload)
                    if p.ready and not p.terminating
                ]
                racks = len({self._rack(observer, p.node) for p in avail})
            out.append(
                WorkloadTarget(
                    spec.namespace, workload, desired, spec.critical, spec.min_available, racks
                )
            )
        return out

    # -- a cycle ---------------------------------------------------------------------------

    def run_cycle(self, cycle: int, group: Group) -> CycleRecord | None:
        tl = Timeline()
        started = time.time()
        resolved = self.resolve_workloads()
        probers: list[Prober] = []
        remediation: dict[str, list[str]] = {}
        cleaned = False
        note = ""
        observer = self.observer_for(tl)
        try:
            tracker = _Tracker(tl)
            for p in self.probes:
                probers.append(
                    Prober(tl, p.target, name=p.name, interval_s=self.probe_interval_s).start()
                )
            tl.action(MARK, CYCLE_START, cycle=cycle, group=group.name)
            draft = [
                WorkloadTarget(s.namespace, w, d, s.critical, s.min_available)
                for s, w, d in resolved
            ]
            t_wait = time.monotonic()
            try:
                self._settle(
                    tl,
                    observer,
                    tracker,
                    draft,
                    group,
                    since=t_wait,
                    nodes=self.inventory.node_names(),
                    remediation=remediation,
                    stoppable=True,
                    prefix="before_cycle_",
                )
            except WaitFailed:
                if self.stop.requested:
                    return None
                raise
            except WaitTimeout as exc:
                raise SteadyStateLost(cycle, exc.last_seen, exc.waited_s) from None
            if self.target is not None:
                group = self.choose_group(cycle, observer)
            targets = self._targets(observer, resolved)
            plan = CyclePlan(cycle, group, tuple(targets), self.probes, self.budgets)
            tl.action(
                MARK, STEADY, waited_s=round(time.monotonic() - t_wait, 3), baselines=len(targets)
            )
            if self.stop.requested:
                return None
            cleaned, note = self._disrupt(tl, observer, tracker, plan, remediation)
            tl.action(MARK, OBSERVATION_END)
        finally:
            for prober in probers:
                prober.stop()
            # the observer stays; it records into the next cycle's timeline from now on
            observer.timeline = Timeline()
        measured = measure_cycle(tl.snapshot(), plan)
        if remediation:
            done = "; ".join(
                f"{k.replace('_', ' ')}: {', '.join(v)}" for k, v in remediation.items()
            )
            measured.violations.append(f"the cluster did not settle by itself ({done})")
        ended = time.time()
        reason = summarize_measured(measured, plan.budgets.as_dict()) if cleaned else note
        detail: dict[str, Any] = {
            **measured.detail,
            "protocol": self.protocol or "inventory",
            "outage_min_s": self.outage_s,
            "targets": [w.to_json() for w in targets],
            "remediation": remediation,
            "violations": measured.violations,
        }
        slos = self._slo_verdicts(started, ended)
        if slos is not None:
            detail["slos"] = slos
        record = CycleRecord(
            cycle=cycle,
            group=group.name,
            nodes=list(group.nodes),
            status=measured.status if cleaned else "failed",
            started_at=started,
            ended_at=ended,
            phases=measured.phases,
            budgets=plan.budgets.as_dict(),
            misses=measured.misses,
            incomplete=measured.incomplete,
            reason=reason,
            detail=detail,
        )
        if self.keep_timelines == "all" or (
            self.keep_timelines == "missed" and record.status != "passed"
        ):
            rel = Path(TIMELINES_DIR) / f"cycle-{cycle:06d}.json"
            (self.out / TIMELINES_DIR).mkdir(parents=True, exist_ok=True)
            tl.write_json(self.out / rel)
            record.timeline = str(rel)
        return record

    def _disrupt(
        self,
        tl: Timeline,
        observer: Observer,
        tracker: _Tracker,
        plan: CyclePlan,
        remediation: dict[str, list[str]],
    ) -> tuple[bool, str]:
        cleaned, note = False, ""
        try:
            with self.session_factory(tl) as session, self.stop.handlers():
                cleaned, note = self._cycle_body(tl, observer, tracker, plan, remediation, session)
        except Terminated as exc:
            # A first SIGTERM that arrived while the session was checking, at its exit, that
            # the nodes are on (its own handler is back then): the cycle is complete, so it
            # is still a request to stop after this cycle.
            if note != "done" or self.stop.by_signal:
                raise
            self.stop.note_signal(exc.signum)
        return cleaned, "" if note == "done" else note

    def _cycle_body(
        self,
        tl: Timeline,
        observer: Observer,
        tracker: _Tracker,
        plan: CyclePlan,
        remediation: dict[str, list[str]],
        session: Session,
    ) -> tuple[bool, str]:
        """Power off, outage, power on, cleanup; ``(cleaned, why not)`` (``"done"`` when
        cleaned)."""
        group = plan.group
        nodes = set(group.nodes)
        tracker.watch_volumes(
            {v.pv for v in observer.volume_attachments() if v.node in nodes and v.attached},
            nodes,
        )
        # One dispatch with the steps (harness.scenario.disrupt): a reboot is the BMC's
        # power cycle; a cut node undoes the cut by itself if this run dies (after the
        # outage and the cleanup budget at the latest).
        off = disrupt.inflict(
            session,
            group.nodes,
            self.failure,
            undo_after_s=self.outage_s + self.budgets.cleanup + 60.0,
            protocol=self.protocol,
        )
        t0 = off.first_ack
        if not off.back_by_itself:  # a reboot's nodes come back at once
            self._outage(observer, plan, t0)
            wait_until_time(tl, t0 + self.outage_s, "the minimum outage")
        tl.action(MARK, OUTAGE_END)
        on = disrupt.restore(session, off, protocol=self.protocol)
        cleaned, note = self._cleanup(tl, observer, tracker, plan, on.first_ack, remediation)
        if cleaned:
            tl.action(MARK, CLEANUP_DONE)
        return cleaned, note or "done"

    def _outage(self, observer: Observer, plan: CyclePlan, t0: float) -> None:
        """Wait for the outage phases, each until its budget at most (timeouts are fine:
        the measurement says what happened). NotReady and the evacuation are the phases
        :func:`~harness.longevity.measure.measure_cycle` measures (:mod:`harness.checks.phase`),
        waited for on the timeline: the wait and the figure are one definition."""
        b = self.budgets
        tl = observer.timeline
        nodes = set(plan.group.nodes)
        for node in plan.group.nodes:
            self._phase(tl, P.node_not_ready(node, since=t0), NODE, node, t0 + b.not_ready)
        protected = {w.workload for w in plan.workloads if w.protected}
        victims = [
            p
            for n in plan.group.nodes
            for p in observer.pods(on_node=n)
            if p.workload in protected and not p.terminating and not p.is_mirror
        ]
        for v in victims:
            evicted = P.pod_evicted(v, since=t0, after=t0)
            self._phase(tl, evicted, POD, v.name, t0 + b.evacuation, namespace=v.namespace)
        deployments = [
            w
            for w in plan.workloads
            if w.kind == "Deployment"
            and w.critical
            and any(
                p.node in nodes for p in observer.pods(namespace=w.namespace, workload=w.workload)
            )
        ]

        def replaced() -> bool | None:
            for w in deployments:
                ready = [
                    p
                    for p in observer.pods(namespace=w.namespace, workload=w.workload)
                    if p.ready and not p.terminating and p.node not in nodes
                ]
                if len(ready) < w.baseline:
                    return None
            return True

        with contextlib.suppress(WaitTimeout):
            wait_state(
                observer,
                replaced,
                deadline=t0 + b.recovery,
                description="critical Deployments back at their baseline off the failed nodes",
                last_seen=lambda: "not all replaced",
            )

    @staticmethod
    def _phase(
        tl: Timeline, phase: P.Phase, kind: str, name: str, deadline: float, namespace: str = ""
    ) -> None:
        """Until ``phase`` ends on the timeline (already, or waited for) or ``deadline``."""
        if P.end_event(phase, tl.all(kind, name, namespace=namespace or None)) is not None:
            return
        with contextlib.suppress(WaitTimeout):
            tl.wait_for(phase.accepts, deadline, f"{phase.name} {name}")

    def _settle(
        self,
        tl: Timeline,
        observer: Observer,
        tracker: _Tracker,
        workloads: list[WorkloadTarget],
        group: Group,
        *,
        since: float,
        nodes: Sequence[str],
        remediation: dict[str, list[str]],
        stoppable: bool,
        prefix: str = "",
    ) -> None:
        """Wait for the steady state until ``since + settle_s``; half-way through the cleanup
        budget, help it along (see :meth:`_remediate`). Raises ``WaitTimeout``."""
        deadline = since + self.settle_s
        nudge_at = min(deadline, since + min(self.budgets.cleanup / 2, self.settle_s / 3))
        try:
            self._wait_steady(
                observer, tracker, workloads, group, deadline=nudge_at, stoppable=stoppable
            )
            return
        except WaitTimeout:
            pass
        self._remediate(tl, observer, tracker, workloads, group, nodes, remediation, prefix)
        self._wait_steady(
            observer, tracker, workloads, group, deadline=deadline, stoppable=stoppable
        )

    def _cleanup(
        self,
        tl: Timeline,
        observer: Observer,
        tracker: _Tracker,
        plan: CyclePlan,
        t_on: float,
        remediation: dict[str, list[str]],
    ) -> tuple[bool, str]:
        try:
            self._settle(
                tl,
                observer,
                tracker,
                list(plan.workloads),
                plan.group,
                since=t_on,
                nodes=plan.group.nodes,
                remediation=remediation,
                stoppable=False,
            )
        except WaitTimeout as exc:
            return False, (
                f"not back to the steady state {time.monotonic() - t_on:.0f}s after "
                f"power-on: {exc.last_seen}"
            )
        return True, ""

    def _remediate(
        self,
        tl: Timeline,
        observer: Observer,
        tracker: _Tracker,
        workloads: list[WorkloadTarget],
        group: Group,
        nodes: Sequence[str],
        remediation: dict[str, list[str]],
        prefix: str = "",
    ) -> None:
        """What an operator does when the cluster does not settle by itself, on ``nodes``
        that are Ready: force-delete the workloads' pods stuck Terminating (their kubelet
        should have finalised them), restart those Running but never Ready again (their
        controller re-creates them), and evict one pod of a workload whose Ready pods span
        fewer racks than at the start of the cycle. Each action is recorded."""
        protected = {(w.namespace, w.workload) for w in workloads if w.protected}
        known = {(w.namespace, w.workload) for w in workloads}
        for node in nodes:
            n = observer.node(node)
            if n is None or not n.is_ready:
                continue
            stuck = [
                p
                for p in observer.pods(on_node=node)
                if p.terminating and (p.namespace, p.workload) in protected
            ]
            for ns in sorted({p.namespace for p in stuck}):
                deleted = actions.force_delete_pods(
                    self.client, node, namespace=ns, only_terminating=True, timeline=tl
                )
                remediation.setdefault(f"{prefix}force_deleted", []).extend(deleted)
                if deleted:
                    self.say(f"cleanup: force-deleted pods stuck Terminating on {node}: {deleted}")
            for p in observer.pods(on_node=node):
                if (p.namespace, p.workload) not in known or p.ready or p.terminating:
                    continue
                if p.phase != "Running":
                    continue
                try:
                    self.client.delete(
                        f"/api/v1/namespaces/{p.namespace}/pods/{p.name}",
                        body={"preconditions": {"uid": p.uid}},
                    )
                except NotFound:
                    continue
                tl.action(p.name, Event.RESTARTED, namespace=p.namespace, node=node)
                remediation.setdefault(f"{prefix}restarted", []).append(f"{p.namespace}/{p.name}")
                self.say(f"cleanup: restarted {p.namespace}/{p.name}, not Ready on {node}")
        problems = self._problems(observer, tracker, workloads, group)
        for w in workloads:
            if not any(c == "spread" and text.startswith(f"{w.key}:") for c, text in problems):
                continue
            pod = self._most_crowded(observer, w)
            if pod is None:
                continue
            try:
                self.client.create(
                    f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction",
                    {
                        "apiVersion": "policy/v1",
                        "kind": "Eviction",
                        "metadata": {"name": pod.name, "namespace": pod.namespace},
                    },
                )
            except TooManyRequests:
                remediation.setdefault(f"{prefix}respread_refused", []).append(
                    f"{pod.namespace}/{pod.name}"
                )
                continue
            except NotFound:
                continue
            tl.action(pod.name, Event.RESPREAD_EVICTION, namespace=pod.namespace, node=pod.node)
            remediation.setdefault(f"{prefix}respread", []).append(f"{pod.namespace}/{pod.name}")
            self.say(f"cleanup: evicted {pod.namespace}/{pod.name} so {w.key} spreads again")

    def _most_crowded(self, observer: Observer, w: WorkloadTarget) -> PodState | None:
        avail = [
            p
            for p in observer.pods(namespace=w.namespace, workload=w.workload)
            if p.ready and not p.terminating
        ]
        by_rack: dict[str, list[PodState]] = {}
        for p in avail:
            by_rack.setdefault(self._rack(observer, p.node), []).append(p)
        if not by_rack:
            return None
        crowded = max(by_rack.values(), key=len)
        return crowded[0] if len(crowded) > 1 else None


def check_journal_clean(journal_path: Path, inventory_path: Path | None) -> None:
    """Refuse to start while a previous run's disruptions are still owed their undo."""
    from harness.journal import Journal

    if not journal_path.exists():
        return
    owed = [e for e in Journal.read(journal_path) if e.owes_undo]
    if owed:
        listed = "; ".join(str(e) for e in owed[:5])
        raise PermanentError(
            f"the journal {journal_path} still owes {len(owed)} undo(s) from an earlier run "
            f"({listed}); run `powercut recover -i {inventory_path or 'INVENTORY'}` first"
        )
