@epic:node-failure @story:storage-network @disruptive @needs_ssh @needs_bmc @serial
Feature: Storage network loss: the node keeps its kubelet, its pods lose their I/O
  Dell's resiliency module lists "array I/O network failure" beside node failure: a node
  loses only its path to the storage. Its kubelet and its API connection go on, so
  Kubernetes sees a Ready node and moves nothing; its pods with volumes see their I/O hang
  and then fail, and their readiness drops. Only fencing (the power cut at the BMC,
  confirmed OFF) and the out-of-service taint move them: the volumes are detached from the
  fenced node and attached where the replacements run. The cut is a firewall chain on the
  node that drops only the storage endpoints the inventory names (`storage_network`), its
  heal armed on the node itself before the cut and journaled, so a killed run leaves it to
  `powercut recover`.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: A worker loses its storage network; fencing and the out-of-service taint move its singleton
    Given a worker node running a singleton Deployment pod with a ReadWriteOnce volume
    When the node loses its storage network for the recovery budget
    Then the node's pods with volumes lose their I/O within the pod-io-lost budget
    And the node stays Ready for the node-not-ready budget
    When the node is fenced through its BMC
    Then the node is NotReady within the node-not-ready budget
    When the node is tainted out-of-service
    Then the singleton's volume is attached to its replacement's node within the volume-reattach budget
    And the singleton's replacement is Ready within the pod-rescheduled budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    When the out-of-service taint is removed
    Then the node no longer has the out-of-service taint within the taint-applied budget
    And the cluster is back to steady state within the recovery budget
