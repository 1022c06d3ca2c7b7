"""Named timing budgets: every deadline the harness waits for lives here, and only here.

A budget is the longest a phase may take, in seconds, before a check fails. Each field of
:class:`Budgets` documents where the phase starts and where it ends, so that a failure can
say which clock ran out. Steps never contain numbers: they ask for a budget by name
(``budget_for("node-not-ready budget", budgets)``).

Two profiles ship:

``fast``
    The lab's fast timings: node-monitor-grace-period ~12 s, not-ready/unreachable
    tolerations 10 s. Used by the harness's own tests against the lab.
``upstream``
    Kubernetes defaults: node-monitor-grace-period 40 s (50 s from 1.32), tolerations
    300 s, force detach after 6 min (``maxWaitForUnmountDuration``), real servers that take
    minutes to POST and boot.

An inventory picks a profile and may override single budgets (``budgets.overrides``);
:meth:`Budgets.with_overrides` validates the names and values.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Mapping
from typing import Final

from harness.errors import ConfigError

__all__ = [
    "PROFILES",
    "BudgetSpellingWarning",
    "Budgets",
    "budget_for",
    "budget_names",
    "canonical_budget_name",
    "dashed",
    "parse_duration",
    "profile",
]


def _budget(seconds: float, doc: str) -> float:
    """A dataclass field carrying its documentation (shown in errors and ``describe()``)."""
    return dataclasses.field(default=seconds, metadata={"doc": doc})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    """Named, documented timing budgets in seconds. Frozen: derive copies, never mutate.

    The defaults are the ``upstream`` profile.
    """

    power_ack: float = _budget(
        30.0, "power request sent -> the BMC acknowledged it (HTTP 2xx, IPMI completion code 0)"
    )
    power_state_verify: float = _budget(
        60.0, "power request acknowledged -> the BMC reports the requested power state"
    )
    node_not_ready: float = _budget(
        75.0,
        "power-off acknowledged -> Node Ready condition False/Unknown "
        "(node-monitor-grace-period 40-50 s + node-monitor-period 5 s + lease renewal slack)",
    )
    control_plane_node_not_ready: float = _budget(
        95.0,
        "power-off acknowledged -> Node NotReady, when the lost nodes include a control-plane "
        "node: if it ran the kube-controller-manager leader, a new leader is elected first "
        "(leader-elect lease 15 s + retry 2 s) and only then counts the grace period",
    )
    taint_applied: float = _budget(
        30.0,
        "Node NotReady -> node.kubernetes.io/unreachable or not-ready NoExecute taint "
        "(tainting is rate-limited to 0.1 node/s per zone: the k-th node of a zone may "
        "need 10*(k-1) s more)",
    )
    pod_eviction: float = _budget(
        330.0,
        "NoExecute taint applied -> pods on the node have a deletionTimestamp "
        "(DefaultTolerationSeconds 300 s)",
    )
    pod_rescheduled: float = _budget(
        120.0,
        "old pod has a deletionTimestamp (or is gone) -> replacement pod Ready on another node",
    )
    pod_gc: float = _budget(
        90.0,
        "Node object deleted -> its pods force-deleted by PodGC (40 s quarantine + 20 s period)",
    )
    volume_detach: float = _budget(
        420.0,
        "pod gone from an unreachable node -> its VolumeAttachment deleted "
        "(force detach after maxWaitForUnmountDuration, 6 min, fixed in "
        "kube-controller-manager and not shortened by the fast profile)",
    )
    volume_detach_out_of_service: float = _budget(
        30.0,
        "out-of-service taint applied -> VolumeAttachment on the dead node deleted "
        "(force detach at once)",
    )
    volume_reattach: float = _budget(
        60.0,
        "old VolumeAttachment gone -> volume attached to the replacement pod's node",
    )
    pod_io_lost: float = _budget(
        150.0,
        "storage network cut -> the node's pods with volumes unready (their I/O hangs: the "
        "readiness probe times out, then the storage client gives up; an iSCSI session's "
        "replacement timeout is 120 s)",
    )
    node_ready_after_power_on: float = _budget(
        600.0, "power-on acknowledged -> Node Ready True (server POST, boot, kubelet start)"
    )
    drain: float = _budget(
        300.0,
        "drain started -> every evictable pod evicted (PDB 429 answers retried)",
    )
    node_delete: float = _budget(60.0, "Node delete requested -> Node object gone")
    job_rerun: float = _budget(
        60.0, "Job re-run requested -> the old Job gone (its pods in the background), created again"
    )
    job_complete: float = _budget(
        300.0, "Job created again -> its Complete condition (the Job controller's verdict)"
    )
    service_outage: float = _budget(
        75.0,
        "longest continuous health-check failure of a critical workload's service "
        "(endpoints leave when the node is marked NotReady)",
    )
    recovery: float = _budget(
        600.0,
        "undo started (power on, uncordon, taint removed) -> every node and workload of "
        "interest healthy again",
    )

    # -- lookup -----------------------------------------------------------------------------

    def get(self, name: str) -> float:
        """The budget ``name`` (any spelling :func:`canonical_budget_name` accepts)."""
        value: float = getattr(self, canonical_budget_name(name))
        return value

    def describe(self, name: str) -> str:
        """Where the phase of budget ``name`` starts and ends."""
        field = _FIELDS[canonical_budget_name(name)]
        return str(field.metadata["doc"])

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in _FIELDS}

    # -- derivation -------------------------------------------------------------------------

    def with_overrides(
        self, overrides: Mapping[str, object], *, source: str = "", field: str = ""
    ) -> Budgets:
        """A copy with some budgets replaced.

        Names may be spelled as in :func:`canonical_budget_name`; values are seconds (a
        positive number) or a duration string (``"90s"``, ``"6m"``). Raises ``ConfigError``
        naming the bad key and listing the valid names.
        """
        changes: dict[str, float] = {}
        for raw_name, raw_value in overrides.items():
            where = f"{field}.{raw_name}" if field else str(raw_name)
            name = canonical_budget_name(str(raw_name), source=source, field=where)
            changes[name] = parse_duration(raw_value, source=source, field=where)
        return dataclasses.replace(self, **changes)

    def scaled(self, factor: float) -> Budgets:
        """Every budget multiplied by ``factor`` (a slow lab, a loaded CI runner)."""
        if not (math.isfinite(factor) and factor > 0):
            raise ConfigError(f"scale factor must be a positive number, got {factor!r}")
        return dataclasses.replace(self, **{n: v * factor for n, v in self.as_dict().items()})


_FIELDS: Final[dict[str, dataclasses.Field[float]]] = {
    f.name: f for f in dataclasses.fields(Budgets)
}

PROFILES: Final[Mapping[str, Budgets]] = {
    "fast": Budgets(
        power_ack=10.0,
        power_state_verify=20.0,
        node_not_ready=20.0,
        control_plane_node_not_ready=30.0,  # + leader lease 8 s and retry 2 s
        taint_applied=25.0,  # one node per 10 s per zone, plus the monitor period
        pod_eviction=25.0,
        pod_rescheduled=30.0,
        pod_gc=90.0,
        volume_detach=420.0,
        volume_detach_out_of_service=30.0,  # PodGC runs every 20 s
        volume_reattach=20.0,
        pod_io_lost=20.0,
        # A lab node boots in 15 s (the fast timings), then kwok posts it Ready: 17-21 s measured
        # quiet. A rack powered on at once, with a control plane among it whose API server and
        # etcd member restart, took over 27 s in `make test` (2026-11-28, two labs and a kind
        # cluster beside it, load about 40): 30 s left no room for a shared machine.
        node_ready_after_power_on=45.0,
        drain=60.0,
        node_delete=30.0,
        job_rerun=30.0,
        job_complete=30.0,
        # A critical singleton whose node is power-cycled is down until the node is back:
        # the hold, the node's boot (the lab's fast timings: 15 s) and its pod's Ready. 25 s
        # was set when a lab node came back the moment its power did; a longevity cycle then
        # measured 26.0 s.
        service_outage=40.0,
        recovery=90.0,
    ),
    "upstream": Budgets(),
}


def budget_names() -> list[str]:
    """Every budget name, in declaration order."""
    return list(_FIELDS)


def profile(name: str, *, source: str = "", field: str = "") -> Budgets:
    """The budgets of profile ``name``; ``ConfigError`` listing the profiles otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(
            f"unknown budget profile {name!r}; must be one of: {', '.join(PROFILES)}",
            source=source,
            field=field,
        ) from None


_SEPARATORS = re.compile(r"[\s\-_]+")


def dashed(name: str) -> str:
    """A budget's one written spelling: ``node_not_ready`` -> ``node-not-ready`` (as in a
    step's ``the node-not-ready budget``, an inventory's ``budgets.overrides`` and the docs)."""
    return name.replace("_", "-")


class BudgetSpellingWarning(UserWarning):
    """A budget name written otherwise than with dashes: read, but say the right key."""

    def __init__(self, written: str, name: str) -> None:
        self.written = written
        self.name = name
        super().__init__(
            f"budget {written!r}: read as {dashed(name)!r}; write budget names with dashes "
            f"({dashed(name)!r}), as the steps and the docs do"
        )


def canonical_budget_name(name: str, *, source: str = "", field: str = "") -> str:
    """The field name of a budget written the way people write it.

    ``"node-not-ready budget"``, ``"Node not ready"``, ``"the node_not_ready budget"`` and
    ``"node_not_ready"`` all give ``"node_not_ready"``. Unknown names raise ``ConfigError``
    with the closest match and the list of valid names.
    """
    words = _SEPARATORS.sub(" ", name.strip().lower()).split()
    if words and words[0] == "the":
        words = words[1:]
    if words and words[-1] == "budget":
        words = words[:-1]
    key = "_".join(words)
    if key in _FIELDS:
        return key
    close = difflib.get_close_matches(key, _FIELDS, n=1)
    hint = f" (did you mean {dashed(close[0])!r}?)" if close else ""
    raise ConfigError(
        f"unknown budget {name!r}{hint}; valid budgets: {', '.join(map(dashed, _FIELDS))}",
        source=source,
        field=field,
    )


def budget_for(name: str, budgets: Budgets) -> float:
    """Seconds allowed for the phase ``name`` in ``budgets`` (``"node-not-ready budget"``)."""
    return budgets.get(name)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS: Final[Mapping[str, float]] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: object, *, source: str = "", field: str = "") -> float:
    """Seconds from a positive number or a string such as ``"90"``, ``"90s"``, ``"6m"``."""
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(
            f"{value!r} is not a valid duration; must be a positive number of seconds "
            "or a string such as '90s', '6m', '1h'",
            source=source,
            field=field,
        )
    return seconds
