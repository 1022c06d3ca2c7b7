"""What a longevity cycle sees besides the observer's state: the inventory's service probes,
the cycle's timeline seeded with what the run's observer already knows, and what the
steady-state check reads from that timeline incrementally (each probe's latest sample, the
volumes released from a failed node and not attached again yet). Also where a node's rack
is: the inventory's, else the zone label the observer read.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checks.replay import RELEASED
from harness.checks.service import PROBE
from harness.inventory import Inventory
from harness.kube.names import Change
from harness.kube.observer import NODE, POD, VOLUME_ATTACHMENT, Observer
from harness.kube.timeline import Timeline, Transition
from harness.longevity.measure import ProbeTarget
from harness.safety import NO_RACK

__all__ = ["Tracker", "rack_of", "resolve_probes", "seed_timeline"]


def resolve_probes(inventory: Inventory) -> tuple[ProbeTarget, ...]:
    """One probe per workload with a health URL (HTTP) or address (TCP)."""
    out: list[ProbeTarget] = []
    for spec in inventory.workloads:
        if spec.health is None:
            continue
        target = spec.health.http or f"tcp://{spec.health.tcp}"
        out.append(ProbeTarget(spec.name or str(spec.selector), target, spec.critical))
    return tuple(out)


class Tracker:
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


def rack_of(racks: Mapping[str, str], observer: Observer, node: str) -> str:
    """``node``'s rack: the inventory's (``racks``), else its zone label, else
    :data:`~harness.safety.NO_RACK`."""
    if node in racks:
        return racks[node]
    n = observer.node(node)
    return (n.zone if n is not None and n.zone else "") or NO_RACK
