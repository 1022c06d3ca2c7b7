@epic:node-failure @kind @disruptive @needs_ssh @serial
Feature: Real kubelets: the kubelet stops while its containers keep serving
  `systemctl stop kubelet` in the node (kind's unit kills the kubelet alone): the lease is
  no longer renewed and the node goes NotReady and is tainted unreachable, while the pods'
  containers keep running. The kubelet's restart is armed in the node first; started again,
  it reconciles its pods and the node is Ready.

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
