@epic:node-failure @story:service-level-objectives @disruptive @needs_bmc @serial
Feature: Service-level objectives hold while a worker is lost
  The release manager's question: did our SLOs hold? Prometheus records them all scenario
  long: the API servers' availability and error ratio, each critical Service's probe. A
  worker loses power and comes back; every SLO must have held at every evaluation step from
  the moment the cluster was found healthy, and none of the alerts the inventory lists may
  have fired. The inventory's stop conditions are watched meanwhile: had one breached, the
  scenario would have stopped at once and put the node back.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: A worker loses power; the SLOs read from Prometheus hold and no alert fires
    Given a worker node running pods protected by a PodDisruptionBudget and a DaemonSet pod
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And the cluster is back to steady state within the recovery budget
    And the web-available SLO held throughout
    And every SLO held throughout
    And no alert fired
