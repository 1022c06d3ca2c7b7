"""Measure one cycle from its timeline: a pure function, no cluster, no clock.

The engine records its own milestones in the timeline as ``Action`` transitions named
:data:`MARK` (``cycle start``, ``steady``, ``outage end``, ``cleanup done``, ``observation
end``), next to the session's ``power-off acknowledged`` / ``power-on acknowledged`` per node
and everything the observer and the probers saw. :func:`measure_cycle` replays that list
once and returns every phase duration with its per-node, per-pod, per-workload, per-service
and per-volume detail, so a saved timeline can always be measured again and the statistics
checked against it.

Definitions (each phase ends at the first transition that shows it done). The per-node,
per-pod and per-volume phases are those of :mod:`harness.checks.phase`, the same the
scenario's checks wait for live, applied here to the recorded transitions; each gives one
:class:`~harness.checks.base.Measurement` (kept in :attr:`Measured.each`) and the cycle's
value of a phase is the slowest of them (:func:`~harness.checks.phase.slowest`). A
workload's availability (its lowest count, its recovery) is
:func:`~harness.checks.replay.availability`, the replay the ``available_throughout`` and
``quorum_kept`` checks judge:

not_ready
    per node: its ``power-off acknowledged`` -> its Node ``not-ready`` transition. The cycle's
    value is the slowest node.
evacuation
    per protected pod (pods of the inventory's Deployments and StatefulSets that were on a
    failed node at the first power-off acknowledgement): that node's acknowledgement -> the
    pod ``terminating`` or ``deleted``, before power-on. The cycle's value is the last pod.
recovery
    per affected workload (one with a pod on a failed node), back to its baseline Ready count
    (the count at steady state: ``spec.replicas``, or the DaemonSet's desired count):

    * Deployment: from the first power-off acknowledgement until ``baseline`` pods are Ready
      (and not Terminating) off the failed nodes (or anywhere, once the nodes are back on).
      Its pods can be replaced elsewhere, so this is the time to full capacity.
    * StatefulSet and DaemonSet: from the first power-on acknowledgement until all
      ``baseline`` pods are Ready again. A StatefulSet member on a dead node stays
      Terminating until the node returns (real Kubernetes behaviour), and a DaemonSet pod
      belongs to its node, so their recovery can only start at power-on. While the nodes are
      off, the StatefulSet's surviving members must stay Ready: one that drops is a
      violation.

    The cycle's value is the slowest *critical* workload; non-critical ones are reported.
service_outage
    per probe: the longest run of failed samples from the first power-off sent to the end of
    cleanup (probe interval resolution). The cycle's value is the worst critical service.
volume_reattach
    per volume attached to a failed node at power-off: its VolumeAttachment ``detached`` or
    ``deleted`` -> the volume ``attached`` again (to any node).
cleanup
    first power-on acknowledgement -> ``cleanup done`` (the engine's mark, stamped when nodes
    were Ready, their taints gone, stuck pods finalised and workloads back at baseline and
    spread).

A phase that never completed gets the time waited (until power-on for the outage phases,
until the end of observation otherwise) as a lower bound and is listed in ``incomplete``.
A phase over its budget, complete or not, is a miss.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from harness.checks import phase as P
from harness.checks.base import Measurement
from harness.checks.replay import PodReplay, PodSnap, attachments_at, availability
from harness.checks.service import PROBE, outages
from harness.kube.names import Act, Change, Down, Stage, downs
from harness.kube.observer import NODE, POD, VOLUME_ATTACHMENT
from harness.kube.timeline import ACTION, Transition
from harness.longevity.groups import Group
from harness.longevity.records import PHASES, PhaseBudgets

__all__ = [
    "MARK",
    "CyclePlan",
    "Measured",
    "ProbeTarget",
    "WorkloadTarget",
    "measure_cycle",
]

#: ``Action`` name of the engine's own milestones.
MARK: Final = "longevity"
CYCLE_START: Final = "cycle start"
STEADY: Final = "steady"
OUTAGE_END: Final = "outage end"
CLEANUP_DONE: Final = "cleanup done"
OBSERVATION_END: Final = "observation end"

POWER_OFF_SENT: Final = Act.POWER_OFF.at(Stage.SENT)
POWER_OFF_ACK: Final = Act.POWER_OFF.at(Stage.ACKNOWLEDGED)
POWER_ON_ACK: Final = Act.POWER_ON.at(Stage.ACKNOWLEDGED)
#: The failure's request when the cycle cut the nodes off the network, stopped their
#: kubelets or power-cycled them (``powercut longevity --failure partition|kubelet|reboot``)
#: instead of powering them off. Where each node went down and came back is
#: :func:`harness.kube.names.downs`, as for the steps and the reports (a reboot's: see
#: :mod:`harness.failures.reboot`).
FAILED_SENT: Final = frozenset(
    a.at(Stage.SENT) for a in (Act.POWER_OFF, Act.PARTITION, Act.KUBELET_STOP, Act.POWER_CYCLE)
)

NODE_BOUND_KINDS: Final = frozenset({"StatefulSet", "DaemonSet"})
#: A surviving StatefulSet member that does one of these while the nodes are off is lost.
SURVIVOR_LOST: Final = frozenset({"not-ready", "terminating", "deleted"})


@dataclass(frozen=True, slots=True)
class WorkloadTarget:
    """A workload of the inventory as found at steady state."""

    namespace: str
    workload: str  # Kind/name, as the observer names a pod's controller
    baseline: int  # Ready pods at steady state
    critical: bool = True
    min_available: int = 0
    racks: int = 0  # distinct racks of its Ready pods at steady state

    @property
    def kind(self) -> str:
        return self.workload.split("/", 1)[0]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.workload}"

    @property
    def protected(self) -> bool:
        """Its pods must leave a dead node (DaemonSet pods tolerate it and stay)."""
        return self.kind != "DaemonSet"

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "workload": self.workload,
            "baseline": self.baseline,
            "critical": self.critical,
            "min_available": self.min_available,
            "racks": self.racks,
        }


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    name: str
    target: str
    critical: bool = True


@dataclass(frozen=True, slots=True)
class CyclePlan:
    """What one cycle does and against what it is judged."""

    cycle: int
    group: Group
    workloads: tuple[WorkloadTarget, ...]
    probes: tuple[ProbeTarget, ...]
    budgets: PhaseBudgets


@dataclass(slots=True)
class Measured:
    """One cycle measured: per phase the slowest of its :class:`Measurement`\\ s (None
    where the cycle had nothing of it), what missed its budget and what broke a rule."""

    measurements: dict[str, Measurement | None]
    misses: list[str]
    violations: list[str]
    detail: dict[str, Any] = field(default_factory=dict)
    #: Every measurement of each phase (a node's, a pod's, a volume's), the same that the
    #: scenario's checks return for it from the same transitions.
    each: dict[str, list[Measurement]] = field(default_factory=dict)

    @property
    def phases(self) -> dict[str, float | None]:
        return {p: None if m is None else _r(m.duration_s) for p, m in self.measurements.items()}

    @property
    def incomplete(self) -> list[str]:
        return [p for p, m in self.measurements.items() if m is not None and not m.complete]

    @property
    def status(self) -> Literal["passed", "missed"]:
        return "missed" if self.misses or self.violations else "passed"


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _marks(ts: Sequence[Transition]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in ts:
        if t.kind == ACTION and t.name == MARK:
            out.setdefault(t.transition, t.mono)
    return out


def _power(
    ts: Sequence[Transition], nodes: Iterable[str], what: frozenset[str]
) -> dict[str, float]:
    wanted = set(nodes)
    out: dict[str, float] = {}
    for t in ts:
        if t.kind == ACTION and t.transition in what and t.name in wanted:
            out.setdefault(t.name, t.mono)
    return out


def _downs(ts: Sequence[Transition]) -> list[Down[Transition]]:
    """Each node's failures in the timeline (:func:`harness.kube.names.downs`)."""
    return downs((t.name, t.transition, t) for t in ts if t.kind == ACTION)


def _first(pairs: Iterable[tuple[str, Transition]]) -> dict[str, float]:
    """Per node, the first of its (node, transition) pairs: when (monotonic)."""
    out: dict[str, float] = {}
    for node, t in pairs:
        out.setdefault(node, t.mono)
    return out


def measure_cycle(transitions: Iterable[Transition], plan: CyclePlan) -> Measured:
    """Every phase of one cycle, from its timeline (see the module docstring)."""
    ts = sorted(transitions, key=lambda t: t.mono)
    nodes = plan.group.nodes
    group = set(nodes)
    marks = _marks(ts)
    off_sent = _power(ts, nodes, FAILED_SENT)
    down = sorted((d for d in _downs(ts) if d.node in group), key=lambda d: d.since.mono)
    off_ack = _first((d.node, d.since) for d in down)
    violations: list[str] = []
    phases: dict[str, list[Measurement]] = {p: [] for p in PHASES}
    detail: dict[str, Any] = {}
    if not off_ack:
        return Measured(
            dict.fromkeys(PHASES),
            [],
            ["no power-off acknowledgement in the timeline"],
            {"power": {}},
        )
    t0 = min(off_ack.values())
    on_ack = _first((d.node, d.back) for d in down if d.back is not None and d.back.mono > t0)
    t_on = min(on_ack.values()) if on_ack else None
    end = marks.get(OBSERVATION_END, ts[-1].mono)
    cleanup_end = marks.get(CLEANUP_DONE)
    window_end = cleanup_end if cleanup_end is not None else end
    outage_limit = t_on if t_on is not None else end
    window_start = min(off_sent.values()) if off_sent else t0
    walls = {t.mono: t.wall for d in down for t in (d.since, d.back) if t is not None}
    detail["power"] = {
        "off_at": walls.get(t0),
        "on_at": None if t_on is None else walls.get(t_on),
        "off_ack_skew_s": _r(max(off_ack.values()) - t0),
        "off_sent_to_ack_s": _r(t0 - window_start),
        "off_s": _r(None if t_on is None else t_on - t0),
        "on_ack_skew_s": _r(max(on_ack.values()) - t_on) if t_on is not None else None,
        "missing_off_ack": sorted(group - set(off_ack)),
    }

    def during_outage(key: str, phase: P.Phase, within: Sequence[Transition]) -> Measurement:
        """One item of phase ``key``, which must end before the nodes come back."""
        m = P.measure(phase, within, until=outage_limit, budget_s=plan.budgets.get(key))
        phases[key].append(m)
        return m

    # -- nodes -------------------------------------------------------------------------------
    node_detail: dict[str, dict[str, Any]] = {}
    node_ts = [t for t in ts if t.kind == NODE]
    for node in nodes:
        ack = off_ack.get(node)
        info: dict[str, Any] = {"not_ready_s": None, "ready_after_on_s": None}
        node_detail[node] = info
        if ack is None:
            continue
        nr = during_outage("not_ready", P.node_not_ready(node, since=ack), node_ts)
        if nr.complete:
            info["not_ready_s"] = _r(nr.duration_s)
            info["status"] = nr.detail.get("status")
            if nr.detail.get("relist"):
                info["uncertain_s"] = nr.detail.get("uncertain_s")
        on = on_ack.get(node)
        if on is not None:
            ready = P.measure(P.node_ready(node, since=on), node_ts)
            if ready.complete:
                info["ready_after_on_s"] = _r(ready.duration_s)
    detail["nodes"] = node_detail

    # -- pods: the state at t0, and per affected workload its availability ------------------
    by_key = {w.key: w for w in plan.workloads}
    pods_ts = [
        t for t in ts if t.kind == POD and f"{t.namespace}/{t.detail.get('workload')}" in by_key
    ]
    replay = PodReplay()
    replay.feed_all(t for t in pods_ts if t.mono <= t0)
    at_t0: dict[str, PodSnap] = dict(replay.alive)
    affected = {f"{p.namespace}/{p.workload}" for p in at_t0.values() if p.node in group}
    lowest: dict[str, int] = {}
    recovered: dict[str, float] = {}
    for w in plan.workloads:
        if w.key not in affected:
            continue
        seen = availability(pods_ts, w.namespace, w.workload, start=t0, until=end)
        lowest[w.key] = seen.lowest(window_end)[1]
        # StatefulSet and DaemonSet pods come back with their nodes; a Deployment's can be
        # replaced elsewhere, so it recovers off the failed nodes too.
        done = None if t_on is None else seen.first_at_least(w.baseline, since=t_on)
        if w.kind not in NODE_BOUND_KINDS:
            off = availability(pods_ts, w.namespace, w.workload, start=t0, until=end, not_on=group)
            elsewhere = off.first_at_least(w.baseline, since=t0)
            done = min((x for x in (done, elsewhere) if x is not None), default=None)
        if done is not None:
            recovered[w.key] = done
    # The StatefulSet members that stayed up must stay Ready while the nodes are off.
    dropped: dict[str, list[tuple[float, str]]] = {}
    for p in at_t0.values():
        w = by_key[f"{p.namespace}/{p.workload}"]
        if w.key not in affected or w.kind != "StatefulSet" or p.node in group or not p.available:
            continue
        lost = P.pod_event(p, SURVIVOR_LOST, since=t0)
        t = P.end_event(lost, pods_ts, until=outage_limit)
        if t is not None:
            dropped.setdefault(w.key, []).append(
                (t.mono, f"{t.name} {t.transition} at +{t.mono - t0:.1f}s")
            )

    # evacuation, per protected pod on a failed node
    pod_detail: list[dict[str, Any]] = []
    for p in sorted(at_t0.values(), key=lambda p: (p.namespace, p.name)):
        w = by_key[f"{p.namespace}/{p.workload}"]
        if p.node not in group:
            continue
        row: dict[str, Any] = {
            "pod": f"{p.namespace}/{p.name}",
            "workload": p.workload,
            "node": p.node,
            "evicted_s": None,
        }
        if w.protected and not p.is_mirror:
            ack = off_ack.get(p.node, t0)
            ev = during_outage(
                "evacuation", P.pod_evicted(p, since=ack, after=t0, already=p.terminating), pods_ts
            )
            if ev.complete:
                row["evicted_s"] = _r(ev.duration_s)
        pod_detail.append(row)
    detail["pods"] = pod_detail

    # recovery, per workload
    wl_detail: dict[str, dict[str, Any]] = {}
    for w in plan.workloads:
        bound = w.kind in NODE_BOUND_KINDS
        ref = t_on if bound else t0
        row = {
            "kind": w.kind,
            "baseline": w.baseline,
            "critical": w.critical,
            "affected": w.key in affected,
            "from": "power-on" if bound else "power-off",
            "recovery_s": None,
            "lowest": lowest.get(w.key),
        }
        wl_detail[w.key] = row
        if w.key not in affected:
            continue
        if ref is None:
            if w.critical:
                phases["recovery"].append(_lower_bound("recovery", t0, end))
            continue
        if w.key in recovered:
            rec = Measurement("recovery", ref, recovered[w.key] - ref, None, {"workload": w.key})
            row["recovery_s"] = _r(rec.duration_s)
        else:
            rec = _lower_bound("recovery", ref, window_end, {"workload": w.key})
        if w.critical:
            phases["recovery"].append(rec)
        if w.critical and w.min_available and lowest.get(w.key, w.baseline) < w.min_available:
            dip = (
                f"{w.key}: {lowest[w.key]} Ready pod(s) at the lowest, below its "
                f"min_available {w.min_available}"
            )
            violations.append(dip)
            # Also kept apart: whether a group may take that many of a workload's pods
            # depends on where the scheduler put them, not only on the cluster's behaviour.
            detail.setdefault("below_min_available", []).append(dip)
        if w.critical and dropped.get(w.key):
            row["survivors_dropped"] = [text for _, text in sorted(dropped[w.key])]
            violations.append(
                f"{w.key}: surviving member(s) lost readiness while the nodes were off: "
                + "; ".join(row["survivors_dropped"])
            )
    detail["workloads"] = wl_detail

    # -- services ----------------------------------------------------------------------------
    svc_detail: dict[str, dict[str, Any]] = {}
    for probe in plan.probes:
        samples = [
            t
            for t in ts
            if t.kind == PROBE and t.name == probe.name and window_start <= t.mono <= window_end
        ]
        row = {"critical": probe.critical, "samples": len(samples)}
        svc_detail[probe.name] = row
        if not samples:
            # A window shorter than the probe's period (a reboot answered in 0.1 s) holds no
            # sample: the samples either side of it, both OK, tell the service never failed
            # at that resolution; anything else is not known and fails the cycle.
            mine = [t for t in ts if t.kind == PROBE and t.name == probe.name]
            before = [t for t in mine if t.mono < window_start][-1:]
            after = [t for t in mine if t.mono > window_end][:1]
            if before and after and all(t.transition == Change.OK for t in (*before, *after)):
                row.update(longest_outage_s=0.0, between_samples=True)
                if probe.critical:
                    phases["service_outage"].append(
                        Measurement(
                            "service-outage",
                            window_start,
                            0.0,
                            None,
                            {"probe": probe.name, "between_samples": True},
                        )
                    )
                continue
            row["longest_outage_s"] = None
            if probe.critical:
                violations.append(f"service {probe.name}: no probe samples during the cycle")
            continue
        runs = outages(samples)
        longest = max((b - a for a, b, _ in runs), default=0.0)
        row.update(
            failed=sum(1 for t in samples if t.transition == Change.FAIL),
            outages=len(runs),
            longest_outage_s=_r(longest),
            ongoing_at_end=bool(runs and runs[-1][2]),
        )
        if probe.critical:
            phases["service_outage"].append(
                Measurement(
                    "service-outage",
                    window_start,
                    longest,
                    None,
                    {"probe": probe.name},
                    complete=not (runs and runs[-1][2]),
                )
            )
    detail["services"] = svc_detail

    # -- volumes -----------------------------------------------------------------------------
    va_ts = [t for t in ts if t.kind == VOLUME_ATTACHMENT]
    reattach_budget = plan.budgets.get("volume_reattach")
    vol_detail: dict[str, dict[str, Any]] = {}
    for _name, (node, pv, attached) in sorted(attachments_at(va_ts, t0).items()):
        if not attached or node not in group:
            continue
        row = {
            "from_node": node,
            "released_s": None,
            "reattached_s": None,
            "to_node": None,
            "reattach_s": None,
        }
        vol_detail[pv] = row
        release = P.volume_released(pv, node, since=t0)
        released = P.end_event(release, va_ts)
        if released is None:
            continue
        row["released_s"] = _r(release.reached(released).duration_s)
        back = P.volume_attached(pv, since=released.mono)
        moved = P.end_event(back, va_ts)
        if moved is None:
            phases["volume_reattach"].append(back.open(window_end, reattach_budget))
            continue
        m = back.reached(moved, reattach_budget)
        phases["volume_reattach"].append(m)
        row["reattached_s"] = _r(moved.mono - t0)
        row["to_node"] = str(m.detail.get("to_node") or "")
        row["reattach_s"] = _r(m.duration_s)
    detail["multi_attach_events"] = sum(
        1
        for t in ts
        if t.kind == POD and t.transition == Change.MULTI_ATTACH and t.mono >= window_start
    )
    detail["volumes"] = vol_detail

    # -- cleanup -----------------------------------------------------------------------------
    if t_on is not None:
        if cleanup_end is not None:
            phases["cleanup"].append(Measurement("cleanup", t_on, cleanup_end - t_on, None))
        else:
            phases["cleanup"].append(_lower_bound("cleanup", t_on, end))
    detail["relisted"] = any(t.detail.get("relist") for t in ts if t.mono >= window_start)

    slowest = {p: P.slowest(p, ms) for p, ms in phases.items()}
    misses = [
        p for p, m in slowest.items() if m is not None and m.duration_s > plan.budgets.get(p) + 1e-9
    ]
    if violations:
        detail["violations"] = violations
    return Measured(slowest, misses, violations, detail, phases)


def _lower_bound(
    name: str, since: float, until: float, detail: Mapping[str, Any] | None = None
) -> Measurement:
    """A phase still going at ``until``: the time waited, incomplete."""
    return Measurement(name, since, max(0.0, until - since), None, detail or {}, complete=False)


def summarize_measured(m: Measured, budgets: Mapping[str, float]) -> str:
    """One line: the misses with their values and budgets, else the violations."""
    parts = []
    for p in m.misses:
        v = m.phases.get(p)
        more = " (did not complete)" if p in m.incomplete else ""
        parts.append(f"{p} {v:.1f}s over budget {budgets[p]:g}s{more}" if v is not None else p)
    parts.extend(m.violations)
    return "; ".join(parts)
