@epic:node-failure @story:storage-network @kind @disruptive @serial
Feature: Real kubelets, volumes over the network (kind up --storage csi): a node loses its storage network
  The attachable storage's data travels over the kind network: the CSI node plugin mounts
  each volume with sshfs (FUSE over SSH) from the storage server container. The singleton's
  node loses only its storage network (an iptables chain in the node's network namespace
  dropping the storage server's address, its heal armed first as a transient systemd
  timer): its kubelet and API connection go on, the node stays Ready, but the singleton's
  I/O hangs and its readiness probe (a write to its volume) fails. Fencing (the node's
  container killed, confirmed off) and the out-of-service taint move the singleton; the
  token written before the cut must read back on the other node.

  Background:
    Given the cluster is in steady state

  @critical
  Scenario: The singleton's node loses its storage network; fencing moves it and its data
    Given a worker node running a singleton Deployment pod with a ReadWriteOnce volume
    And a token is written to each volume of singleton
    When the node loses its storage network for the recovery budget
    Then the node's pods with volumes lose their I/O within the pod-io-lost budget
    And the node stays Ready for the node-not-ready budget
    When the node is fenced through its BMC
    Then the node is NotReady within the node-not-ready budget
    When the node is tainted out-of-service
    Then the singleton's volume is attached to its replacement's node within the volume-reattach budget
    And the singleton's replacement is Ready within the pod-rescheduled budget
    And every token is read back from its volume within the recovery budget
    And every token of the lost node's volumes was read back on another node
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    When the out-of-service taint is removed
    Then the node no longer has the out-of-service taint within the taint-applied budget
    And the cluster is back to steady state within the recovery budget
