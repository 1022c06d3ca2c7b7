@epic:node-failure @disruptive @needs_bmc @serial
Feature: One third of the workers lose power at once
  One third of the worker nodes lose power at the same moment (the Dell CSM resiliency
  test). They are taken one per rack in turn, so that no rack is more than partially down,
  never so many that a critical workload keeps fewer Ready replicas than the inventory's
  min_available for it, and among such sets the one that loses the most replaceable pods. Eviction must proceed on every one of them (a
  zone with more than 55% of its nodes NotReady would stop it) and the critical services must
  stay within their outage budget from the power cut until the nodes are back.

  Background:
    Given the cluster is in steady state

  @critical @slow
  Scenario: One third of the workers lose power at once
    Given one third of the worker nodes, one per rack, sparing the critical workloads
    When the nodes lose power at once
    Then every lost node is NotReady within the node-not-ready budget
    And every lost node is tainted unreachable within the taint-applied budget
    And every lost node's pods are Terminating within the pod-eviction budget
    And every lost stateless pod is replaced by a Ready pod on another node within the pod-rescheduled budget
    When the nodes are powered on again
    Then every lost node is Ready within the node-ready-after-power-on budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
