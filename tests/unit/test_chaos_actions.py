"""The chaostoolkit actions against a fake API server and kind nodes behind a fake docker.

Each action runs a real Session (cluster lock Lease, journal, blast-radius checks) through
the real kind power driver; only the cluster and the docker CLI are fakes. What is checked:
the disruption is journaled before it happens and left in place, the matching rollback
undoes it and marks the journal, and what an interrupted experiment leaves is found by
the same recovery as ``powercut recover``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.chaos import actions
from harness.checks import CheckFailed
from harness.errors import ConfigError
from harness.journal import EntryState, Journal, recover
from harness.kube.actions import FencingRequired
from harness.power.base import UnsupportedFailure
from harness.safety import SafetyViolation
from harness.session import ClusterExecutor, journal_path_for
from tests.fakes.chaos import Cluster, fake_cluster


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with fake_cluster(tmp_path, monkeypatch) as c:
        yield c


# -- power -------------------------------------------------------------------------------------


def test_power_off_picks_the_busiest_worker_and_leaves_it_off_journaled(
    cluster: Cluster,
) -> None:
    out = actions.power_off_nodes()
    assert out["nodes"] == ["w2"]  # web-abc-2 and db-0 (the DaemonSet pod does not count)
    assert cluster.docker.status("w2") == ("exited", False)
    [entry] = cluster.journal()
    assert (entry.action, entry.target, entry.state) == ("power_off", "node/w2", EntryState.DONE)
    assert str(entry.undo) == "power_on(node='w2')"
    assert out["journal"] == str(journal_path_for(cluster.inventory))
    # The lock was released when the action returned.
    assert cluster.api.get("leases", "kube-system", "powercut-lock") is None


def test_the_next_power_off_skips_nodes_already_down_and_safety_counts_them(
    cluster: Cluster,
) -> None:
    actions.power_off_nodes()
    second = actions.power_off_nodes(role="worker")
    assert second["nodes"] != ["w2"]
    with pytest.raises(SafetyViolation, match="max_nodes_down"):
        actions.power_off_nodes(nodes="w3,w1")
    with pytest.raises(SafetyViolation, match="already down"):
        actions.power_off_nodes(nodes=["w2"])


def test_power_on_without_names_undoes_every_power_off_and_waits_ready(
    cluster: Cluster,
) -> None:
    actions.power_off_nodes(nodes="w1")
    actions.power_off_nodes(nodes="w3", graceful=True)
    assert [v for v in cluster.docker.verbs() if not v.startswith("inspect")] == [
        "kill --signal KILL",
        "update --restart no",  # a graceful off is a poweroff inside the node
        "exec poweroff",
    ]
    out = actions.power_on_nodes(within="5s")
    assert out["nodes"] == ["w1", "w3"]
    assert out["ready_after_s"] is not None
    assert cluster.docker.status("w1") == ("running", False)
    assert cluster.docker.status("w3") == ("running", False)
    assert [e.state for e in cluster.journal()] == [EntryState.UNDONE, EntryState.UNDONE]
    assert actions.power_on_nodes() == {"nodes": [], "ready_after_s": 0.0}


def test_power_on_that_never_gets_ready_fails_the_check_but_the_power_is_on(
    cluster: Cluster,
) -> None:
    actions.power_off_nodes(nodes="w1")
    cluster.api.update(
        "nodes", "", "w1", lambda n: n["status"]["conditions"][0].update(status="Unknown")
    )
    with pytest.raises(CheckFailed, match="node w1 Ready"):
        actions.power_on_nodes(within="0.3s")
    assert cluster.docker.status("w1") == ("running", False)
    assert [e.state for e in cluster.journal()] == [EntryState.UNDONE]


def test_an_unknown_node_is_refused_before_anything_happens(cluster: Cluster) -> None:
    with pytest.raises(ConfigError, match="unknown node 'w9'; the inventory has: cp1, w1"):
        actions.power_off_nodes(nodes="w9")
    assert cluster.journal() == []


def test_an_interrupted_experiment_is_recovered_from_the_journal(cluster: Cluster) -> None:
    """What `powercut recover` does after a `chaos run` died between method and rollback."""
    actions.power_off_nodes(nodes="w1")
    actions.cordon_node("w3")
    actions.set_out_of_service("w1")
    with Journal(journal_path_for(cluster.inventory)) as journal:
        results = recover(journal, ClusterExecutor(cluster.inventory, cluster.client()))
    assert all(r.ok for r in results)
    assert [r.description.split(" ")[0] for r in results] == [
        "power_on(node='w1')",  # power first, then the rest newest first
        "remove_taint(node='w1',",
        "uncordon(node='w3')",
    ]
    assert cluster.docker.status("w1") == ("running", False)
    assert not cluster.node("w3")["spec"].get("unschedulable")
    assert all(e.state is EntryState.UNDONE for e in cluster.journal())


def test_recover_action_undoes_everything(cluster: Cluster) -> None:
    actions.power_off_nodes(nodes="w1")
    actions.cordon_node("w2")
    out = actions.recover()
    assert [r["ok"] for r in out] == [True, True]
    assert cluster.docker.status("w1") == ("running", False)
    assert actions.recover() == []


# -- waits -------------------------------------------------------------------------------------


def test_wait_for_eviction_of_the_nodes_the_journal_shows_down(cluster: Cluster) -> None:
    actions.power_off_nodes(nodes="w1")

    def evict() -> None:
        cluster.api.update(
            "pods",
            "shop",
            "web-abc-1",
            lambda p: p["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z"),
        )

    # the extension waits on the real clock (chaostoolkit calls it by name: no clock to give)
    timer = threading.Timer(0.2, evict)  # noqa: TID251
    timer.start()
    try:
        out = actions.wait_for_eviction(within="5s")
    finally:
        timer.cancel()
    assert out["nodes"] == ["w1"]
    assert out["still_terminating"] == ["shop/web-abc-1"]
    assert out["budget_s"] == 5.0


def test_wait_for_eviction_that_runs_out_names_the_pods_left(cluster: Cluster) -> None:
    with pytest.raises(CheckFailed) as err:
        actions.wait_for_eviction(nodes="w2", within="0.2s")
    assert err.value.check == "eviction"
    assert "within 0.2s" in err.value.expected
    assert "shop/db-0" in err.value.seen and "shop/web-abc-2" in err.value.seen


def test_wait_for_eviction_needs_nodes(cluster: Cluster) -> None:
    with pytest.raises(ConfigError, match="no nodes given and the journal shows none down"):
        actions.wait_for_eviction()


# -- Kubernetes actions ------------------------------------------------------------------------


def test_drain_then_uncordon(cluster: Cluster) -> None:
    out = actions.drain_node(within="5s")
    assert out["node"] == "w2"
    assert sorted(out["evicted"]) == ["shop/db-0", "shop/web-abc-2"]
    assert out["skipped"] == {"shop/agent-w2": "DaemonSet pod"}
    assert cluster.node("w2")["spec"]["unschedulable"] is True
    [entry] = cluster.journal()
    assert (entry.action, entry.state) == ("drain", EntryState.DONE)
    assert actions.uncordon_node() == {"nodes": ["w2"]}
    assert not cluster.node("w2")["spec"].get("unschedulable")
    assert [e.state for e in cluster.journal()] == [EntryState.UNDONE]


def test_a_drain_blocked_by_a_budget_fails_the_check_and_stays_owed(cluster: Cluster) -> None:
    cluster.api.eviction_hook = lambda ns, name: 429
    with pytest.raises(CheckFailed, match=r"within 0\.3s") as err:
        actions.drain_node(node="w1", within="0.3s")
    assert err.value.check == "drain"
    [entry] = cluster.journal()
    assert entry.state is EntryState.FAILED and entry.owes_undo


def test_out_of_service_taint_and_its_removal(cluster: Cluster) -> None:
    # w1 runs (docker says so): the taint would detach volumes under a running writer.
    with pytest.raises(FencingRequired, match="kind reads power on"):
        actions.set_out_of_service("w1")
    assert cluster.node("w1")["spec"]["taints"] == []
    actions.power_off_nodes(nodes="w1")
    actions.set_out_of_service("w1")  # the kind driver confirms it is off
    actions.power_on_nodes(nodes="w1")
    taints = cluster.node("w1")["spec"]["taints"]
    assert {
        "key": "node.kubernetes.io/out-of-service",
        "value": "nodeshutdown",
        "effect": "NoExecute",
    } in taints
    assert actions.remove_out_of_service() == {"nodes": ["w1"]}
    assert cluster.node("w1")["spec"]["taints"] == []
    assert [e.state for e in cluster.journal()] == [EntryState.UNDONE] * 2


def test_an_out_of_service_override_is_journaled_and_returned(cluster: Cluster) -> None:
    out = actions.set_out_of_service("w1", fence_override="w1 unplugged by hand (ticket 42)")
    assert out["fence_overrides"] == [
        "w1: w1 unplugged by hand (ticket 42) (BMC: kind reads power on)"
    ]
    (note,) = Journal.read_notes(journal_path_for(cluster.inventory))
    assert (note.action, note.target) == ("fence_override", "node/w1")
    assert note.detail.startswith("w1 unplugged by hand (ticket 42)")
    actions.remove_out_of_service("w1")


def test_delete_node_and_restore_it_from_the_journal(cluster: Cluster) -> None:
    actions.delete_node("w3")
    assert cluster.api.get("nodes", "", "w3") is None
    assert actions.restore_node() == {"nodes": ["w3"]}
    restored = cluster.node("w3")
    assert restored["metadata"]["labels"] == {"topology.kubernetes.io/zone": "rack-c"}
    assert [e.state for e in cluster.journal()] == [EntryState.UNDONE]


def test_force_delete_and_restart_pods(cluster: Cluster) -> None:
    assert sorted(actions.force_delete_pods("w2")) == ["shop/db-0", "shop/web-abc-2"]
    assert cluster.api.get("pods", "shop", "agent-w2") is not None
    assert sorted(actions.restart_pods("shop", "pod-template-hash=abc")) == [
        "web-abc-1",
        "web-abc-3",
    ]
    assert cluster.journal() == []  # nothing to undo: the controllers re-create them


# -- partitions --------------------------------------------------------------------------------


def test_partition_a_kind_node_and_heal_it(cluster: Cluster) -> None:
    out = actions.partition_node("w1", heal_after="5m")
    assert out["heal_after_s"] == 300.0
    assert cluster.docker.cut("w1") is True
    assert cluster.docker.status("w1") == ("running", False)  # cut off, still running
    [entry] = cluster.journal()  # through the session, as the steps cut: the heal is the undo
    assert (entry.action, str(entry.undo)) == ("partition", "heal(node='w1', protocol='kind')")
    with pytest.raises(SafetyViolation, match="already down"):
        actions.power_off_nodes(nodes="w1")
    assert actions.heal_partition() == {"nodes": ["w1"]}
    assert cluster.docker.cut("w1") is False
    assert [e.state for e in cluster.journal()] == [EntryState.UNDONE]


def test_power_on_heals_a_partition_too(cluster: Cluster) -> None:
    actions.partition_node("w3")
    assert actions.power_on_nodes(wait_ready=False)["nodes"] == ["w3"]
    assert cluster.docker.cut("w3") is False
    assert [e.state for e in cluster.journal()] == [EntryState.UNDONE]


def test_partition_needs_a_driver_that_can_cut(cluster: Cluster) -> None:
    with pytest.raises(UnsupportedFailure, match=r"bmc1: its .* driver cannot do a partition"):
        actions.partition_node("bmc1")
    assert cluster.journal() == []


# -- the inventory -----------------------------------------------------------------------------


def test_the_configuration_names_the_inventory_before_the_environment(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERCUT_INVENTORY", "/nonexistent.yaml")
    out = actions.cordon_node("w1", configuration={"powercut_inventory": str(cluster.path)})
    assert out == {"node": "w1"}
    monkeypatch.delenv("POWERCUT_INVENTORY")
    with pytest.raises(ConfigError, match=r"powercut_inventory.*POWERCUT_INVENTORY"):
        actions.uncordon_node()
