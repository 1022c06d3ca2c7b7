@epic:node-failure
Feature: Names the inventory does not have
  Scenario: names
    Given two nodes of rack rack-d
    And the nodes w-a1 and w-z9
    When the node loses power
    Then the web-available SLO held throughout
