@epic:control-plane @disruptive @needs_bmc @serial
Feature: Loss of one control-plane node
  One of three control-plane nodes (each with an etcd member, an API server, a controller
  manager and a scheduler) loses power. The API stays reachable through the load balancer in
  front of the API servers, etcd keeps its quorum with two members of three (quorum reads
  keep succeeding), and when the node powers on it joins again: its own API server, which
  talks to its own etcd member, passes every readiness check.

  Background:
    Given the cluster is in steady state

  @blocker
  Scenario: A control-plane node loses power and comes back
    Given a control-plane node
    And the API is probed through the cluster endpoint
    When the node loses power
    Then the node is NotReady within the control-plane-node-not-ready budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And the node's own API server reports every readiness check passing within the recovery budget
    And the API reports every readiness check passing within the recovery budget
    And the API answered through the cluster endpoint, with no outage longer than the service-outage budget
    And etcd kept its quorum, with no failed quorum read for longer than the service-outage budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
