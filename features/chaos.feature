@epic:interoperability
Feature: Chaos experiments in chaostoolkit's format
  Teams that keep their experiments in chaostoolkit's format run them here against the
  same inventory, with the same power drivers, checks and journal as every other feature:
  a steady-state hypothesis that does not hold fails the scenario and names the probe,
  and every disruption is undone by the experiment's rollbacks (or by `powercut recover`).

  @disruptive @serial
  Scenario: A worker loses power, as a chaostoolkit experiment
    When I run the chaos experiment "experiments/worker-power-loss.json"
    Then the experiment left no disruption behind

  @disruptive @serial
  Scenario: A worker is drained, as a chaostoolkit experiment
    When I run the chaos experiment "experiments/drain-worker.json"
    Then the experiment left no disruption behind
