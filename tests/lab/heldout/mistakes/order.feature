@epic:node-failure @disruptive @needs_bmc @serial
Feature: A Then before its When

  Background:
    Given the cluster is in steady state

  Scenario: Ready judged before anything powered the node on
    Given one worker node
    When the node loses power
    Then the node is Ready within the node-ready-after-power-on budget

  Scenario: The member judged after a count with no member guaranteed
    Given the node w-a1
    When the node loses power
    Then the singleton is Terminating within the pod-eviction budget
