"""What the cluster's users and its control plane must have kept: the critical workloads
spread over racks before the failure (checked, or restored by evictions), their services
answering and their replicas Ready throughout, the API and etcd's quorum answering through
the cluster endpoint, every readiness check passing after the return (through the cluster
endpoint and on a node's own API server), and the cluster back to the steady state it was
found in.

Each step parses its sentence, resolves its limit and calls one function of
:mod:`harness.scenario.expectations.availability`, :mod:`harness.scenario.expectations.apiprobe`
or :mod:`harness.scenario.acts.spread`.
"""

from __future__ import annotations

from pytest_bdd import given, then

from harness.budgets import Budgets
from harness.inventory import Inventory
from harness.kube.client import KubeClient
from harness.kube.observer import Observer
from harness.kube.timeline import Timeline
from harness.scenario.acts import spread
from harness.scenario.expectations import availability
from harness.scenario.expectations.apiprobe import (
    API_PROBE,
    ETCD_PROBE,
    ApiProber,
    api_ready_after,
    longest_outage,
    own_api_ready_after,
)
from harness.scenario.expectations.steady_state import Baseline
from harness.scenario.report import Measurements
from harness.scenario.targets.choice import Outage, PoweredOn
from harness.session import Session
from harness.steps.support.limits import Limit
from harness.steps.support.phrases import phrase


@given(phrase("every critical workload has Ready replicas in at least {count:d} racks"))
def critical_spread(
    count: int, inventory: Inventory, timeline: Timeline, baseline: Baseline
) -> None:
    """The Ready pods of every critical Deployment and StatefulSet run in >= count racks."""
    availability.spread(inventory, timeline, baseline, count)


@given("the critical workloads are spread across racks again")
def critical_respread(
    session: Session,
    inventory: Inventory,
    observer: Observer,
    timeline: Timeline,
    baseline: Baseline,
    budgets: Budgets,
) -> None:
    """Every critical Deployment and StatefulSet spread over as many racks as it can again
    (its replicas, at most the racks with a schedulable Ready node), as a descheduler would:
    one pod at a time of the rack holding most of it is evicted through the Eviction API (its
    PodDisruptionBudget respected, a refusal retried within the drain budget), each eviction
    kept in the journal (owing nothing: its controller replaces the pod), and the next waits
    until the workload is Ready again (the pod-rescheduled budget)."""
    spread.respread(session, inventory, observer, timeline, baseline.workloads, budgets)


@given("the API is probed through the cluster endpoint", target_fixture="api_probed")
def api_is_probed(api_probes: list[ApiProber]) -> list[ApiProber]:
    """GET /readyz and a quorum read (GET a namespace) through the kubeconfig's server, four
    times a second, until the scenario ends. Put it before the failure: "the API answered
    ..." and "etcd kept its quorum ..." judge these probes' samples from the failure on."""
    return api_probes


@then(phrase("every critical service stayed available, with no outage longer than {limit:Limit}"))
def services_available(
    limit: Limit,
    timeline: Timeline,
    baseline: Baseline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Each critical workload's health probe had no run of failures longer than the limit
    since the scenario started; non-critical ones are measured, not judged."""
    availability.services_available(timeline, baseline, limit.seconds(budgets), measurements)


@then(phrase("every critical workload kept at least {count:d} Ready replica throughout"))
@then(phrase("every critical workload kept at least {count:d} Ready replicas throughout"))
def critical_workloads_kept(
    count: int,
    outage: Outage,
    timeline: Timeline,
    baseline: Baseline,
    measurements: Measurements,
) -> None:
    """From the power-off until now, each critical Deployment and StatefulSet had at least
    ``count`` pods Ready and not Terminating."""
    availability.replicas_kept(timeline, baseline, outage.sent, count, measurements)


@then(
    phrase(
        "the API answered through the cluster endpoint, with no outage longer than {limit:Limit}"
    )
)
def api_answered(
    limit: Limit,
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
    api_probed: list[ApiProber],
) -> None:
    """GET /readyz through the cluster endpoint: no run of failures longer than the limit,
    from the power-off until now."""
    seconds = limit.seconds(budgets)
    longest_outage(API_PROBE, "API", seconds, outage.sent, timeline, measurements)


@then(phrase("etcd kept its quorum, with no failed quorum read for longer than {limit:Limit}"))
def etcd_kept_quorum(
    limit: Limit,
    outage: Outage,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
    api_probed: list[ApiProber],
) -> None:
    """Quorum reads through the cluster endpoint (GET a namespace, no resourceVersion): no
    run of failures longer than the limit, from the power-off until now."""
    seconds = limit.seconds(budgets)
    longest_outage(ETCD_PROBE, "etcd quorum reads", seconds, outage.sent, timeline, measurements)


@then(phrase("the API reports every readiness check passing within {limit:Limit}"))
def api_fully_ready(
    limit: Limit,
    powered_on: PoweredOn,
    kube: KubeClient,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
    api_probes: list[ApiProber],
) -> None:
    """GET /readyz answers 200 (every check passing) after the power-on, within the limit;
    the verbose answer is attached. Asked through the cluster endpoint, so any ready API
    server may answer: that the powered-on node's own API server and etcd member are back is
    the step "the node's own API server reports every readiness check passing"."""
    seconds = limit.seconds(budgets)
    api_ready_after(kube, timeline, powered_on.last_sent, seconds, measurements)


@then(
    phrase("the node's own API server reports every readiness check passing within {limit:Limit}")
)
def node_api_ready(
    limit: Limit,
    powered_on: PoweredOn,
    kube: KubeClient,
    inventory: Inventory,
    timeline: Timeline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """GET /readyz on each powered-on control-plane node's own API server (its inventory
    ``api_endpoint``, not the cluster endpoint) answers 200 after the power-on, within the
    limit. In kubeadm's stacked layout that server talks to its own etcd member only, so its
    etcd check passing shows the member is back in the quorum."""
    seconds = limit.seconds(budgets)
    own_api_ready_after(
        kube, inventory, powered_on.nodes, timeline, powered_on.last_sent, seconds, measurements
    )


@then(phrase("the cluster is back to steady state within {limit:Limit}"))
def back_to_steady_state(
    limit: Limit,
    inventory: Inventory,
    observer: Observer,
    timeline: Timeline,
    baseline: Baseline,
    budgets: Budgets,
    measurements: Measurements,
) -> None:
    """Every node as found (Ready, same cordon flag and taints), every workload fully Ready
    with nothing Terminating, every volume attached once, every service answering; measured
    from the harness's last recorded action (a request or its acknowledgement), whatever it
    was: normally the return (power-on, heal, kubelet start, uncordon, untaint); in a
    scenario with no return step, the failure's own last action (its limit then covers the
    armed heal or kubelet start too); with no action at all, from the steady state found
    at the start."""
    seconds = limit.seconds(budgets)
    availability.back_to_steady(inventory, observer, timeline, baseline, seconds, measurements)
