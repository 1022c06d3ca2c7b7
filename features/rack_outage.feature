@epic:rack-failure @disruptive @needs_bmc @serial
Feature: Rack outage
  A whole rack (every node in it, control plane included) loses power at once, as when its
  PDU fails. A zone that is wholly down is evicted from at the normal rate (one node per
  10 seconds per zone upstream), so the k-th node of the rack may be tainted later than the
  first. The rack's control-plane node may run the controller-manager leader, so marking the
  nodes NotReady may wait for a new leader. Every critical workload must keep at least one
  ready replica throughout, which it can only do if its replicas were spread over the racks
  beforehand.

  Background:
    Given the cluster is in steady state

  @critical @slow
  Scenario: Every node of one rack loses power at once
    Given every node of the rack running the most critical pods
    And every critical workload has Ready replicas in at least 2 racks
    When the nodes lose power at once
    Then every lost node is NotReady within the control-plane-node-not-ready budget
    And every lost node is tainted unreachable within the taint-applied budget
    And every lost node's pods are Terminating within the pod-eviction budget
    And every lost stateless pod is replaced by a Ready pod on another node within the pod-rescheduled budget
    When the nodes are powered on again
    Then every lost node is Ready within the node-ready-after-power-on budget
    And every critical workload kept at least 1 Ready replica throughout
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
