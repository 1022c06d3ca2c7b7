@epic:planned-maintenance @disruptive @needs_bmc @serial
Feature: Planned maintenance: drain, power off, power on, uncordon
  Before servicing a node the operator drains it through the Eviction API: every pod
  protected by a PodDisruptionBudget leaves only when its budget allows (a refused eviction,
  HTTP 429, is retried), DaemonSet pods stay. Then the node is shut down gracefully through
  its BMC, powered on again and uncordoned. No service may drop below its
  PodDisruptionBudget at any moment of the drain.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: A worker is drained, power-cycled through its BMC and uncordoned
    Given a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod
    When the node is drained within the drain budget
    Then every pod of the node was evicted through the Eviction API
    And the node's DaemonSet pods were left running
    And no workload went below its PodDisruptionBudget during the drain
    When the node is shut down gracefully
    Then the node is NotReady within the node-not-ready budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    When the node is uncordoned
    Then every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
