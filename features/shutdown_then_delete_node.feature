@epic:node-failure @disruptive @needs_bmc @serial
Feature: Unexpected node shutdown, recovered by deleting the Node
  A worker loses power without warning. Kubernetes marks it NotReady, taints it unreachable
  and evicts its pods once their tolerations run out, but pods of StatefulSets and pods that
  hold a ReadWriteOnce volume stay Terminating: nobody can confirm they stopped. The operator
  deletes the Node object; PodGC then removes the stuck pods and their controllers replace
  them on other nodes. The volumes stay attached to the dead node (the kubelet last reported
  them in use, so the attach/detach controller waits for its 6-minute force detach) until
  the node comes back, which the replacements' Multi-Attach errors show.

  Background:
    Given the cluster is in steady state

  @critical @slow
  Scenario: A worker with a stateful pod loses power and its Node object is deleted
    Given a worker node running a StatefulSet member with a ReadWriteOnce volume
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    And the node's pods are Terminating within the pod-eviction budget
    When the Node object is deleted
    Then the Node object is gone within the node-delete budget
    And the lost pods are deleted within the pod-gc budget
    And every lost pod is rescheduled on another node within the pod-rescheduled budget
    And every ReadWriteOnce volume of a lost pod reports a Multi-Attach error within the pod-rescheduled budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And the node releases the ReadWriteOnce volumes of the lost pods within the volume-detach budget
    And every ReadWriteOnce volume of a lost pod is attached to its replacement's node within the volume-reattach budget
    And every lost pod's replacement is Ready within the pod-rescheduled budget
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
