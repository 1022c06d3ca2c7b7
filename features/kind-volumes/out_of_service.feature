@epic:node-failure @story:volumes-move @kind @disruptive @serial
Feature: Real kubelets, real attachments (kind up --storage csi): the out-of-service taint moves a StatefulSet member and its volume
  A quorum member's ReadWriteOnce volume is attached (a real VolumeAttachment) to a node
  that loses power. Once the operator declares the node out of service, Kubernetes
  force-deletes its pods and detaches its volumes at once, and the StatefulSet's member
  comes back Ready on the other worker with its own volume, without the attach/detach
  controller's 6-minute wait.

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
    And the cluster is back to steady state within the recovery budget
