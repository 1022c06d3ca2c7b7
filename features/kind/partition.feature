@epic:node-failure @kind @disruptive @needs_ssh @serial
Feature: Real kubelets: a worker cut off from the network keeps its pods running
  The node's container keeps running; iptables chains inside it drop everything to and from
  the other nodes and the API server (the heal is armed first as a systemd timer in the
  node). The control plane sees a dead node, evicts its pods after their tolerations, and
  they hang Terminating, while on the node their containers still run and answer. Once
  healed, the kubelet reports again, finalises the evicted pods and the node is Ready.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: A worker is cut off from the network and reconnected
    Given a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod
    When the node is cut off from the network for the recovery budget
    Then the node is NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    And the node's pods are Terminating within the pod-eviction budget
    When the node is reconnected
    Then the node is Ready within the node-ready-after-power-on budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
