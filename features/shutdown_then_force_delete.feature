@epic:node-failure @disruptive @needs_bmc @serial
Feature: Unexpected node shutdown, recovered by force-deleting the stuck pods
  The same power loss as when the Node is deleted, but the operator force-deletes the pods
  stuck Terminating on the dead node (grace period 0, what `kubectl delete --force` does)
  instead of deleting the Node. Their controllers replace them at once; volumes that the
  dead node still holds move only when it comes back (or after the 6-minute force detach).

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: A worker with a stateful pod loses power and its stuck pods are force-deleted
    Given a worker node running a StatefulSet member with a ReadWriteOnce volume
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    And the node's pods are Terminating within the pod-eviction budget
    When the node's stuck pods are force-deleted
    Then the lost pods are deleted within the pod-gc budget
    And every lost pod is rescheduled on another node within the pod-rescheduled budget
    And every ReadWriteOnce volume of a lost pod reports a Multi-Attach error within the pod-rescheduled budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And the node releases the ReadWriteOnce volumes of the lost pods within the volume-detach budget
    And every ReadWriteOnce volume of a lost pod is attached to its replacement's node within the volume-reattach budget
    And every lost pod's replacement is Ready within the pod-rescheduled budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
