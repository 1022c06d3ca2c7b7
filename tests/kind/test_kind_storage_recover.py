"""The storage-network cut on kind, killed: a process that cut a worker's storage network
(``kind up --storage csi``: the CSI node plugin's sshfs mounts to the storage container) and
is then SIGKILLed leaves the cut in place (nothing could heal it) with the journal owing its
heal; ``powercut recover`` heals it from the journal, and the node's firewall holds no
powercut chain afterwards. Only with ``--storage csi`` (the default): there is no storage
network to cut otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.inventory import load_inventory
from harness.session import Session
from tests.killed import inflict_then_sigkill, recover
from tests.kind.conftest import POWERCUT, STORAGE, KindCluster

pytestmark = [pytest.mark.kind, pytest.mark.disruptive, pytest.mark.serial, pytest.mark.slow]


def test_a_killed_storage_cut_is_healed_by_recover(
    cluster: KindCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if STORAGE != "csi":
        pytest.skip("no storage network without --storage csi")
    node = cluster.workers()[1]
    driver = cluster.driver(node)
    assert not driver.storage_cut(), "the node's storage network was cut before the test"
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))  # this test's journal
    env = {**os.environ}
    inflict_then_sigkill(cluster.inventory_path, node, "STORAGE_CUT", env, undo_after_s=900)
    try:
        assert driver.storage_cut(), "SIGKILL leaves nothing to heal the cut: it must still hold"
        assert "heal_storage" in recover(POWERCUT, cluster.inventory_path, env)
        assert not driver.storage_cut()
        assert "POWERCUT" not in cluster.in_node(node, "iptables", "-w", "-S")
        # the journal owes nothing: the lock is free and a new session opens
        with Session(load_inventory(cluster.inventory_path)):
            pass
    finally:
        if driver.storage_cut():  # the test failed: leave the cluster as it found it
            driver.heal_storage(node)
