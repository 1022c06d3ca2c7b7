"""The chaostoolkit extension fails nodes through the steps' dispatch
(:mod:`harness.failures`): a reboot is the power cycle, a kubelet stop is the cut the
steps and longevity make, each journaled with its undo before it acts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import failures
from harness.chaos import actions
from harness.journal import EntryState
from harness.kube.names import Act, Stage
from harness.kube.timeline import ACTION, Timeline
from harness.session import Session
from tests.fakes.chaos import Cluster, fake_cluster


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with fake_cluster(tmp_path, monkeypatch) as c:
        yield c


def recorded(monkeypatch: pytest.MonkeyPatch) -> list[Timeline]:
    """Every timeline the dispatch acted on (each chaos action has a session of its own)."""
    seen: list[Timeline] = []
    inflict = failures.inflict

    def spy(session: Session, *args: Any, **kw: Any) -> failures.Inflicted:
        seen.append(session.timeline)
        return inflict(session, *args, **kw)

    monkeypatch.setattr(failures, "inflict", spy)
    return seen


def test_a_reboot_is_the_power_cycle_and_owes_nothing_once_back(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = recorded(monkeypatch)
    out = actions.reboot_nodes(nodes="w1", wait_ready=False)
    assert out["nodes"] == ["w1"] and out["ready_after_s"] is None
    assert cluster.docker.status("w1")[0] == "running"
    [entry] = cluster.journal()
    assert (entry.action, entry.state) == ("power_cycle", EntryState.UNDONE)
    [tl] = seen
    names = [t.transition for t in tl.all(ACTION, "w1")]
    assert names == [Act.POWER_CYCLE.at(Stage.SENT), Act.POWER_CYCLE.at(Stage.ACKNOWLEDGED)]
    assert Act.POWER_OFF.at(Stage.SENT) not in names  # never an off and an on apart


def test_a_kubelet_stop_is_journaled_with_its_start_and_undone(cluster: Cluster) -> None:
    out = actions.stop_kubelet("w2", start_after="5m")
    assert out["start_after_s"] == 300.0
    assert cluster.docker.kubelet("w2") is False
    assert cluster.docker.status("w2")[0] == "running"  # the node and its containers run on
    [entry] = cluster.journal()
    assert (entry.action, entry.state) == ("kubelet", EntryState.DONE)
    assert actions.start_kubelet() == {"nodes": ["w2"]}
    assert cluster.docker.kubelet("w2") is True
    assert [e.state for e in cluster.journal()] == [EntryState.UNDONE]
