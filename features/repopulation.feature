@epic:control-plane @disruptive @serial
Feature: Repopulation after an etcd rebuild: restart the pods by selector, re-run the Jobs
  After etcd is restored from a backup the operators' runbook restarts the workloads' pods
  by label selector, so that their controllers re-create them against the restored state
  (and re-runs the Jobs that seed data). Every restarted pod must be replaced by a Ready
  one within the reschedule budget, and the cluster must be whole again. The selectors and
  namespaces are the lab's: on another cluster the scenario skips, saying that nothing
  matches (write your own with your selectors). Re-running a Job deletes it (its pods go
  in the background) and creates it again from the manifest stored in the journal first.

  Background:
    Given the cluster is in steady state

  Scenario: The web pods are restarted by their selector and come back Ready
    When the pods labelled app=web in namespace lab are restarted
    Then the restarted pods are replaced by Ready pods within the pod-rescheduled budget
    And the cluster is back to steady state within the recovery budget

  Scenario: The quorum members are restarted by their selector and come back Ready
    When the pods labelled app=quorum in namespace lab are restarted
    Then the restarted pods are replaced by Ready pods within the pod-rescheduled budget
    And the cluster is back to steady state within the recovery budget

  Scenario: The seeding Job is re-run from its manifest and completes
    When the Job seed-data in namespace lab is re-run from its manifest
    Then the Job seed-data completes within the job-complete budget
    And the cluster is back to steady state within the recovery budget
