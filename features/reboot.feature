@epic:node-failure @disruptive @needs_bmc @serial
Feature: Reboots through the BMC
  A power cycle (off, then on again at once: for one node the BMC's own reset) of one node and
  of several at once. The BMC reads On again at once, but the server then boots before its
  kubelet reports (the lab's nodes for `lab up --boot-seconds`, 15 s with fast timings), so
  Kubernetes sees each node NotReady and Ready again within its budgets, and every critical
  workload keeps a Ready replica throughout.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: A worker is rebooted through its BMC
    Given a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod
    When the node is rebooted
    Then the node is NotReady within the control-plane-node-not-ready budget
    And the node is Ready within the node-ready-after-power-on budget
    And every critical workload kept at least 1 Ready replica throughout
    And the cluster is back to steady state within the recovery budget

  Scenario: Two workers of different racks are rebooted at once
    Given two worker nodes
    When the nodes are rebooted
    Then every lost node is NotReady within the control-plane-node-not-ready budget
    And every lost node is Ready within the node-ready-after-power-on budget
    And every critical workload kept at least 1 Ready replica throughout
    And the cluster is back to steady state within the recovery budget
