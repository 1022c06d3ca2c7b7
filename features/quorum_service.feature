@epic:node-failure @disruptive @needs_bmc @serial
Feature: A quorum service loses the node of one member
  A three-member StatefulSet (an etcd-like quorum service) loses one member's node. Two of
  three members stay Ready, so the quorum holds. The lost member stays Terminating until its
  node returns: Kubernetes cannot know whether it still runs, and starting a second copy of
  the same member could split the quorum's data.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: One member's node loses power and the member waits for it
    Given a worker node running a StatefulSet member with a ReadWriteOnce volume
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    And the member is Terminating within the pod-eviction budget
    And the member stays Terminating for the pod-rescheduled budget
    And no second copy of the member was started
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And the member is re-created and Ready within the pod-rescheduled budget
    And the StatefulSet kept a majority of its members Ready throughout
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
