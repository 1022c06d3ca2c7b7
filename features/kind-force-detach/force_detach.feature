@epic:node-failure @story:volumes-move @kind @disruptive @serial
Feature: Real kubelets, real attachments (kind up --storage csi): a force-deleted pod's volume is detached by force after 6 minutes
  The singleton's node loses power (`docker kill`). Its pod is evicted but stays Terminating
  (no kubelet confirms it), and while it exists the attach/detach controller keeps its
  ReadWriteOnce volume attached to the node: the replacement on the other worker reports a
  Multi-Attach error. The operator force-deletes the stuck pods (what `kubectl delete
  --force --grace-period=0` does) but does not declare the node out of service. The
  controller then still waits, for the node to report the volume unmounted, which a node
  without power never does, until its maxWaitForUnmountDuration (6 minutes, fixed in
  kube-controller-manager) has passed; then it detaches the volume by force, and the
  replacement gets it, with its data, while the failed node is still off.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: The singleton's volume is force-detached 6 minutes after its stuck pod is force-deleted
    Given a worker node running a singleton Deployment pod with a ReadWriteOnce volume
    And a token is written to each volume of singleton
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    And the singleton is Terminating within the pod-eviction budget
    And the singleton is rescheduled on another node within the pod-rescheduled budget
    And the singleton's replacement reports a Multi-Attach error within the pod-rescheduled budget
    And the node still holds the singleton's volume
    When the node's stuck pods are force-deleted
    Then the lost pods are deleted within the pod-gc budget
    And the node still holds the singleton's volume
    And the node releases the singleton's volume within the volume-detach budget
    And the singleton's volume is attached to its replacement's node within the volume-reattach budget
    And the singleton's replacement is Ready within the pod-rescheduled budget
    And every token is read back from its volume within the recovery budget
    And every token of the lost node's volumes was read back on another node
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And the cluster is back to steady state within the recovery budget
