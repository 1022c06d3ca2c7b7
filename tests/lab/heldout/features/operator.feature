@epic:planned-maintenance @disruptive @serial
Feature: Operator actions: drain by range, out-of-service taint, repopulation runbook

  Background:
    Given the cluster is in steady state

  @normal
  Scenario: A worker with PDB-protected pods drained, judged in the plural
    Given a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod
    When the nodes are drained within the drain budget
    Then no workload went below its PodDisruptionBudget during the drain
    And the nodes' DaemonSet pods were left running
    And every pod of the nodes was evicted through the Eviction API
    When the nodes are uncordoned
    Then the cluster is back to steady state within the recovery budget

  @critical @needs_bmc
  Scenario: The member's node is tainted out-of-service; its volume moves at once
    Given a worker node running a StatefulSet member with a ReadWriteOnce volume
    When the node loses power
    And the node is tainted out-of-service
    Then the node releases the member's volume within the volume-detach-out-of-service budget
    And the lost pods are deleted within the pod-gc budget
    And the member's volume is attached to its replacement's node within the volume-reattach budget
    And the member's replacement is Ready within the pod-rescheduled budget
    When the node is powered on again
    And the out-of-service taint is removed
    Then the node no longer has the out-of-service taint within the taint-applied budget
    And the node is Ready within the node-ready-after-power-on budget
    And the cluster is back to steady state within the recovery budget

  @minor
  Scenario: Repopulation runbook: the Job first, then the web pods
    When the Job seed-data in namespace lab is re-run from its manifest
    And the pods labelled app=web in namespace lab are restarted
    Then the Job seed-data completes within the job-complete budget
    And the restarted pods are replaced by Ready pods within the pod-rescheduled budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget

  @normal @needs_ssh
  Scenario: A DaemonSet pod's kubelet stops; the pod is never evicted
    Given a worker node running a DaemonSet pod
    When the node's kubelet is stopped for 60 seconds
    Then the node's DaemonSet pods are NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    When the node's kubelet is started again
    Then the node's DaemonSet pods are Ready again within the node-ready-after-power-on budget
    And the node's DaemonSet pods were never evicted
    And the cluster is back to steady state within the recovery budget

  @normal @needs_ssh
  Scenario: A third of the workers cut off, judged only after the reconnect
    Given one-third of the worker nodes
    When the nodes are cut off from the network for the recovery budget
    And the nodes are reconnected
    Then every lost node is Ready within the node-ready-after-power-on budget
    And every critical workload kept at least 1 Ready replica throughout
    And the quorum-available SLO held throughout
    And the cluster is back to steady state within the recovery budget
