@epic:node-failure @story:data-kept @kind @disruptive @serial
Feature: Real kubelets, real attachments (kind up --storage csi): the data moves with the volume to another node
  Before the failure, a random token is written to each volume of the quorum StatefulSet and
  of the singleton (the probe app's PUT /tokens/<volume>, through the API server's pod
  proxy). The singleton's node loses power and is declared out of service: its pods are
  deleted, its volumes detached from it and attached to the nodes of their replacements
  (real VolumeAttachments of the attachable storage). Each token must read back from the pod
  that now holds its volume, the singleton's on another node, while the failed node is
  still off: a lost or different token fails the scenario, naming the volume.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: The singleton's node loses power and every volume keeps its token on another node
    Given a worker node running a singleton Deployment pod with a ReadWriteOnce volume
    And a token is written to each volume of quorum and singleton
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    When the node is tainted out-of-service
    Then the singleton's volume is attached to its replacement's node within the volume-reattach budget
    And the singleton's replacement is Ready within the pod-rescheduled budget
    And every token is read back from its volume within the recovery budget
    And every token of the lost node's volumes was read back on another node
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    When the out-of-service taint is removed
    Then the node no longer has the out-of-service taint within the taint-applied budget
    And the cluster is back to steady state within the recovery budget
