@epic:node-failure @disruptive @needs_bmc @serial
Feature: Non-graceful node shutdown handled with the out-of-service taint
  Once the operator has confirmed that a NotReady node is really powered off, the
  `node.kubernetes.io/out-of-service=nodeshutdown:NoExecute` taint lets Kubernetes
  force-delete its pods and force-detach its volumes at once, so a StatefulSet member and
  its ReadWriteOnce volume move to another node without the attach/detach controller's
  6-minute wait. The taint must be removed once the node is back.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: The out-of-service taint moves a StatefulSet member and its volume at once
    Given a worker node running a StatefulSet member with a ReadWriteOnce volume
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    When the node is tainted out-of-service
    Then the lost pods are deleted within the pod-gc budget
    And the node releases the ReadWriteOnce volumes of the lost pods within the volume-detach-out-of-service budget
    And every ReadWriteOnce volume of a lost pod is attached to its replacement's node within the volume-reattach budget
    And every lost pod is replaced by a Ready pod on another node within the pod-rescheduled budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    When the out-of-service taint is removed
    Then the node no longer has the out-of-service taint within the taint-applied budget
    And the StatefulSet kept a majority of its members Ready throughout
    And every critical service stayed available, with no outage longer than the service-outage budget
    And the cluster is back to steady state within the recovery budget
