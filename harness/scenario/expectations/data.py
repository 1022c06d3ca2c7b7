"""The data check as a scenario's two phases: tokens written to the volumes of named
workloads before the disruption, read back from whichever pod holds each volume after it.

The check itself (:mod:`harness.checks.data`) works on any cluster where the probe app
serves its volumes; this module only turns the inventory's workload names into the pods'
label selectors and records the measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.checks import CheckFailed
from harness.checks.data import VolumeToken, tokens_to_json, verify_tokens, write_tokens
from harness.errors import ConfigError
from harness.kube.client import KubeClient
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage
from harness.scenario.targets.workloads import Workload


@dataclass(frozen=True)
class Tokens:
    """The tokens a scenario wrote, and the workloads they were written for."""

    workloads: tuple[str, ...]
    written: tuple[VolumeToken, ...]


def _selector(w: Workload) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(w.template_labels.items()))


def write_tokens_of(
    kube: KubeClient,
    workloads: Sequence[Workload],
    names: Sequence[str],
    measurements: Measurements,
) -> Tokens:
    """A fresh token on each data volume of every ready pod of the workloads ``names``
    (inventory workload names). A name the inventory does not list is a clear error naming
    the ones it does; a workload without a data volume is one too."""
    chosen: list[Workload] = []
    for name in names:
        found = [w for w in workloads if w.name == name]
        if not found:
            known = ", ".join(sorted({w.name for w in workloads})) or "none"
            raise ConfigError(
                f"data check: no workload {name!r} in the inventory (workloads: {known})",
                field="workloads",
            )
        chosen.extend(found)
    written: list[VolumeToken] = []
    for w in chosen:
        written.extend(write_tokens(kube, w.namespace, _selector(w)))
    measurements.record(
        "data tokens written",
        0.0,
        None,
        {"volumes": list(tokens_to_json(written))},
        started_mono=None,  # not a phase: what was written, for the report
    )
    return Tokens(tuple(w.ref for w in chosen), tuple(written))


def read_back_tokens(
    kube: KubeClient, tokens: Tokens, seconds: float, measurements: Measurements
) -> dict[str, str]:
    """Every token read back from the pod that now holds its volume, within ``seconds``;
    raises :class:`~harness.checks.base.CheckFailed` naming each volume lost or changed.
    Returns where each was read: token label -> the node of the pod that read it."""
    m = verify_tokens(kube, list(tokens.written), timeout_s=seconds)
    measurements.record(
        "data read back", m.duration_s, seconds, m.detail, started_mono=m.started_mono
    )
    return dict(m.detail.get("held_on") or {})


def moved_off(
    tokens: Tokens, read_on: dict[str, str], lost_nodes: Sequence[str], lost_pods: Sequence[str]
) -> list[str]:
    """Of the tokens on claims written by pods of the lost nodes (``lost_pods``: their
    names), the labels of those read back on a node that is not one of ``lost_nodes``.
    Raises :class:`~harness.checks.base.CheckFailed` when one was read back on a lost node,
    or when no token was on such a claim (nothing moved to check)."""
    moved = [t for t in tokens.written if t.claim and t.pod in lost_pods]
    if not moved:
        raise CheckFailed(
            "a token on a volume of a pod of the lost node(s)",
            f"none of the {len(tokens.written)} token(s) was written by a pod of "
            + ", ".join(lost_nodes),
            0.0,
            check="data moved",
        )
    stayed = {
        t.label: read_on.get(t.label, "?")
        for t in moved
        if read_on.get(t.label, "") in ("", *lost_nodes)
    }
    if stayed:
        raise CheckFailed(
            "each token of the lost node's volumes read back on another node",
            "; ".join(
                f"{label}: read on {node or 'an unknown node'}"
                for label, node in sorted(stayed.items())
            ),
            0.0,
            check="data moved",
        )
    return sorted(t.label for t in moved)


def moved_with_data(
    tokens: Tokens, read_on: dict[str, str], outage: Outage, ms: Measurements
) -> None:
    """:func:`moved_off` for the pods the failure's targets ran, recorded as "data moved to
    another node" with the volumes that moved."""
    lost_pods = [p.name for p in outage.targets.pods]
    moved = moved_off(tokens, read_on, outage.nodes, lost_pods)
    ms.record("data moved to another node", 0.0, None, {"volumes": moved}, started_mono=None)
