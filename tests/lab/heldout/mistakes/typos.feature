@epic:node-failure @disruptive @needs_bmc @serial @storage
Feature: Mistakes a user makes

  Background:
    Given the cluster is in steady state

  Scenario: A misspelt sentence
    Given one worker node
    When the node loses powr
    Then the node is NotReady within the node-not-ready budget

  Scenario: A budget that does not exist
    Given one worker node
    When the node loses power
    Then the node is NotReady within the node-notready budget

  Scenario: An SLO that does not exist
    Given one worker node
    When the node loses power
    Then the web-avialable SLO held throughout

  Scenario Outline: A failure word that does not exist (<failure>)
    When I fail one worker node and zero primary nodes with <failure> failure for 20 seconds
    Then every lost node is NotReady within the node-not-ready budget

    Examples:
      | failure |
      | powr    |
      | reboot  |
