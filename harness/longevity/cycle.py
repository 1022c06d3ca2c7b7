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
   if it has not settled by itself, :class:`~harness.longevity.remedy.Remedy` does what an operator
   would (force-delete pods stuck Terminating, restart pods never Ready again, evict a pod
   so a workload spreads over its racks again); each action is recorded and makes the cycle
   ``missed``. If the steady state is not back within ``settle_s`` the cycle is ``failed``
   and the run stops (the session has powered the nodes on; nothing else was changed).
5. The timeline is measured (:func:`~harness.longevity.measure.measure_cycle`).

This module is the cycle's sequence and its record. What it waits for (the outage's
phases, the steady state) is :mod:`~harness.longevity.waits`; the operator's help,
:mod:`~harness.longevity.remedy`; what it sees besides the observer (probes, the seeded
timeline, racks), :mod:`~harness.longevity.observe`; the workloads read from the API,
:mod:`~harness.longevity.reads`. Failing and restoring the group is the steps' one dispatch
(:mod:`harness.failures`).
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

from harness import failures
from harness.checks.base import wait_until_time
from harness.checks.service import PROBE, Prober
from harness.errors import ConfigError, PermanentError, WaitTimeout
from harness.failures import FailureKind
from harness.inventory import Inventory
from harness.journal import Terminated
from harness.kube.client import KubeClient
from harness.kube.observer import Observer
from harness.kube.timeline import Timeline, Transition, WaitFailed
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
    WorkloadTarget,
    measure_cycle,
    summarize_measured,
)
from harness.longevity.observe import Tracker, resolve_probes, seed_timeline
from harness.longevity.reads import resolve_workloads
from harness.longevity.records import CycleRecord, PhaseBudgets
from harness.longevity.remedy import Remedy
from harness.longevity.waits import SteadyState, wait_outage
from harness.safety import NO_RACK
from harness.scenario.errors import NoTargets
from harness.scenario.targets.choice import by_phrase, parse_phrase
from harness.scenario.targets.workloads import resolve_workloads as resolve_scenario_workloads
from harness.session import Session
from harness.slo.client import PrometheusClient
from harness.slo.evaluate import window_verdicts

__all__ = ["KeepTimelines", "LiveRunner", "check_journal_clean"]

log = logging.getLogger(__name__)

KeepTimelines = Literal["all", "missed", "none"]
TIMELINES_DIR: Final = "timelines"


#: The failure kinds a longevity cycle can inflict, through the steps' dispatch
#: (:func:`harness.failures.inflict`), each measured as the steps measure it (a reboot:
#: :mod:`harness.failures.reboot`; no minimum outage).
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
        self.steady = SteadyState(
            inventory,
            self.probes,
            self.racks,
            budgets,
            stop,
            Remedy(client, self.racks, self.say),
            settle_s=self.settle_s,
        )
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

    def choose_group(self, cycle: int, observer: Observer) -> Group:
        """This cycle's group: the nodes :attr:`target` names now, chosen as the steps do
        (:func:`harness.scenario.targets.choice.by_phrase`; by default sparing the critical
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

    # -- a cycle ---------------------------------------------------------------------------

    def run_cycle(self, cycle: int, group: Group) -> CycleRecord | None:
        tl = Timeline()
        started = time.time()
        resolved = resolve_workloads(self.client, self.inventory)
        probers: list[Prober] = []
        remediation: dict[str, list[str]] = {}
        cleaned = False
        note = ""
        observer = self.observer_for(tl)
        try:
            tracker = Tracker(tl)
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
                self.steady.settle(
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
            targets = self.steady.targets(observer, resolved)
            plan = CyclePlan(cycle, group, tuple(targets), self.probes, self.budgets)
            tl.action(
                MARK, STEADY, waited_s=round(time.monotonic() - t_wait, 3), baselines=len(targets)
            )
            if self.stop.requested:
                return None
            cleaned, note = self._disrupt(tl, observer, tracker, plan, remediation)
            tl.action(MARK, OBSERVATION_END)
            self._sample_after(tl, probers)
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

    @staticmethod
    def _sample_after(tl: Timeline, probers: list[Prober]) -> None:
        """Wait until every probe has answered once after the observation's end (at most two
        of its periods and its timeout). A cycle shorter than a probe's period (a BMC reset
        answered in 0.1 s) holds none of its samples and is judged from the samples either
        side of it; the one after it must be on the timeline before the probers stop, or
        the cycle misses for "no probe samples" (seen on the lab: 3 reboot cycles of 3)."""
        end = tl.clock.monotonic()
        for prober in probers:

            def answered(t: Transition, name: str = prober.name) -> bool:
                return t.kind == PROBE and t.name == name and t.mono > end

            with contextlib.suppress(WaitTimeout):  # judged without it: measure says so
                tl.wait_for(
                    answered,
                    end + 2 * prober.interval_s + prober.timeout_s,
                    f"a sample of probe {prober.name} after the cycle",
                )

    def _disrupt(
        self,
        tl: Timeline,
        observer: Observer,
        tracker: Tracker,
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
        tracker: Tracker,
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
        # One dispatch with the steps (harness.failures): a reboot is the BMC's
        # power cycle; a cut node undoes the cut by itself if this run dies (after the
        # outage and the cleanup budget at the latest).
        off = failures.inflict(
            session,
            group.nodes,
            self.failure,
            undo_after_s=self.outage_s + self.budgets.cleanup + 60.0,
            protocol=self.protocol,
        )
        t0 = off.first_ack
        if not off.back_by_itself:  # a reboot's nodes come back at once
            wait_outage(observer, plan, t0)
            wait_until_time(tl, t0 + self.outage_s, "the minimum outage")
        tl.action(MARK, OUTAGE_END)
        on = failures.restore(session, off, protocol=self.protocol)
        cleaned, note = self._cleanup(tl, observer, tracker, plan, on.first_ack, remediation)
        if cleaned:
            tl.action(MARK, CLEANUP_DONE)
        return cleaned, note or "done"

    def _cleanup(
        self,
        tl: Timeline,
        observer: Observer,
        tracker: Tracker,
        plan: CyclePlan,
        t_on: float,
        remediation: dict[str, list[str]],
    ) -> tuple[bool, str]:
        try:
            self.steady.settle(
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
