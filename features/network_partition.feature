@epic:node-failure @disruptive @needs_ssh @serial
Feature: Network partition: a node cut off from the API server keeps running
  The node stays powered on (its BMC reads On) and its pods keep running and writing, but
  it no longer reaches the API server: Kubernetes sees what it sees of a dead node (the
  lease expires, NotReady, the unreachable taint, eviction after the tolerations), yet
  force-deleting its pods now could give two writers. The heal is armed on the node itself
  before the cut (a transient systemd timer over SSH; a timer in the lab), so the node never
  stays cut off, even if powercut dies. Reconnected, the node reports again and its
  evicted pods are finalised.

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
