@epic:node-failure @disruptive @needs_bmc @serial
Feature: Subject steps after targets that did not choose the subject
  "The member" and "the singleton" must resolve from whatever the Given chose.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: The member on the singleton's node stays Terminating while its node is off
    Given a worker node running a singleton Deployment pod with a ReadWriteOnce volume
    When the node loses power
    Then the member is Terminating within the pod-eviction budget
    And the member stays Terminating for 10 seconds
    And no second copy of the member was started
    And the StatefulSet kept a majority of its members Ready throughout
    When the node is powered on again
    Then the cluster is back to steady state within the recovery budget
    And the member is re-created and Ready within the pod-rescheduled budget
    And the singleton's replacement is Ready within the pod-rescheduled budget

  @normal
  Scenario: A named worker is rebooted; Ready judged before NotReady
    Given the node w-c2
    When the node is rebooted
    Then the node is Ready within the node-ready-after-power-on budget
    And the node is NotReady within the node-not-ready budget
    And the cluster is back to steady state within the recovery budget

  @normal
  Scenario: Two workers chosen by label lose power; the taint judged before NotReady
    Given two nodes labelled node-role.kubernetes.io/worker
    When the nodes lose power at once
    Then every lost node is tainted unreachable within the taint-applied budget
    And every lost node is NotReady within the node-not-ready budget
    When the nodes are powered on again
    Then every critical workload kept at least 1 Ready replica throughout
    And the cluster is back to steady state within the recovery budget
    And no alert fired
