"""Fencing: the out-of-service taint and force-deleting a NotReady node's pods only once a
BMC confirmed the node is powered OFF, or with an explicit override that the journal and the
timeline (so the report) keep."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.errors import PermanentError
from harness.inventory import Inventory
from harness.journal import Journal
from harness.kube.actions import OUT_OF_SERVICE_KEY, FencingRequired
from harness.kube.timeline import ACTION
from harness.power.base import PowerState
from harness.session import Session, journal_path_for
from tests.fakes.api import FakeApiServer, pod
from tests.fakes.power import FakeBmcs


def taints(api: FakeApiServer, name: str) -> list[str]:
    obj = api.get("nodes", "", name)
    assert obj is not None
    return [t["key"] for t in obj["spec"]["taints"]]


def test_the_taint_is_refused_while_the_bmc_reads_on(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    with Session(inventory, client=api.client()) as s:
        with pytest.raises(
            FencingRequired, match=r"no BMC confirmed power OFF \(ipmi reads power on\)"
        ):
            s.add_out_of_service_taint("w1")
        assert s.timeline.first(ACTION, "w1", "taint sent") is None
    assert taints(api, "w1") == []
    assert Journal.read(journal_path_for(inventory)) == []  # nothing was done, nothing owed


def test_the_taint_follows_a_bmc_that_reads_off_and_is_undone(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    bmcs.power["w1"] = PowerState.OFF
    with Session(inventory, client=api.client()) as s:
        s.add_out_of_service_taint("w1")
        assert taints(api, "w1") == [OUT_OF_SERVICE_KEY]
        fenced = s.timeline.first(ACTION, "w1", "fenced")
        assert fenced is not None and fenced.detail == {"via": "ipmi"}
    assert taints(api, "w1") == []  # undone when the session ended


def test_an_unanswering_bmc_does_not_fence(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    bmcs.fail[("w1", "state")] = PermanentError("w1: IPMI 10.0.0.10 refused the credentials")
    with (
        Session(inventory, client=api.client()) as s,
        pytest.raises(FencingRequired, match=r"ipmi did not answer: w1: IPMI 10\.0\.0\.10 refused"),
    ):
        s.add_out_of_service_taint("w1")
    assert taints(api, "w1") == []


def test_an_override_is_journaled_put_on_the_timeline_and_said(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    said: list[str] = []
    with Session(inventory, client=api.client(), say=said.append) as s:
        s.add_out_of_service_taint("w1", fence_override="w1 unplugged at the PDU (J. Doe)")
        assert taints(api, "w1") == [OUT_OF_SERVICE_KEY]
        marker = s.timeline.first(ACTION, "w1", "fencing overridden")
        assert marker is not None
        assert marker.detail == {
            "reason": "w1 unplugged at the PDU (J. Doe)",
            "bmc": "ipmi reads power on",
        }
        assert s.fence_overrides == [
            "w1: w1 unplugged at the PDU (J. Doe) (BMC: ipmi reads power on)"
        ]
    assert any(m.startswith("WARNING: w1 is NOT fenced (ipmi reads power on)") for m in said)
    (note,) = Journal.read_notes(journal_path_for(inventory))
    assert (note.action, note.target) == ("fence_override", "node/w1")
    assert note.detail == "w1 unplugged at the PDU (J. Doe) (BMC: ipmi reads power on)"
    assert [e.owes_undo for e in Journal.read(journal_path_for(inventory))] == [False]
    assert main(["journal", "--journal", str(journal_path_for(inventory))]) == 0
    out = capsys.readouterr().out
    assert "fence_override node/w1  by " in out
    assert out.rstrip().endswith("w1 unplugged at the PDU (J. Doe) (BMC: ipmi reads power on)")


def test_force_deleting_a_not_ready_nodes_pods_needs_the_bmc_to_read_off(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    api.update("nodes", "", "w2", lambda o: o["status"]["conditions"][0].update(status="Unknown"))
    api.add("pods", pod("db-0", namespace="shop", node_name="w2", owner=("StatefulSet", "db")))
    with Session(inventory, client=api.client()) as s:
        # A partition: NotReady for the API, but the BMC says it runs (and so do its pods).
        with pytest.raises(FencingRequired, match="force-delete the pods of w2"):
            s.force_delete_pods("w2")
        assert api.get("pods", "shop", "db-0") is not None
        bmcs.power["w2"] = PowerState.OFF
        assert s.force_delete_pods("w2") == ["shop/db-0"]


def test_a_ready_nodes_pods_are_force_deleted_without_reading_its_bmc(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    api.add("pods", pod("web-1", namespace="shop", node_name="w3"))
    with Session(inventory, client=api.client()) as s:
        assert s.force_delete_pods("w3") == ["shop/web-1"]  # its kubelet stops the containers
    assert bmcs.ops("state") == []


def test_a_dry_run_says_it_would_fence_first(inventory: Inventory, bmcs: FakeBmcs) -> None:
    with Session(inventory, dry_run=True) as s:
        s.add_out_of_service_taint("w1")
    assert s.plan[0].startswith("confirm w1 is powered OFF through its BMC, then taint it")
    assert bmcs.calls == []
