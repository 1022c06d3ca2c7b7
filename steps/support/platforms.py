"""How each step behaves on the embedded lab, on kind and on real machines, where it
differs: one entry per step, rendered into the step reference (docs/steps.md, `powercut
steps`) by :mod:`harness.steps.reference`."""

from __future__ import annotations

from harness.kube.names import LABEL_LAB

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
    "cluster); the lab's and kind's `web` and `quorum` both have one, so the node chosen runs "
    "a pod of either (not always `web`'s); `node-agent` is the DaemonSet. To pick the node by "
    "the workload it runs, write `a worker node running a pod of web`.",
    "worker_with_pod_of": "The same everywhere; the lab's workloads are `web`, `quorum`, "
    "`registry` and `node-agent`, kind's `web`, `quorum`, `singleton` and `node-agent`.",
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
    "critical_respread": "The same everywhere (the Eviction API only). Lab and kind: `web` "
    "spreads again (a topology spread constraint with whenUnsatisfiable: DoNotSchedule "
    "places its replacement); a workload without such a constraint may land on the same "
    "rack again, and the scenario is then not judged, saying so.",
    "some_workers": "The same everywhere; the safety limits (`safety.max_nodes_down`, "
    "`max_rack_fraction`) are checked when the chosen nodes are failed, not here.",
    "some_control_planes": "Lab: 3 (or `--control-planes 1|5`). kind: 1 unless "
    "`--control-planes 3`. Failing a majority is refused by the quorum rule before any "
    "power-off.",
    "some_nodes_of_rack": "Rack names come from the inventory: lab `rack-a`..`rack-c`, kind "
    "`rack-a`.. (zone labels), yours on real machines; a name it lacks is refused before the "
    "run.",
    "some_labelled_nodes": "Evaluated by the API server: the lab's nodes carry "
    f"`{LABEL_LAB}=true`, `type=kwok` and the role labels (`docs/lab.md`); kind's and real "
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
    "lose_storage_network": "Lab: the node's SSH server receives the SSH driver's firewall "
    "command; the lab's storage controller marks the node's volume pods failed and a kwok "
    "stage turns them unready (reason VolumeIOFailed) while kwok keeps reporting the node. "
    "kind (`kind up --storage csi`): an iptables chain in the node container's network "
    "namespace drops the storage server's address, so the CSI plugin's sshfs mounts hang "
    "and then fail (EIO after its keep-alive, about 17 s); the heal armed as a `systemd-run` "
    "timer. Real machines: the same chain over SSH as root, dropping the inventory's "
    "`storage_network.endpoints` both ways (INPUT, OUTPUT, FORWARD); TCP only when a port is "
    "given; IPv4 only.",
    "pods_lose_io": "Lab: the kwok stage's Ready=False (VolumeIOFailed). kind and real "
    "machines: the kubelet's readiness probe, so it needs a probe that touches the volume "
    "(the kind workloads' `/readyz` writes to every volume); a pod with no such probe stays "
    "Ready while its I/O hangs, and the step fails naming it.",
    "node_stays_ready": "The same everywhere: the Node's Ready condition as the watch saw "
    "it, for the whole limit.",
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
