@epic:node-failure @story:volumes-move @kind @disruptive @serial
Feature: Real kubelets, real attachments (kind up --storage csi): the singleton's volume is stuck until the node is declared out of service
  The singleton's ReadWriteOnce volume is on the cluster's attachable storage (a CSI driver
  with attachRequired, the real external-attacher): it has a VolumeAttachment to its node.
  The node loses power (`docker kill`); the pod is evicted and its replacement scheduled on
  the other worker, where the attach/detach controller refuses to attach the volume a
  second time (Multi-Attach). The evicted pod stays Terminating (no kubelet confirms it),
  and while it exists the controller keeps its volume attached to the node: no timer runs
  (its 6-minute forced detach counts only from the pod's deletion). The out-of-service
  taint says the node is really off: the lost pods are deleted, the volume detached and
  attached to the replacement's node at once.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: The singleton's replacement hits a Multi-Attach error until the out-of-service taint
    Given a worker node running a singleton Deployment pod with a ReadWriteOnce volume
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    And the singleton is Terminating within the pod-eviction budget
    And the singleton is rescheduled on another node within the pod-rescheduled budget
    And the singleton's replacement reports a Multi-Attach error within the pod-rescheduled budget
    And the node still holds the singleton's volume
    When the node is tainted out-of-service
    Then the lost pods are deleted within the pod-gc budget
    And the node releases the singleton's volume within the volume-detach-out-of-service budget
    And the singleton's volume is attached to its replacement's node within the volume-reattach budget
    And the singleton's replacement is Ready within the pod-rescheduled budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    When the out-of-service taint is removed
    Then the node no longer has the out-of-service taint within the taint-applied budget
    And the cluster is back to steady state within the recovery budget
