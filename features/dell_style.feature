@epic:node-failure @disruptive @needs_bmc @serial
Feature: Fail workers and primaries with any failure kind, as Dell's resiliency suite writes it
  One sentence chooses the nodes and the failure: counts as words or digits, fractions
  (one-third, one-half, all) and ranges (1-2, drawn from the run's seed, which the report
  shows and `--seed` replays), the failure kind (power, graceful, reboot, partition,
  kubelet) and how long it lasts (for a reboot: how long the power stays off within the
  power cycle; the node then boots). The nodes come back (power on, heal, kubelet start)
  once the time is up; the cluster must then be whole again.

  Background:
    Given the cluster is in steady state

  Scenario Outline: Fail <workers> workers and <primary> primaries with <failure> failure for <failSecs> seconds
    When I fail <workers> worker nodes and <primary> primary nodes with <failure> failure for <failSecs> seconds
    Then every lost node is NotReady within the control-plane-node-not-ready budget
    And every lost node is Ready within the node-ready-after-power-on budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget

    Examples:
      | workers | primary | failure   | failSecs |
      | one     | zero    | power     | 20       |

    @demo
    Examples: in the demo set
      | workers | primary | failure   | failSecs |
      | 1-2     | zero    | partition | 20       |
      | one     | one     | kubelet   | 20       |
      | two     | zero    | reboot    | 10       |
