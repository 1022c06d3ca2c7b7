@epic:node-failure @story:data-kept @kind @disruptive @serial
Feature: Real kubelets: no data lost when the singleton's node loses power
  Before the failure, a random token is written to each volume of the quorum StatefulSet and
  of the singleton (the probe app's PUT /tokens/<volume>, through the API server's pod
  proxy). The singleton's node loses power; its pod is evicted and replaced; the replacement
  and the members mount the same claims once the node is back (local-path volumes live on
  their node). Each token must read back from the pod that now holds its volume: a lost or
  different token fails the scenario, naming the volume.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: The singleton's node loses power and every volume keeps its token
    Given a worker node running a singleton Deployment pod with a ReadWriteOnce volume
    And a token is written to each volume of quorum and singleton
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    And the singleton is Terminating within the pod-eviction budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And every token is read back from its volume within the recovery budget
    And the cluster is back to steady state within the recovery budget
