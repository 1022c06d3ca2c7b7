@epic:node-failure @kind @disruptive @serial
Feature: Real kubelets: a worker shut down gracefully
  `systemctl poweroff` in the node goes through logind, so the kubelet's graceful node
  shutdown terminates its pods before the node stops (kwok does not model it; only real
  kubelets show it). Their controllers replace the stateless ones on another node at once,
  without waiting for the node monitor or the tolerations.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: A worker is shut down gracefully and powered on again
    Given a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod
    When the node is shut down gracefully
    Then the node is NotReady within the node-not-ready budget
    And every lost stateless pod is replaced by a Ready pod on another node within the pod-rescheduled budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
