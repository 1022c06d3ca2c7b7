@epic:node-failure @disruptive @needs_bmc @serial
Feature: DaemonSet pods come back with their node
  DaemonSet pods tolerate the unreachable and not-ready taints, so they are not evicted from
  a node that lost power: they stay bound to it, NotReady, and run again when it powers on.
  The power cut goes through each of the protocols a BMC (or the node itself) offers.

  Background:
    Given the cluster is in steady state

  @normal
  Scenario Outline: A worker loses power through <protocol> and its DaemonSet pods return
    Given a worker node running a DaemonSet pod
    When the node loses power through <protocol>
    Then the node is NotReady within the node-not-ready budget
    And the node's DaemonSet pods are NotReady within the node-not-ready budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And the node's DaemonSet pods are Ready again within the node-ready-after-power-on budget
    And the node's DaemonSet pods were never evicted
    And the cluster is back to steady state within the recovery budget

    Examples:
      | protocol |
      | ipmi     |
      | redfish  |
      | ssh      |
