"""What the lab builds (only what it runs) and the estimate every Go build says before it
starts (harness.lab.build, harness.kindlab.binaries)."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path

import pytest

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
    assert build.estimate("kubernetes") == "cold on two cores: about 6 min"
    assert build.estimate("kwok") == "cold on two cores: about 100 s"
    assert build.estimate("no-such-group") == ""


def test_a_build_held_by_another_process_is_said_before_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second `lab build` (another checkout, another stage) waits on the group's lock and
    says why, instead of seeming to hang."""
    monkeypatch.setenv("POWERCUT_CACHE", str(tmp_path))
    group = build.GROUPS[2]
    said: list[str] = []
    waiting = threading.Event()

    def say(msg: str) -> None:
        said.append(msg)
        waiting.set()

    lock = tmp_path / "bin" / f".{group.name}-{group.version}.lock"
    lock.parent.mkdir(parents=True)
    done = threading.Event()
    with lock.open("w") as other:  # another process's build (its own open file)
        fcntl.flock(other, fcntl.LOCK_EX)

        def second() -> None:
            with build._locked(group, say):
                done.set()

        t = threading.Thread(target=second, daemon=True)
        t.start()
        assert waiting.wait(10), "nothing said while waiting"
        assert not done.is_set()
        fcntl.flock(other, fcntl.LOCK_UN)
    t.join(10)
    assert done.is_set()
    assert said == [f"kwok {group.version}: another process is building it; waiting"]
    said.clear()
    with build._locked(group, say):  # free: nothing to say
        pass
    assert said == []
