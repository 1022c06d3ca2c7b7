"""The volumes the lost nodes held and the data on them: their I/O lost to a storage-network
cut (the node itself staying Ready), the Multi-Attach error of a replacement, the volume
still held by the lost node, released by it, attached to the replacement's node; and the
data check (a token written to each volume before the failure, read back after it from
whichever pod holds the volume, moved with it off the lost node).

Each step parses its sentence (the subject phrase: every lost pod's volumes, the member's,
the singleton's) and calls one function of :mod:`harness.scenario.expectations.replacements`
(which first waits for the event the phase measures from),
:mod:`harness.scenario.expectations.phases`, :mod:`harness.scenario.expectations.data` or
:mod:`harness.scenario.expectations.storage_io`.
"""

from __future__ import annotations

import pytest
from pytest_bdd import given, then

from harness.budgets import Budgets
from harness.kube.client import KubeClient
from harness.kube.timeline import Timeline
from harness.scenario.expectations import replacements, storage_io, volumes
from harness.scenario.expectations.data import (
    Tokens,
    moved_with_data,
    read_back_tokens,
    write_tokens_of,
)
from harness.scenario.expectations.steady_state import Baseline
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage
from harness.scenario.targets.select import parse_names
from harness.scenario.targets.workloads import Workload
from harness.steps.fixtures import inventory_names
from harness.steps.support.limits import Limit, Subject
from harness.steps.support.phrases import about, phrase, within


@given(phrase("a token is written to each volume of {names}"), target_fixture="tokens")
@inventory_names(names="workloads")
def tokens_written(
    names: str, kube: KubeClient, baseline: Baseline, measurements: Measurements
) -> Tokens:
    """The data check's first half: a fresh token on each data volume of every ready pod of
    the inventory workloads named (``of quorum and singleton``), read back at once."""
    return write_tokens_of(kube, baseline.workloads, parse_names(names), measurements)


@then(phrase("the node's pods with volumes lose their I/O within {limit:Limit}"))
@then(phrase("the nodes' pods with volumes lose their I/O within {limit:Limit}"))
def pods_lose_io(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """After a storage-network cut: every pod with a ReadWriteOnce volume on the cut nodes
    turns unready within the limit of its node's cut (its I/O hangs, so its readiness
    fails) while it keeps running; nothing to measure without such a pod."""
    storage_io.io_lost(timeline, outage, limit.seconds(budgets), measurements)


@then(phrase("the node stays Ready for {limit:Limit}"))
@then(phrase("the nodes stay Ready for {limit:Limit}"))
def node_stays_ready(
    limit: Limit, outage: Outage, timeline: Timeline, budgets: Budgets, measurements: Measurements
) -> None:
    """Each failed node keeps its kubelet and its API connection: no NotReady for the
    limit from its failure (waited out), Ready at its end; what a storage-network cut must
    leave alone."""
    storage_io.node_kept_ready(timeline, outage, limit.seconds(budgets), measurements)


@then(phrase("{pods:Volumes} reports a Multi-Attach error within {limit:Limit}"))
def lost_volumes_multi_attach(
    pods: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """For each ReadWriteOnce volume the lost node held (of every lost pod, or of the
    singleton), the replacement pod gets a "Multi-Attach error" event, measured from when
    the lost pod stopped blocking it; the messages are attached to the report."""
    plural = (
        "Then every ReadWriteOnce volume of a lost pod reports a Multi-Attach error within <limit>"
    )
    lost = about(request, outage, pods, workloads, plural)
    seconds = limit.seconds(budgets)
    replacements.judge(
        replacements.MULTI_ATTACH, timeline, lost, outage, seconds, measurements, budgets.recovery
    )


@then(phrase("the node still holds {pods:Volumes}"))
def node_still_holds_volumes(
    pods: Subject,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    measurements: Measurements,
) -> None:
    """Each ReadWriteOnce volume the lost node held at the failure (of every lost pod, or the
    singleton's) is still attached to it now: no VolumeAttachment of it on that node was
    detached or deleted since. What a powered-off node's volumes do in Kubernetes until the
    node returns, its pods are deleted (then the 6-minute force detach) or it is declared
    out of service. How long each was held since the failure is recorded."""
    plural = "Then the node still holds the ReadWriteOnce volumes of the lost pods"
    volumes.still_held(
        timeline, about(request, outage, pods, workloads, plural), outage, measurements
    )


@then(phrase("the node releases {pods:Volumes} within {limit:Limit}"))
def node_releases_volumes(
    pods: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """The lost node's VolumeAttachment of each ReadWriteOnce volume it held is detached or
    deleted, measured from the deletion of the pod that held it (the attach/detach
    controller cannot let go before): with the volume-detach budget this is its 6-minute
    force detach, with the volume-detach-out-of-service budget the out-of-service taint's
    immediate one. Of every lost pod, or the singleton's volume."""
    plural = "Then the node releases every ReadWriteOnce volume of a lost pod within <limit>"
    lost = about(request, outage, pods, workloads, plural)
    seconds = limit.seconds(budgets)
    replacements.judge(
        replacements.RELEASED, timeline, lost, outage, seconds, measurements, budgets.recovery
    )


@then(phrase("{pods:Volumes} is attached to its replacement's node within {limit:Limit}"))
def lost_volumes_reattached(
    pods: Subject,
    limit: Limit,
    request: pytest.FixtureRequest,
    workloads: tuple[Workload, ...],
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each ReadWriteOnce volume the lost node held (of every lost pod, or the singleton's)
    is attached to the node of its pod's replacement, measured from its release by the lost
    node."""
    plural = (
        "Then every ReadWriteOnce volume of a lost pod is attached to its replacement's node "
        "within <limit>"
    )
    lost = about(request, outage, pods, workloads, plural)
    seconds = limit.seconds(budgets)
    replacements.judge(
        replacements.REATTACHED, timeline, lost, outage, seconds, measurements, budgets.recovery
    )


@then(
    phrase("every token is read back from its volume within {limit:Limit}"),
    target_fixture="tokens_read_on",
)
def tokens_read_back(
    limit: Limit,
    tokens: Tokens,
    kube: KubeClient,
    budgets: Budgets,
    measurements: Measurements,
) -> dict[str, str]:
    """The data check's second half: each token written before the failure is read back
    from the pod that now holds its volume (the pod mounting the same claim; for an
    emptyDir, the pod of the same name); a lost or different token fails, naming the volume."""
    with within(limit, budgets, "every token read back from its volume") as seconds:
        return read_back_tokens(kube, tokens, seconds, measurements)


@then("every token of the lost node's volumes was read back on another node")
def tokens_moved(
    tokens: Tokens,
    tokens_read_on: dict[str, str],
    outage: Outage,
    measurements: Measurements,
) -> None:
    """After ``every token is read back``: each token on a claim written by a pod of the
    lost node was read by a pod on another node, so the volume moved with its data (the
    node itself still off, or back). Fails when one was read on the lost node, or when no
    token was written on the lost node at all."""
    moved_with_data(tokens, tokens_read_on, outage, measurements)
