@epic:node-failure @disruptive @needs_bmc @serial
Feature: Reboots through the BMC
  A power cycle (off, then on again, in one BMC request) of one node and of several at once:
  each comes back Ready within its budget (at once when it is back before the node monitor
  noticed) and every critical workload keeps a Ready replica throughout.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: A worker is rebooted through its BMC
    Given a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod
    When the node is rebooted
    Then the node is Ready within the node-ready-after-power-on budget
    And every critical workload kept at least 1 Ready replica throughout
    And the cluster is back to steady state within the recovery budget

  Scenario: Two workers of different racks are rebooted at once
    Given two worker nodes
    When the nodes are rebooted
    Then every lost node is Ready within the node-ready-after-power-on budget
    And every critical workload kept at least 1 Ready replica throughout
    And the cluster is back to steady state within the recovery budget
