@epic:rack-failure @disruptive @needs_bmc @serial
Feature: A rack shuts down gracefully, control plane included

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: Every node of rack rack-b shuts down gracefully and comes back
    Given the API is probed through the cluster endpoint
    And every node of rack rack-b
    When the nodes are shut down gracefully
    Then every lost node is NotReady within the control-plane-node-not-ready budget
    And the API answered through the cluster endpoint, with no outage longer than the service-outage budget
    And etcd kept its quorum, with no failed quorum read for longer than the service-outage budget
    When the nodes are powered on again
    Then the node's own API server reports every readiness check passing within the recovery budget
    And every lost node is Ready within the node-ready-after-power-on budget
    And no alert fired
    And the cluster is back to steady state within the recovery budget
    And every SLO held throughout

  @critical
  Scenario: One control-plane node loses power while the API is probed
    Given the API is probed through the cluster endpoint
    And one control-plane node
    When the node loses power
    Then etcd kept its quorum, with no failed quorum read for longer than the service-outage budget
    And the node is NotReady within the control-plane-node-not-ready budget
    When the node is powered on again
    Then the api-available SLO held throughout
    And the node's own API server reports every readiness check passing within the recovery budget
    And the API reports every readiness check passing within the recovery budget
    And the API answered through the cluster endpoint, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
