"""The step reference, generated from the step definitions themselves and shipped with them.

``powercut steps [WORDS]`` prints it (a ``pip install`` user has no docs/ folder);
``scripts/gen_steps_doc.py`` writes the same text to ``docs/steps.md`` and a test keeps that
file up to date. Each entry says, from the code: every sentence (singular and plural), the
parameters and the values they accept (tables), what the step provides and needs (once
each), where its measurement starts under each failure kind, whether it skips or fails when
there is nothing to judge, and how it behaves on the lab, on kind and on real machines
where that differs.
"""

from __future__ import annotations

import importlib
import inspect
import re
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pytest_bdd.parsers import StepParser
from pytest_bdd.steps import StepFunctionContext, step_function_context_registry

from harness.budgets import PROFILES, Budgets, budget_names, dashed
from harness.power.base import FailureKind
from harness.scenario.select import ALL_WORDS
from harness.steps.fixtures import INVENTORY_NAMES, NEEDS, inventory_names_of, provided_by
from harness.steps.plugin import pytest_plugins as STEP_MODULES
from harness.steps.support.limits import AMOUNT_PATTERN, SUBJECT_TYPES, Limit, Subject

STEP_TYPES = ("given", "when", "then")

#: What a typed field of a sentence accepts, pointing to its table.
FIELD_TYPES = {
    "Limit": "a named budget `the <name> budget` ([Budgets](#budgets)) or `<n> seconds`",
    "Amount": "an amount ([Amounts](#amounts))",
    "Failure": "a failure word ([Failure kinds](#failure-kinds))",
    "Pods": "`every lost pod`, `the member`, `the singleton` ([Subjects](#subjects))",
    "Pods_": "`every lost pod's`, `the member's`, `the singleton's` ([Subjects](#subjects))",
    "Volumes": "the lost pods' volumes or the subject's ([Subjects](#subjects))",
    "One": "`the member` or `the singleton` ([Subjects](#subjects))",
    "d": "an integer (`2`)",
    "w": "one word (letters, digits, underscore)",
    "": "any text",
}

# -- facts the code cannot say by itself ------------------------------------------------------

#: Where each kind of failure's measurements start: the event a failure step records per
#: node (``outage``: "NotReady within", "DaemonSet pods NotReady within", the taint after
#: it) and the one its return records (``powered_on``: "Ready within", "Ready again").
FAILURE_STARTS: dict[FailureKind, tuple[str, str, str]] = {
    FailureKind.POWER_OFF: (
        "`the node loses power`, Dell-style `power`",
        "the BMC's power-off acknowledgement (power state read back Off)",
        "the power-on request",
    ),
    FailureKind.GRACEFUL: (
        "`the node is shut down gracefully`, Dell-style `graceful`",
        "the BMC's acknowledgement of the soft-off (ACPI) request, read back Off",
        "the power-on request",
    ),
    FailureKind.REBOOT: (
        "`the node is rebooted`, Dell-style `reboot`",
        "the power-cycle acknowledgement (the node reads back On again)",
        "the power-cycle request",
    ),
    FailureKind.PARTITION: (
        "`the node is cut off from the network for ...`, Dell-style `partition`",
        "the cut's acknowledgement (the node's own firewall rules in place, over SSH)",
        "the heal request (`the node is reconnected`, or the Dell-style step's end)",
    ),
    FailureKind.KUBELET_STOP: (
        "`the node's kubelet is stopped for ...`, Dell-style `kubelet`",
        "the kubelet stop's acknowledgement (the service reads stopped, over SSH)",
        "the kubelet start request (`the node's kubelet is started again`, or the "
        "Dell-style step's end)",
    ),
}

#: Steps whose start is one of :data:`FAILURE_STARTS` (``outage`` or ``powered_on``).
MEASURES_FROM_FAILURE = {
    "nodes_not_ready": 1,
    "daemon_pods_not_ready": 1,
    "nodes_tainted_unreachable": 1,
    "nodes_ready_again": 2,
    "daemon_pods_ready_again": 2,
    "member_recreated": 2,
    "api_fully_ready": 2,
    "node_api_ready": 2,
}

_SKIP = (
    "Nothing to judge ({what}): the scenario is **skipped**, saying so (a failure with "
    "`--fail-on-skip`)."
)
_ONE = (
    "**Harness error** (exit 2, never a product failure) when the lost nodes ran no such pod "
    "(it names the Givens that provide one) or several (it names the plural form)."
)
#: What a step does when the cluster gives it nothing to act on or to judge.
RULES: dict[str, str] = {
    "pods_terminating": _SKIP.format(what="no inventory pod ran on the lost nodes"),
    "lost_pods_rescheduled": _SKIP.format(what="no lost pod") + " Singular: " + _ONE,
    "replacements_ready": _SKIP.format(what="no lost pod") + " Singular: " + _ONE,
    "lost_pods_replaced_ready": _SKIP.format(what="no lost pod a controller replaces"),
    "lost_stateless_pods_replaced_ready": _SKIP.format(what="no lost pod without a volume"),
    "lost_volumes_multi_attach": _SKIP.format(what="no volume held by a lost node")
    + " Singular: "
    + _ONE,
    "node_still_holds_volumes": _SKIP.format(what="no volume held by a lost node")
    + " Singular: "
    + _ONE,
    "node_releases_volumes": _SKIP.format(what="no volume held by a lost node")
    + " Singular: "
    + _ONE,
    "lost_volumes_reattached": _SKIP.format(what="no volume held by a lost node")
    + " Singular: "
    + _ONE,
    "subject_terminating": _ONE,
    "member_stays_terminating": "Plural: "
    + _SKIP.format(what="no StatefulSet member lost")
    + " Singular: "
    + _ONE,
    "no_second_member": "Plural: "
    + _SKIP.format(what="no StatefulSet member lost")
    + " Singular: "
    + _ONE,
    "member_recreated": "Plural: "
    + _SKIP.format(what="no StatefulSet member lost")
    + " Singular: "
    + _ONE,
    "statefulset_quorum_kept": _SKIP.format(what="no StatefulSet member lost"),
    "daemon_pods_not_ready": _SKIP.format(what="no DaemonSet pod on the node"),
    "daemon_pods_ready_again": _SKIP.format(what="no DaemonSet pod on the node"),
    "daemon_pods_not_evicted": _SKIP.format(what="no DaemonSet pod on the node"),
    "drain_evicted_all": _SKIP.format(what="no inventory pod but DaemonSet pods on the nodes"),
    "drain_left_daemon_pods": _SKIP.format(what="no DaemonSet pod on the nodes"),
    "drain_respected_pdbs": _SKIP.format(what="no workload with a PodDisruptionBudget"),
    "services_available": _SKIP.format(what="no critical workload with a health endpoint"),
    "out_of_service_taint_gone": "**Harness error** when no step removed the taint "
    "(it names `When the out-of-service taint is removed`).",
    "node_api_ready": "**Harness error** when no control-plane node was powered on, or it "
    "has no `api_endpoint` in the inventory.",
    "job_completes": "**Harness error** when the Job named is not the one re-run.",
    "lose_power_through": "**Skipped** when the node's inventory entry offers no such protocol.",
    "cut_off_network": "**Skipped** when the node's drivers cannot partition it (SSH can; "
    "IPMI, Redfish cannot).",
    "stop_kubelets": "**Skipped** when the node's drivers cannot stop its kubelet (SSH, "
    "kind and the lab can).",
    "fail_nodes": "**Skipped** when no node fits the amounts, or a node's drivers cannot do "
    "the failure kind.",
    "restart_pods_by_selector": "**Skipped** when no pod matches the selector.",
    "rerun_job": "**Skipped** when there is no such Job.",
}
_GIVEN_RULE = "**Skipped** when no node of this cluster fits, saying what it lacks."
_THEN_RULE = "Always judges: it passes or **fails** (a missing earlier step is a harness error)."

#: How each step behaves on the embedded lab (kwok nodes, BMC simulators), on kind (real
#: kubelets in containers, ``harness/power/kind.py``) and on real machines (BMCs, SSH),
#: where it differs. Every step has an entry (tests/unit/test_steps_doc.py): "the same
#: everywhere" says that it reads or writes only the API.
_API_ONLY = "The same on the lab, kind and real machines: it reads only the API server."
_TIMINGS = (
    " When it happens depends on the cluster's timings: the lab's `fast` node-monitor grace "
    "12 s, kind's `fast` 16 s, Kubernetes' default 40-50 s (the `upstream` budgets)."
)
DIFFERENCES: dict[str, str] = {
    # -- Given ---------------------------------------------------------------------------
    "cluster_in_steady_state": "The same everywhere, but a real cluster is seldom idle: "
    "every inventory node must be Ready without failure taints and every inventory workload "
    "whole, so leave nodes that are out for maintenance out of the inventory. On the lab and "
    "kind the service probes are the workloads' NodePorts on 127.0.0.1; on real machines "
    "the inventory's `health` URLs, probed from where powercut runs.",
    "worker_with_statefulset_member": "Lab: `quorum`'s members, with CSI volumes that really "
    "attach. kind: `quorum`'s, local-path volumes by default (bound to their node: no "
    "VolumeAttachment, the member can only come back on its own node) or attachable with "
    "`kind up --storage csi`. Real machines: your StatefulSets; whether their volumes move "
    "depends on the CSI driver.",
    "worker_with_singleton": "Lab: `registry` (always on a node with a `quorum` member). "
    "kind: `singleton` (local-path unless `--storage csi`: then it cannot run elsewhere "
    "while its node is off). Real machines: a one-replica Deployment of the inventory with a "
    "ReadWriteOnce claim.",
    "worker_with_pdb_pods": "The same everywhere (PodDisruptionBudgets are read from the "
    "cluster); the lab's and kind's `web` have one, `node-agent` is the DaemonSet.",
    "worker_with_daemonset_pod": "The same everywhere; the lab's and kind's DaemonSet is "
    "`node-agent`.",
    "control_plane_node": "Lab: three control planes by default, each with its own etcd "
    "member and API server (`api_endpoint` in the inventory). kind: one by default, so the "
    "scenario is skipped (three with `kind up --control-planes 3`). Real machines: your "
    "control-plane nodes, which need a BMC (SSH cannot power them on again).",
    "busiest_rack": "Lab: a rack is 1 control plane + 3 workers (4 nodes, "
    "`safety.max_nodes_down` 4). kind: racks are zone labels dealt round-robin; with 3 nodes "
    "`max_nodes_down` 1 refuses it. Real machines: the inventory's racks; every node needs a "
    "BMC and the safety limits must allow a whole rack.",
    "third_of_workers": "Lab: 3 of 9 workers, one per rack. kind: with 2 workers no choice "
    "spares `web` and `quorum` their min_available, so it is skipped.",
    "critical_spread": _API_ONLY,
    "some_workers": "The same everywhere; the safety limits (`safety.max_nodes_down`, "
    "`max_rack_fraction`) are checked when the chosen nodes are failed, not here.",
    "some_control_planes": "Lab: 3 (or `--control-planes 1|5`). kind: 1 unless "
    "`--control-planes 3`. Failing a majority is refused by the quorum rule before any "
    "power-off.",
    "some_nodes_of_rack": "Rack names come from the inventory: lab `rack-a`..`rack-c`, kind "
    "`rack-a`.. (zone labels), yours on real machines; a name it lacks is refused before the "
    "run.",
    "some_labelled_nodes": "Evaluated by the API server: the lab's nodes carry "
    "`powercut.io/lab=true`, `type=kwok` and the role labels (`docs/lab.md`); kind's and real "
    "nodes their own labels.",
    "named_nodes": "Node names come from the inventory (lab `cp-1`, `w-a1` ...; kind "
    "`<name>-worker` ...); a name it lacks is refused before the run.",
    "tokens_written": "Needs pods running powercut's probe app (`PUT /tokens/<volume>` "
    "through the API server's pod proxy): kind's workloads run it; the lab's pods are kwok's "
    "and run no container, so on the lab this step is a harness error; on real machines "
    "only workloads that serve the probe app can be checked.",
    "api_is_probed": "Lab: through HAProxy to three API servers. kind: through its load "
    "balancer (three control planes) or straight to the one API server. Real machines: the "
    "kubeconfig's server, as your clients connect.",
    # -- When: failures ------------------------------------------------------------------
    "lose_power": "Lab: the node's processes get SIGKILL at once (kwok, and on a "
    "control-plane node etcd and the control-plane components); its BMCs (Redfish, IPMI, "
    "SSH simulators) read Off once they all exited. kind: `docker kill --signal KILL` of the "
    "node container. Real machines: the BMC (IPMI chassis power off, Redfish ForceOff) or, "
    "with an SSH primary driver, `command_off_forced` (`poweroff --force` ...), after which "
    "SSH cannot tell off from cut off." + _TIMINGS,
    "lose_power_through": "Lab: every node has ipmi, redfish and ssh (one primary, the others "
    "as `power_alternatives`). kind: only `kind`, so ipmi/redfish/ssh skip. Real machines: "
    "whatever the node's inventory entry lists; SSH powers off from inside the OS.",
    "shut_down_gracefully": "Lab: the node's processes get SIGTERM, SIGKILL after 10 s; its "
    "kubelet stand-in (kwok) just goes silent, so the pods are not ended and NotReady comes "
    "from the node-monitor grace period, as after a forced power-off. kind: `systemctl "
    "poweroff` inside the node, through logind, so the kubelet's graceful node shutdown "
    "(`shutdownGracePeriod` 10 s) ends the pods first (phase Failed, reason Terminated: "
    "their replacements start before the node is even NotReady); off in about 8 s. Real "
    "machines: ACPI soft-off through the BMC (IPMI soft, Redfish GracefulShutdown); with "
    "GracefulNodeShutdown configured the kubelet posts NotReady itself and the not-ready "
    "taint comes before the unreachable one; an OS that ignores ACPI never goes off "
    "(power-state-verify fails).",
    "power_on_again": "Lab: the BMCs read On at once, the node boots `--boot-seconds` (15 s "
    "`fast`, 60 s `upstream`) before kwok starts; kwok does not re-register a deleted Node, "
    "so the step re-creates it. kind: `docker start`, Ready 3-7 s later; the kubelet "
    "re-registers a deleted Node. Real machines: POST and boot take minutes (the upstream "
    "node-ready-after-power-on budget is 600 s); an SSH-only node cannot be powered on (the "
    "step fails: give it a BMC).",
    "cut_off_network": "Lab: the node's kwok process stops while its BMCs read On and its "
    "pods stay 'running'; on a control-plane node its etcd member and API server keep "
    "running and stay in the quorum (only the kubelet stand-in is cut). kind: iptables in "
    "the node container drop everything to and from the other nodes; the pods keep "
    "serving inside it, and kube-proxy keeps sending them a share of the Service's requests "
    "until the node is NotReady. Real machines: over SSH as root, an iptables chain drops "
    "everything but SSH and loopback, the heal armed first as a `systemd-run` timer (needs "
    "iptables and systemd; `command_partition` and `command_heal` for other firewalls); a "
    "control-plane node's etcd member leaves the quorum.",
    "stop_kubelets": "Lab: the node's kwok process stops (the same as a partition as the API "
    "sees it). kind: `systemctl stop kubelet` in the node container (`KillMode=process`: the "
    "containers keep running), its start armed as a `systemd-run` timer. Real machines: the "
    "same over SSH as root (`command_kubelet_stop`); static pods (etcd, the API server on a "
    "control-plane node) keep running.",
    "undo_cut": "Lab: kwok starts again at once (no boot) and takes the node's lease over. "
    "kind and real machines: the iptables chain is removed or the kubelet started over SSH "
    "(kind: `docker exec`), and the armed timer cancelled.",
    "reboot_nodes": "Lab: forced off, then on: the BMCs read On at once, and the node boots "
    "`--boot-seconds` (15 s `fast`, longer than its 12 s grace period) before kwok starts, "
    "so the node does go NotReady. kind: `docker kill` then `docker start`: the kubelet is "
    "back within kind's 16 s grace period, and the node reads NotReady from the restarted "
    "kubelet's own first status until its runtime is ready (the built-in reboot feature "
    "passed on kind). "
    "Real machines: the BMC's power cycle (or `command_reboot` over SSH, which reads On "
    "only once SSH answers again); POST and boot take minutes: use the upstream "
    "node-ready-after-power-on budget or an override.",
    "fail_nodes": "Each node's primary driver does the failure, as in the single steps "
    "(lab, kind and real machines differ as they do there). `partition` and `kubelet` need "
    "SSH on real machines; `reboot` and the return of `power`/`graceful` need a driver that "
    "powers on (a BMC, kind, the lab): SSH-only nodes fail. kind's `max_nodes_down` 1 "
    "refuses more than one node.",
    "restart_pods_by_selector": "The same everywhere (deletes through the API); the "
    "namespaces differ: the lab's workloads are in `lab`, kind's in `shop`.",
    "rerun_job": "The same everywhere; the lab has the Job `seed-data` in `lab`, kind none.",
    "delete_node_object": "Lab: kwok does not re-register the Node; the power-on (or the "
    "undo) re-creates it from its manifest. kind and real machines: the kubelet registers "
    "it again when it starts (after the power-on); a kubelet that keeps running does not.",
    "force_delete_stuck_pods": "The fence reads power through the BMC (lab: its simulators; "
    "kind: the container's state); an SSH-only node cannot be fenced (SSH cannot tell off "
    "from cut off), so it is refused.",
    "taint_out_of_service": "As the force-delete: each node's own power reading must say "
    "Off (a partitioned node, whose BMC reads On, is refused). Volumes are force-detached at "
    "once where they have VolumeAttachments: the lab, kind with `--storage csi`, CSI drivers "
    "with `attachRequired`.",
    "remove_out_of_service_taint": _API_ONLY,
    "drain_node": "The same everywhere (Eviction API). On kind with local-path volumes a "
    "`quorum` member is pinned to its node and its PodDisruptionBudget refuses the next "
    "eviction, so the drain cannot finish.",
    "cordon_nodes": _API_ONLY,
    "uncordon_node": _API_ONLY,
    "run_chaos_experiment": "As the actions the experiment names (power, drain ...); the "
    "built-in experiments are written for the lab's inventory.",
    "workers_lose_power_in_turn": "As `the nodes lose power at once` and `powered on again`, "
    "cycle after cycle; a real machine's boot makes each cycle minutes long.",
    # -- Then ----------------------------------------------------------------------------
    "restarted_pods_ready": "Lab: kwok's pods are Ready as soon as they are scheduled. kind "
    "and real machines: image start and readiness probes add seconds.",
    "job_completes": "Lab: kwok completes the Job's pod at once. kind and real machines: "
    "the container really runs.",
    "nodes_not_ready": "After a forced failure the node-monitor grace period decides."
    + _TIMINGS
    + " A graceful shutdown on a real kubelet posts NotReady itself, earlier. After a lab "
    "reboot it comes from the boot time (15 s `fast`); on kind from the restarted kubelet's "
    "first status. A reboot shorter than the grace period whose kubelet comes back Ready at "
    "once would never be NotReady, and this step then fails.",
    "nodes_tainted_unreachable": "A graceful shutdown on a real kubelet (kind, real "
    "machines) gets the not-ready taint first; this step waits for the unreachable one, "
    "which follows once the node stops posting status. Tainting is rate-limited per zone "
    "everywhere.",
    "node_object_gone": "The same everywhere: gone until the power-on (lab: the step "
    "re-creates it; kind and real machines: the kubelet registers it at its start).",
    "nodes_ready_again": "Lab: the boot (`--boot-seconds`, 15 s `fast`) then kwok's first "
    "status; after a partition or kubelet stop at once. kind: 3-7 s after `docker start`. "
    "Real machines: POST, boot and the kubelet's start: minutes (upstream budget 600 s).",
    "out_of_service_taint_gone": _API_ONLY,
    "pods_terminating": "The tolerations decide: 10 s on the lab and kind (`fast`), 300 s by "
    "default. A graceful shutdown on a real kubelet ends the pods (phase Failed) before any "
    "eviction; they are marked Terminating later, when the taint's toleration runs out.",
    "subject_terminating": "As `the node's pods are Terminating`.",
    "lost_pods_deleted": "Lab: the control plane deletes them (PodGC, the out-of-service "
    "taint); kwok is off. kind and real machines: the same, unless the kubelet comes back "
    "and finishes them first.",
    "lost_pods_rescheduled": "The same everywhere, but a pod whose volume is bound to the "
    "lost node (kind's default local-path, local PVs) cannot be scheduled elsewhere and "
    "this step fails.",
    "lost_pods_replaced_ready": "Lab: a replacement is Ready once scheduled (and its volume "
    "attached: the lab gates readiness on it like a kubelet). kind and real machines: image "
    "pull, start and readiness probes add to it.",
    "lost_stateless_pods_replaced_ready": "As `every lost pod is replaced by a Ready pod`. "
    "After a real graceful shutdown the replacements start when the kubelet ends the pods, "
    "before the node is NotReady.",
    "replacements_ready": "As `every lost pod is replaced by a Ready pod`; a volume's attach "
    "is measured first.",
    "lost_volumes_multi_attach": "Needs VolumeAttachments: the lab's CSI driver, kind with "
    "`--storage csi`, a real CSI driver with `attachRequired`. kind's default local-path has "
    "none (nothing to judge: skipped).",
    "node_still_holds_volumes": "Needs VolumeAttachments (as the Multi-Attach step). The "
    "same everywhere: the real attach/detach controller keeps the volume while its pod "
    "exists and the node last reported it in use (kind with `--storage csi`: held 24.7-29.6 s "
    "after the failure when checked).",
    "node_releases_volumes": "Needs VolumeAttachments (as the Multi-Attach step). The "
    "volume-detach budget is the controller's fixed 6-minute force detach everywhere; the "
    "lab freezes the dead node's `volumesInUse` as a dead kubelet does.",
    "lost_volumes_reattached": "Lab: attached at once by its fake attacher. kind with "
    "`--storage csi`: pcsi's ControllerPublishVolume, under a second. Real machines: the "
    "array's attach time.",
    "member_stays_terminating": _API_ONLY,
    "no_second_member": _API_ONLY,
    "statefulset_quorum_kept": "Lab: kwok's pods are Ready while their node is unreachable "
    "until the node lifecycle controller marks them NotReady. kind and real machines: the "
    "same, and a partitioned member's container keeps running.",
    "member_recreated": "Lab: the member is deleted once kwok is back (after the boot) and "
    "its replacement is Ready when its volume is attached. kind and real machines: the "
    "kubelet finishes it, then the container starts.",
    "daemon_pods_not_ready": "The node lifecycle controller marks them NotReady with the "
    "node: the same everywhere. A graceful shutdown on a real kubelet ends them too (the "
    "shutdown manager stops every pod).",
    "daemon_pods_ready_again": "Lab: kwok's status after the boot. kind and real machines: "
    "the kubelet restarts the containers.",
    "daemon_pods_not_evicted": "The same everywhere: DaemonSet pods tolerate the "
    "unreachable and not-ready taints.",
    "drain_evicted_all": _API_ONLY,
    "drain_left_daemon_pods": _API_ONLY,
    "drain_respected_pdbs": _API_ONLY,
    "services_available": "Lab: the probes are the lab's health endpoints (200 while the "
    "Service has a ready endpoint). kind: the workloads' own `/readyz` through NodePorts on "
    "127.0.0.1, so kube-proxy's routing to a cut node's pods shows as failures. Real "
    "machines: the inventory's `health` URLs, from where powercut runs.",
    "critical_workloads_kept": _API_ONLY,
    "api_answered": "Needs `Given the API is probed through the cluster endpoint` before "
    "the failure. Lab: HAProxy hides one control plane's loss. kind: with one control plane "
    "there is nothing to lose. Real machines: your load balancer's health checks decide the "
    "gap.",
    "etcd_kept_quorum": "Needs the API probe's Given (as `the API answered ...`) before "
    "the failure. Lab: stacked etcd, a member per control-plane node (a power loss takes "
    "it; a partition or kubelet stop does not). kind: one member unless three control "
    "planes. Real machines: kubeadm's stacked layout or an external etcd (then the node's "
    "loss does not touch it).",
    "api_fully_ready": _API_ONLY,
    "node_api_ready": "Needs each control-plane node's `api_endpoint` (the lab's inventory "
    "has them; kind's single control plane has no quorum to lose; on real machines the "
    "node's own address, port 6443).",
    "back_to_steady_state": "The same everywhere; on real machines the limit must hold the "
    "boot (the upstream recovery budget is 600 s).",
    "tokens_read_back": "As the write: needs the probe app (kind; real workloads that serve "
    "it), a harness error on the lab.",
    "tokens_moved": "Needs volumes that move between nodes: kind with `--storage csi` (its "
    "default local-path volumes stay on their node), or real attachable storage.",
    "no_disruption_left": _API_ONLY,
    "every_cycle_recovered": "As the cycles' failures; `docs/nightly.md` has the lab's and "
    "a real cluster's figures.",
    "every_cycle_within_budgets": "The budgets are the profile's: `fast` on the lab and kind, "
    "`upstream` (or overrides) on real machines.",
    "no_cycle_missed": "As `every cycle kept every phase within its budget`.",
    "statistics_attached": "The same everywhere (files of the run).",
    "slo_held": "Lab: a real Prometheus scraping its API servers and service probes, its "
    "SLOs named in `docs/lab.md`. kind: no Prometheus unless you add one to the inventory. "
    "Real machines: your Prometheus (`prometheus` in the inventory).",
    "every_slo_held": "As `the <name> SLO held throughout`.",
    "alerts_quiet": "Lab: the alerts `LabAPIQuorumLost` and `LabServiceDown` (rules in the "
    "lab's Prometheus). Real machines: your alerting rules, by name or labels.",
}

OUTLINE_EXAMPLE = """\
```gherkin
Feature: Fail workers with any failure kind

  Background:
    Given the cluster is in steady state

  Scenario Outline: Fail <workers> worker(s) with <failure> failure
    When I fail <workers> worker nodes and zero primary nodes with <failure> failure for 20 seconds
    Then every lost node is NotReady within the node-not-ready budget
    And every lost node is Ready within the node-ready-after-power-on budget
    And the cluster is back to steady state within the recovery budget

    Examples:
      | workers | failure   |
      | 1-2     | power     |
      | two     | partition |
      | 1       | kubelet   |
```"""


@dataclass(frozen=True)
class StepDoc:
    type: str
    sentences: tuple[str, ...]
    function: str
    module: str
    line: int
    doc: str
    fields: tuple[tuple[str, str], ...]  # (name, type spec)
    provides: tuple[str, ...]
    needs: tuple[str, ...]
    names: tuple[tuple[str, str], ...] = ()  # (field, inventory kind): checked before a run


def step_modules() -> list[str]:
    """Every step module the plugin loads, ``scenario_steps`` first."""
    first = "harness.steps.scenario_steps"
    found = [m for m in STEP_MODULES if m.endswith("_steps")]
    return [first, *(n for n in sorted(found) if n != first)]


def _fields(parser: StepParser) -> tuple[tuple[str, str], ...]:
    out = []
    for _, name, spec, _ in string.Formatter().parse(parser.name):
        if name:
            out.append((name, spec or ""))
    return tuple(out)


def collect(modules: Iterable[str]) -> list[StepDoc]:
    """The step definitions of ``modules``, one entry per function (in source order)."""
    wanted = set()
    for name in modules:
        importlib.import_module(name)
        wanted.add(name)
    by_func: dict[Callable[..., object], list[StepFunctionContext]] = {}
    for ctx in list(step_function_context_registry.values()):
        if ctx.step_func.__module__ in wanted:
            by_func.setdefault(ctx.step_func, []).append(ctx)
    provided = {
        n for cs in by_func.values() for c in cs for n in provided_by(c.step_func, c.target_fixture)
    }
    docs = []
    for func, contexts in by_func.items():
        first = contexts[0]
        params = inspect.signature(func).parameters
        fields = _fields(first.parser)
        gives = provided_by(func, first.target_fixture)
        sentences = tuple(sorted({c.parser.name for c in contexts}, key=lambda s: (len(s), s)))
        docs.append(
            StepDoc(
                type=first.type or "step",
                sentences=sentences,
                function=func.__name__,
                module=func.__module__,
                line=inspect.getsourcelines(func)[1],
                doc=inspect.cleandoc(func.__doc__ or ""),
                fields=fields,
                provides=gives,
                needs=tuple(
                    p
                    for p in params
                    if p in provided and p not in gives and p not in {n for n, _ in fields}
                ),
                names=tuple(sorted(inventory_names_of(func).items())),
            )
        )
    modules_order = {m: i for i, m in enumerate(modules)}
    docs.sort(key=lambda d: (STEP_TYPES.index(d.type), modules_order[d.module], d.line))
    return docs


def sentence(text: str) -> str:
    """A sentence as written in a feature file: ``{limit:Limit}`` shows as ``{limit}``."""
    return "`" + re.sub(r"\{(\w+):[^}]*\}", r"{\1}", text) + "`"


def _provides_needs(d: StepDoc) -> list[str]:
    out = []
    if d.provides:
        out.append("**Provides:** " + "; ".join(f"`{p}` ({NEEDS.get(p, p)})" for p in d.provides))
    if d.needs:
        out.append(
            "**Needs** (from an earlier step): "
            + "; ".join(f"`{n}` ({NEEDS.get(n, n)})" for n in d.needs)
        )
    return out


def _starts(d: StepDoc) -> list[str]:
    which = MEASURES_FROM_FAILURE.get(d.function)
    if which is None:
        return []
    col = "the failure" if which == 1 else "the return"
    rows = [
        "",
        f"Measured from {col}, by failure kind:",
        "",
        "| failure | starts at |",
        "|---|---|",
    ]
    rows += [f"| `{k.value}` | {v[which]} |" for k, v in FAILURE_STARTS.items()]
    return rows


def builtin_limits() -> dict[str, list[str]]:
    """For each step function, the limits the built-in features give it (``the
    pod-rescheduled budget``), most used first: which budget fits a step, from use."""
    from collections import Counter

    from pytest_bdd.parser import FeatureParser

    from harness.steps import BUILTIN_FEATURES

    for module in step_modules():
        importlib.import_module(module)
    used: dict[str, Counter[str]] = {}
    contexts = [
        c
        for c in step_function_context_registry.values()
        if c.step_func.__module__.startswith("harness.steps")
    ]
    for path in sorted(BUILTIN_FEATURES.rglob("*.feature")):
        feature = FeatureParser(str(path.parent), path.name).parse()
        for template in feature.scenarios.values():
            rows = [r for ex in template.examples for r in ex.as_contexts()] or [{}]
            for row in rows:
                for step in template.render(row).steps:
                    for c in contexts:
                        if c.type == step.type and c.parser.is_matching(step.name):
                            args = c.parser.parse_arguments(step.name) or {}
                            for value in args.values():
                                if isinstance(value, Limit):
                                    name = c.step_func.__name__
                                    used.setdefault(name, Counter())[value.text] += 1
    return {name: [t for t, _ in counts.most_common()] for name, counts in used.items()}


def entry(d: StepDoc, limits: dict[str, list[str]] | None = None) -> list[str]:
    """One step's entry, Markdown lines."""
    out = [f"### {sentence(d.sentences[0])}", ""]
    for alt in d.sentences[1:]:
        out += [f"Also: {sentence(alt)}", ""]
    if d.doc:
        out += [d.doc, ""]
    if d.fields:
        out += ["| parameter | accepts |", "|---|---|"]
        names = dict(d.names)
        out += [
            f"| `{n}` | "
            + (
                f"{INVENTORY_NAMES[names[n]]} (checked against the inventory before the run)"
                if n in names
                else FIELD_TYPES.get(s, f"format `{s}`")
            )
            + " |"
            for n, s in d.fields
        ]
        out.append("")
    facts = _provides_needs(d)
    rule = RULES.get(d.function) or (
        _GIVEN_RULE if d.type == "given" and "targets" in d.provides else None
    )
    if rule is None and d.type == "then":
        rule = _THEN_RULE
    if rule:
        facts.append("**Nothing to act on or judge:** " + rule)
    used = (limits or {}).get(d.function)
    if used:
        facts.append("**Limit in the built-in features:** " + ", ".join(f"`{u}`" for u in used))
    if d.function in DIFFERENCES:
        facts.append("**Lab, kind, real machines:** " + DIFFERENCES[d.function])
    out += [f"- {f}" for f in facts]
    out += _starts(d)
    out += ["", f"_`{d.module.replace('.', '/')}.py`: `{d.function}`_", ""]
    return out


def value_tables() -> list[str]:
    """The accepted values of every typed field, as tables."""
    out = ["## Accepted values", "", "### Amounts", ""]
    out += [
        "| written | means |",
        "|---|---|",
        "| `zero`, `no`, `one` ... `twelve`, `0`, `3` | that many nodes |",
        "| `one-third`, `one-half`, `two-thirds`, `one-quarter`, `1/3`, `50%` | that "
        "fraction of the nodes that fit, rounded up (at least one unless it is zero) |",
        "| "
        + ", ".join(f"`{w}`" for w in sorted(ALL_WORDS) if re.fullmatch(AMOUNT_PATTERN, w))
        + " | every node that fits |",
        "| `1-2`, `two-three` | a count drawn in that range from the run's seed (`--seed N` "
        "replays it) |",
        "",
        "A count is followed by `worker node` (one) or `worker nodes`; both forms exist for "
        "every node step.",
        "",
        "### Failure kinds",
        "",
        "| word | failure | comes back by |",
        "|---|---|---|",
    ]
    back = {
        FailureKind.POWER_OFF: "power-on through the BMC",
        FailureKind.GRACEFUL: "power-on through the BMC",
        FailureKind.REBOOT: "itself (a power cycle)",
        FailureKind.PARTITION: "the heal (armed on the node before the cut)",
        FailureKind.KUBELET_STOP: "the kubelet's start (armed on the node before the stop)",
    }
    what = {
        FailureKind.POWER_OFF: "forced power-off",
        FailureKind.GRACEFUL: "graceful shutdown (ACPI soft-off)",
        FailureKind.REBOOT: "power cycle: off, then on",
        FailureKind.PARTITION: "cut off from the API server, still running",
        FailureKind.KUBELET_STOP: "kubelet stopped, containers running",
    }
    out += [f"| `{k.value}` | {what[k]} | {back[k]} |" for k in FailureKind]
    out += ["", "### Subjects", "", "| field | every lost pod | the member | the singleton |"]
    out.append("|---|---|---|---|")
    for name, t in SUBJECT_TYPES.items():
        cols = [
            ", ".join(f"`{w}`" for w, s in t.words.items() if s is which) or "-"
            for which in (Subject.LOST, Subject.MEMBER, Subject.SINGLETON)
        ]
        out.append(f"| `{name}` | " + " | ".join(cols) + " |")
    out += [
        "",
        '"The member" is a lost StatefulSet pod; "the singleton" the lost pod of a '
        "one-replica Deployment. The target step's own pod when it chose one (\"a worker node "
        'running a StatefulSet member ..."); after any other target (a rack, a count, names, '
        "labels, the Dell-style step) the one such pod among the lost ones. None or several "
        "is a harness error naming the Givens that provide one, or the plural form.",
        "",
        "### Start events by failure kind",
        "",
        "| failure | written | failure measured from | return measured from |",
        "|---|---|---|---|",
    ]
    out += [f"| `{k.value}` | {a} | {b} | {c} |" for k, (a, b, c) in FAILURE_STARTS.items()]
    out.append("")
    return out


def tag_table() -> list[str]:
    """powercut's own tags and how a project registers its own."""
    from harness.steps.support.tags import MARKERS

    out = [
        "## Tags",
        "",
        "Feature and scenario tags are pytest markers; `powercut run` refuses a tag nobody "
        "registered (naming file and line) before anything runs. `@epic:<slug>` and "
        "`@story:<slug>` are Allure labels, not markers. Register your own, with their "
        "meaning, in your project (no package edit): `powercut.toml` (`[tags]`) or "
        "`pyproject.toml` (`[tool.powercut.tags]`), in the features directory or one above "
        "it, or in the current directory:",
        "",
        "```toml",
        "[tool.powercut.tags]",
        'storage = "exercises the storage tier"',
        "```",
        "",
        "| tag | meaning |",
        "|---|---|",
    ]
    out += [f"| `@{name}` | {meaning} |" for name, meaning in MARKERS.items()]
    out.append("")
    return out


def budget_table() -> list[str]:
    names = budget_names()
    profiles = list(PROFILES)
    lines = [
        "## Budgets",
        "",
        "Written with dashes everywhere: in steps (`the node-not-ready budget`) and in an "
        "inventory's `budgets.overrides` (`node-not-ready: 40s`; an underscore spelling is "
        "read with a warning naming the dashed key). Seconds per profile.",
        "",
        "| budget | " + " | ".join(profiles) + " | phase |",
        "|---|" + "---|" * len(profiles) + "---|",
    ]
    for n in names:
        values = " | ".join(f"{PROFILES[p].get(n):g}" for p in profiles)
        lines.append(f"| `{dashed(n)}` | {values} | {Budgets().describe(n)} |")
    lines.append("")
    return lines


def render(modules: Iterable[str] | None = None) -> str:
    """The whole reference (docs/steps.md) as Markdown."""
    names = list(modules) if modules is not None else step_modules()
    docs = collect(names)
    out = [
        "# Step vocabulary",
        "",
        "<!-- Generated by scripts/gen_steps_doc.py from the step definitions in steps/",
        "     (harness/steps/reference.py). Do not edit by hand. `powercut steps [WORDS]`",
        "     prints the same. -->",
        "",
        "Every sentence the features (the built-in ones in `features/` and your own, "
        "`powercut run --features DIR`) can use, by keyword. `powercut run` checks every "
        "sentence of every feature against this grammar before anything runs: an unknown "
        "sentence names its file, line and the closest sentences here.",
        "",
        "Each entry: the sentence (and its other forms, singular and plural); its parameters "
        "and the values they accept; what it **provides** to later steps and **needs** from "
        "earlier ones (a step placed before what it needs is a harness error naming the "
        "steps that provide it); what it does when there is nothing to act on or judge; "
        "where a measurement starts under each failure kind; how the lab, kind and real "
        "machines differ. Modules: "
        + ", ".join(f"`steps/{m.rsplit('.', 1)[1]}.py`" for m in names)
        + ".",
        "",
        "## A Scenario Outline",
        "",
        "An outline runs once per row of its Examples; `<name>` is replaced by the row's "
        "value before the sentence is matched, so every value must be one the step accepts "
        "(checked before anything runs):",
        "",
        OUTLINE_EXAMPLE,
        "",
    ]
    out += value_tables()
    limits = builtin_limits()
    for step_type in STEP_TYPES:
        these = [d for d in docs if d.type == step_type]
        if these:
            out += [f"## {step_type.capitalize()}", ""]
            for d in these:
                out += entry(d, limits)
    out += tag_table()
    out += budget_table()
    return "\n".join(out).rstrip() + "\n"


def search(words: Iterable[str]) -> str:
    """The entries whose sentences or description hold every word (case-insensitive); the
    value tables when a word names one (``amounts``, ``budgets``, ``failure``,
    ``subjects``, ``tags``, ``outline``)."""
    wanted = [w.lower() for w in words]
    if not wanted:
        return render()
    out: list[str] = []
    sections = {
        "amount": value_tables,
        "failure": value_tables,
        "subject": value_tables,
        "budget": budget_table,
        "tag": tag_table,
    }
    shown: set[str] = set()
    for w in wanted:
        for key, make in sections.items():
            if w.startswith(key) and make.__name__ not in shown and len(wanted) == 1:
                out += make()
                shown.add(make.__name__)
    if wanted == ["outline"]:
        out += ["## A Scenario Outline", "", OUTLINE_EXAMPLE, ""]
    limits = builtin_limits()
    for d in collect(step_modules()):
        text = " ".join((*d.sentences, d.doc, d.function)).lower()
        if all(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", text) for w in wanted):
            out += [f"## {d.type.capitalize()}", *entry(d, limits)]
    return "\n".join(out).rstrip() + "\n" if out else ""
