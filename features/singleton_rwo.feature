@epic:node-failure @disruptive @needs_bmc @serial
Feature: A singleton with a ReadWriteOnce volume loses its node
  A one-replica Deployment (a registry, a database) whose ReadWriteOnce volume is attached to
  a node that lost power. Its replacement is scheduled elsewhere but cannot attach the
  volume: the attach/detach controller reports a Multi-Attach error and waits 6 minutes
  before a forced detach. The harness detects and reports the error; the out-of-service
  taint resolves it at once.

  Background:
    Given the cluster is in steady state

  @critical @demo
  Scenario: The singleton's replacement hits a Multi-Attach error until the out-of-service taint
    Given a worker node running a singleton Deployment pod with a ReadWriteOnce volume
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    And the singleton is Terminating within the pod-eviction budget
    And the singleton is rescheduled on another node within the pod-rescheduled budget
    And the singleton's replacement reports a Multi-Attach error within the pod-rescheduled budget
    When the node is tainted out-of-service
    Then the lost pods are deleted within the pod-gc budget
    And the node releases the singleton's volume within the volume-detach-out-of-service budget
    And the singleton's volume is attached to its replacement's node within the volume-reattach budget
    And the singleton's replacement is Ready within the pod-rescheduled budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    When the out-of-service taint is removed
    Then the node no longer has the out-of-service taint within the taint-applied budget
    And the cluster is back to steady state within the recovery budget
