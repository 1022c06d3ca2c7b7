"""The operator actions' plural forms (harness.scenario.acts.operator): every chosen node in
turn, each journaled with its undo before it acts, the fencing rules applied per node."""

from __future__ import annotations

import pytest

from harness.inventory import Inventory
from harness.kube.actions import OUT_OF_SERVICE_KEY, FencingRequired
from harness.kube.timeline import ACTION
from harness.power.base import PowerState
from harness.scenario.acts import operator
from harness.scenario.report import Measurements
from harness.session import Session
from tests.fakes.api import FakeApiServer
from tests.fakes.power import FakeBmcs

NODES = ("w1", "w2")


def _taints(api: FakeApiServer, name: str) -> list[str]:
    obj = api.get("nodes", "", name)
    assert obj is not None
    return [t["key"] for t in obj["spec"].get("taints") or []]


def _unschedulable(api: FakeApiServer, name: str) -> bool:
    obj = api.get("nodes", "", name)
    assert obj is not None
    return bool(obj["spec"].get("unschedulable"))


def test_the_taint_fences_each_node_on_its_own_and_undoes_what_it_did(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    bmcs.power["w1"] = PowerState.OFF  # w2's BMC still reads On: a partition, not a shutdown
    with Session(inventory, client=api.client()) as s:
        with pytest.raises(FencingRequired, match="w2"):
            operator.taint_out_of_service(s, NODES)
        assert _taints(api, "w1") == [OUT_OF_SERVICE_KEY]
        assert _taints(api, "w2") == []
    assert _taints(api, "w1") == []  # the journaled undo ran when the session ended


def test_every_node_is_tainted_and_the_first_request_is_where_phases_start(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    for n in NODES:
        bmcs.power[n] = PowerState.OFF
    with Session(inventory, client=api.client()) as s:
        first = operator.taint_out_of_service(s, NODES)
        assert all(_taints(api, n) == [OUT_OF_SERVICE_KEY] for n in NODES)
        sent = [s.timeline.first(ACTION, n, "taint sent") for n in NODES]
        assert first == sent[0] and sent[1] is not None and sent[1].mono >= first.mono
        operator.remove_out_of_service_taint(s, NODES)
        assert all(_taints(api, n) == [] for n in NODES)


def test_cordon_and_uncordon_act_on_every_node(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    with Session(inventory, client=api.client()) as s:
        operator.cordon(s, NODES)
        assert all(_unschedulable(api, n) for n in NODES)
        assert not _unschedulable(api, "w3")
        operator.uncordon(s, NODES)
        assert not any(_unschedulable(api, n) for n in NODES)
        operator.cordon(s, NODES)
    assert not any(_unschedulable(api, n) for n in NODES)  # undone at the session's end


def test_every_node_object_is_deleted_and_recreated_by_the_undo(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    with Session(inventory, client=api.client()) as s:
        first = operator.delete_nodes(s, NODES)
        assert first.transition == "delete-node sent" and first.name == "w1"
        assert api.get("nodes", "", "w1") is None and api.get("nodes", "", "w2") is None
    assert api.get("nodes", "", "w1") is not None and api.get("nodes", "", "w2") is not None


def test_drain_merges_the_nodes_drains(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    ms = Measurements()
    with Session(inventory, client=api.client()) as s:
        result = operator.drain(s, NODES, s.timeline.clock.monotonic() + 30, ms, 30.0)
        assert result.node == "w1, w2"
        assert all(_unschedulable(api, n) for n in NODES)
        start, end = operator.drain_window(s.timeline, NODES)
        assert start.name == "w1" and end.name == "w2" and end.mono >= start.mono
    assert ms.items[0]["phase"] == "drain"
    assert not any(_unschedulable(api, n) for n in NODES)
