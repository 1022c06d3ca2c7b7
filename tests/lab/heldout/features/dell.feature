@epic:node-failure @disruptive @needs_bmc @needs_ssh @serial
Feature: Dell-style failures of every kind, judged in reverse order

  Background:
    Given the cluster is in steady state

  @normal
  Scenario Outline: <workers> worker(s) fail with <failure> failure for 25 seconds
    When I fail <workers> worker nodes and zero primary nodes with <failure> failure for 25 seconds
    Then every lost node is Ready within the node-ready-after-power-on budget
    And every lost node is NotReady within the node-not-ready budget
    And the web-available SLO held throughout
    And the cluster is back to steady state within the recovery budget

    Examples:
      | workers     | failure   |
      | one         | power     |
      | 1           | graceful  |
      | one         | reboot    |
      | one-quarter | partition |
      | 1-2         | kubelet   |
