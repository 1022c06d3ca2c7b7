"""Pre-flight checks against a fake API server and fake BMCs."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from harness import preflight as preflight_module
from harness.errors import ConfigError, PermanentError, PowercutError
from harness.inventory import Inventory, load_inventory
from harness.kube.client import Credentials, KubeClient
from harness.power.base import PowerState
from harness.preflight import PreflightFailed, preflight
from tests.fakes.api import FakeApiServer, set_ready
from tests.fakes.power import FakeBmcs, add_nodes, serve_version, write_inventory


@pytest.fixture
def bmcs(monkeypatch: pytest.MonkeyPatch) -> FakeBmcs:
    return FakeBmcs().install(monkeypatch)


@pytest.fixture
def cluster(api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> FakeApiServer:
    serve_version(monkeypatch)
    add_nodes(api)
    return api


@pytest.fixture
def inventory(tmp_path: Path, api: FakeApiServer, bmcs: FakeBmcs) -> Inventory:
    return load_inventory(write_inventory(tmp_path, api.url))


def failures(info: pytest.ExceptionInfo[PreflightFailed]) -> list[str]:
    return [f"{c.label}: {c.detail}" for c in info.value.failed]


def test_every_check_passes_and_says_what_it_saw(
    inventory: Inventory, cluster: FakeApiServer, bmcs: FakeBmcs
) -> None:
    result = preflight(inventory, ["w1", "cp1"], cluster.client())
    assert result.ok
    assert result.lines() == [
        f"ok    api: {cluster.url} answers, v1.36.3",
        "ok    node w1: is a Node of the cluster",
        "ok    ready w1: Ready",
        "ok    bmc w1: ipmi answers, power on",
        "ok    node cp1: is a Node of the cluster",
        "ok    ready cp1: Ready",
        "ok    bmc cp1: ipmi answers, power on",
    ]
    assert sorted(bmcs.ops("state")) == ["cp1", "w1"]
    # The BMC deadline is short: the inventory's power_ack budget (fast profile: 10 s).
    assert {o["timeout_s"] for o in bmcs.options} == {10.0}


def test_an_api_server_that_does_not_answer_fails_every_cluster_check(
    inventory: Inventory, bmcs: FakeBmcs
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(PreflightFailed) as info:
        preflight(inventory, ["w1"], KubeClient(Credentials(server=dead)))
    assert isinstance(info.value, PermanentError)
    labels = [c.label for c in info.value.failed]
    assert labels == ["api", "node w1", "ready w1"]
    assert "does not answer" in info.value.failed[0].detail
    assert info.value.failed[1].detail == "not checked: the API server does not answer"
    assert info.value.result.checks[-1].ok  # the BMC was still asked
    message = str(info.value)
    assert message.startswith("pre-flight: 3 of 4 checks failed: api: ")
    assert "node w1: not checked" in message and "ready w1: not checked" in message


def test_an_api_server_that_refuses_is_a_failure(
    inventory: Inventory, api: FakeApiServer, bmcs: FakeBmcs
) -> None:
    # The plain fake answers /version with 404: an API server that is not one.
    add_nodes(api)
    with pytest.raises(PreflightFailed) as info:
        preflight(inventory, ["w1"], api.client())
    assert [c.label for c in info.value.failed] == ["api"]  # the Node checks still ran
    assert "answers with an error: GET /version: 404" in info.value.failed[0].detail


def test_a_target_that_is_no_node_of_the_cluster(
    inventory: Inventory, cluster: FakeApiServer, bmcs: FakeBmcs
) -> None:
    cluster.remove("nodes", "", "w2")
    with pytest.raises(PreflightFailed) as info:
        preflight(inventory, ["w1", "w2"], cluster.client())
    assert failures(info) == [
        "node w2: the cluster has no Node of this name (kubectl get nodes)",
        "ready w2: not checked: no such Node",
    ]


def test_a_target_that_is_not_ready(
    inventory: Inventory, cluster: FakeApiServer, bmcs: FakeBmcs
) -> None:
    def not_ready(n: dict[str, object]) -> None:
        set_ready(n, "Unknown")
        n["status"]["conditions"][0].update(  # type: ignore[index]
            reason="NodeStatusUnknown", message="Kubelet stopped posting node status."
        )
        n["spec"]["unschedulable"] = True  # type: ignore[index]

    cluster.update("nodes", "", "w3", not_ready)
    with pytest.raises(PreflightFailed) as info:
        preflight(inventory, ["w3"], cluster.client())
    assert failures(info) == [
        "ready w3: Ready is Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)"
        " (cordoned)"
    ]


def test_a_bmc_that_refuses_or_fails(
    inventory: Inventory, cluster: FakeApiServer, bmcs: FakeBmcs
) -> None:
    bmcs.fail[("w1", "state")] = PermanentError("w1: IPMI 10.0.0.10:623 refused the credentials")
    with pytest.raises(PreflightFailed) as info:
        preflight(inventory, ["w1", "w2"], cluster.client())
    assert failures(info) == ["bmc w1: ipmi: w1: IPMI 10.0.0.10:623 refused the credentials"]


def test_a_bmc_that_does_not_answer_in_time(
    inventory: Inventory,
    cluster: FakeApiServer,
    bmcs: FakeBmcs,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A driver that overruns its own deadline is not waited for past the grace period."""
    monkeypatch.setattr(preflight_module, "BMC_GRACE_S", 0.0)
    release = threading.Event()
    bmcs.during[("w1", "state")] = lambda: release.wait(10) or None
    try:
        with pytest.raises(PreflightFailed) as info:
            preflight(inventory, ["w1", "w2"], cluster.client(), bmc_timeout_s=0.05)
    finally:
        release.set()
    assert failures(info) == ["bmc w1: no answer within 0 s"]
    assert bmcs.options[0]["timeout_s"] == 0.05


def test_a_node_whose_power_is_off_fails_the_bmc_check(
    inventory: Inventory, cluster: FakeApiServer, bmcs: FakeBmcs
) -> None:
    """Over SSH, "off" means nothing answered; a BMC that reads "off" answered, but the
    node is no target for a disruption (its Node may still show Ready for a while)."""
    bmcs.power["w1"] = PowerState.OFF
    with pytest.raises(PreflightFailed) as info:
        preflight(inventory, ["w1"], cluster.client(), protocol="ssh")
    assert failures(info) == ["bmc w1: ssh: the node does not answer SSH"]
    with pytest.raises(PreflightFailed) as info:
        preflight(inventory, ["w1"], cluster.client())  # the Node still shows Ready
    assert failures(info) == ["bmc w1: ipmi answers, but the power is off"]


def test_an_unknown_node_is_a_mistake_in_the_command(
    inventory: Inventory, cluster: FakeApiServer, bmcs: FakeBmcs
) -> None:
    with pytest.raises(ConfigError, match="unknown node 'w9'"):
        preflight(inventory, ["w9"], cluster.client())
    assert bmcs.calls == []


def test_preflight_failed_is_a_permanent_error() -> None:
    assert issubclass(PreflightFailed, PermanentError)
    assert issubclass(PreflightFailed, PowercutError)
