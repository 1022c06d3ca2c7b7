@epic:rack-failure @disruptive @needs_bmc @serial
Feature: Graceful shutdown of a whole rack
  Before rack maintenance (a PDU swap, a switch upgrade) every node of the rack is shut down
  gracefully through its BMC at once, then powered on again. The workloads spread over the
  racks must keep a Ready replica throughout.

  Background:
    Given the cluster is in steady state

  @critical @demo @slow
  Scenario: Every node of one rack is shut down gracefully and powered on again
    Given every node of the rack running the most critical pods
    And every critical workload has Ready replicas in at least 2 racks
    When the nodes are shut down gracefully
    Then every lost node is NotReady within the control-plane-node-not-ready budget
    And every lost node is tainted unreachable within the taint-applied budget
    When the nodes are powered on again
    Then every lost node is Ready within the node-ready-after-power-on budget
    And every critical workload kept at least 1 Ready replica throughout
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
