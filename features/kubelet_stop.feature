@epic:node-failure @disruptive @needs_ssh @serial
Feature: The kubelet stops while its containers keep running
  A kubelet that stops (a crash, a bad upgrade, an operator's mistake) stops renewing the
  node's lease: the node goes NotReady and is tainted unreachable like a partitioned one,
  while its containers keep running. Its restart is armed on the node before the stop; once
  the kubelet is back it reconciles its pods and the node is Ready again.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: The kubelet of a worker stops and is started again
    Given a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod
    When the node's kubelet is stopped for the recovery budget
    Then the node is NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    And the node's pods are Terminating within the pod-eviction budget
    When the node's kubelet is started again
    Then the node is Ready within the node-ready-after-power-on budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
