"""What the lab builds (only what it runs) and the estimate every Go build says before it
starts (harness.lab.build, harness.kindlab.binaries)."""

from __future__ import annotations

from harness.kindlab import binaries
from harness.lab import build


def every_group() -> list[build.Group]:
    tools = (*binaries.tools(), binaries.lb_tool(), binaries.helm_tool(), *binaries.csi_tools())
    return [*build.GROUPS, binaries.NODE_GROUP, *(t.group for t in tools)]


def test_the_lab_builds_only_what_it_runs() -> None:
    """The lab runs the control plane, etcd and kwok: no kubectl (the kind node's group has
    it, for the node image and the management cluster's tests) and no kwokctl; etcdctl is
    built with etcd (the kind etcd image carries it)."""
    lab = {b for g in build.GROUPS for b in g.binaries}
    assert lab == {
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "etcd",
        "etcdctl",
        "kwok",
    }
    assert "kubectl" in binaries.NODE_GROUP.binaries


def test_every_go_build_has_its_cold_estimate() -> None:
    names = {g.name for g in every_group()}
    assert names - set(build.COLD_BUILD_S) == set()
    assert build.estimate("kubernetes") == "cold on two idle cores: about 8 min"
    assert build.estimate("kwok") == "cold on two idle cores: about 60 s"
    assert build.estimate("no-such-group") == ""
