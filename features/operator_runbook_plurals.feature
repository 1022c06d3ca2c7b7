@epic:rack-failure @disruptive @needs_bmc @serial
Feature: An operator's runbook on several nodes at once, checked in the order it happens
  Written from docs/steps.md alone. A third of the workers (one per rack) fail together and
  the operator acts on all of them at once: the out-of-service taint on every node (each
  only once its own BMC confirms it is off), the taints removed once they are back; or the
  nodes are cordoned and drained together for maintenance. Each expectation is placed
  right after the action it follows, with no step between that waits for anything: each
  waits for its own start.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: A third of the workers lose power and are all tainted out-of-service
    Given one third of the worker nodes, one per rack, sparing the critical workloads
    When the nodes lose power at once
    Then every lost stateless pod is replaced by a Ready pod on another node within the pod-rescheduled budget
    When the nodes are tainted out-of-service
    Then the lost pods are deleted within the pod-gc budget
    When the nodes are powered on again
    And the out-of-service taints are removed
    Then no lost node has the out-of-service taint within the node-ready-after-power-on budget
    And every lost node is Ready within the node-ready-after-power-on budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget

  Scenario: A third of the workers are cordoned and drained together, then uncordoned
    Given one third of the worker nodes, one per rack, sparing the critical workloads
    When the nodes are cordoned
    And the nodes are drained within the drain budget
    Then every pod of the nodes was evicted through the Eviction API
    And the nodes' DaemonSet pods were left running
    And no workload went below its PodDisruptionBudget during the drain
    When the nodes are uncordoned
    Then the cluster is back to steady state within the recovery budget
