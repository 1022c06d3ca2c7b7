@epic:longevity @disruptive @needs_bmc @serial
Feature: Fail one third of the workers cyclically
  The nightly longevity test in small. One third of the workers, spread across the racks so
  that no rack loses more than 55% of its nodes, lose power together; once they are back and
  the cluster is steady again, the next third goes, and so on, each group in turn. Every
  cycle is measured (NotReady, evacuation, recovery, service outage, volume re-attachment,
  cleanup) and the statistics of every phase are attached to the report, with their plots.
  `powercut longevity` runs the same engine for hours.

  Background:
    Given the cluster is in steady state

  @critical @slow
  Scenario: Fail one third of the workers cyclically
    When one third of the workers, spread across racks, lose power in turn for 3 cycles of at least 5 seconds each
    Then every cycle brought the cluster back to its steady state
    And every cycle kept every phase within its budget, with no help from the harness
    And the statistics and plots of every phase are attached to the report

  # The demo set's (`make demo`): two cycles, so every phase still has its statistics and
  # plots over several cycles, and the SLOs read from Prometheus over both; deselected
  # unless the run's -m names demo (make features runs the scenario above and slo.feature).
  @critical @slow @demo @demo_only
  Scenario: Fail one third of the workers cyclically, twice, while the SLOs hold
    When one third of the workers, spread across racks, lose power in turn for 2 cycles of at least 5 seconds each
    Then every cycle brought the cluster back to its steady state
    And every cycle kept every phase within its budget, with no help from the harness
    And the statistics and plots of every phase are attached to the report
    And every SLO held throughout
    And no alert fired
