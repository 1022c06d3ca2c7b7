@epic:node-failure @kind @disruptive @serial
Feature: Real kubelets: a worker loses power and its stateless pods move
  On kind the node is a container and its power cut is `docker kill`: systemd, containerd,
  the kubelet and every pod stop at once. The lease expires, the node goes NotReady, the
  unreachable taint lands, and the pods are evicted once their tolerations run out. The
  stateless pods (web) come back Ready on another node; the StatefulSet member and the
  singleton wait for the node, because their local-path volumes live on it.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: A worker loses power and its stateless pods are Ready elsewhere
    Given a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    And the node's pods are Terminating within the pod-eviction budget
    And every lost stateless pod is replaced by a Ready pod on another node within the pod-rescheduled budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
