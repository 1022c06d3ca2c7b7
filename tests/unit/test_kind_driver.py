"""The kind power driver against a fake ``docker`` executable written by the test.

No Docker engine runs here. The fake CLI keeps container states in a JSON file, logs every
invocation, and answers like the docker CLI does (its error texts included), so the driver
runs its real subprocess calls, parsing and error mapping. What the fake cannot show —
a kind node's kubelet going NotReady after ``docker kill``, systemd shutting down on
``docker stop``, a node container keeping its IP across a restart — is not exercised here
(see docs/kind.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.errors import ConfigError, PermanentError, WaitTimeout
from harness.inventory import parse_inventory
from harness.power.base import PowerDriver, PowerState
from harness.power.factory import driver_for
from harness.power.kind import KindDriver, SupportsPartition
from harness.session import ClusterExecutor
from tests.fakedocker import Docker, install


class FakeClock:
    """Monotonic time that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Docker:
    return install(tmp_path, monkeypatch)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def kind(node: str = "kind-worker", *, clock: FakeClock, **kw: Any) -> KindDriver:
    return KindDriver(node, timeout_s=10, poll_s=0.5, clock=clock, **kw)


INSPECT = "inspect --type container --format {{.State.Status}} {{.State.Paused}}"


# -- states ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "paused", "want"),
    [
        ("running", False, PowerState.ON),
        ("exited", False, PowerState.OFF),
        ("created", False, PowerState.OFF),
        ("dead", False, PowerState.OFF),
        ("paused", True, PowerState.UNKNOWN),
        ("restarting", False, PowerState.UNKNOWN),
    ],
)
def test_state_maps_container_status(
    docker: Docker, clock: FakeClock, status: str, paused: bool, want: PowerState
) -> None:
    docker.container("kind-worker", status, paused)
    assert kind(clock=clock).state() is want
    assert docker.verbs() == [INSPECT]


def test_driver_satisfies_both_protocols(clock: FakeClock) -> None:
    d = kind(clock=clock)
    assert isinstance(d, PowerDriver)
    assert isinstance(d, SupportsPartition)
    assert "kind-worker" in repr(d)


# -- power -------------------------------------------------------------------------------------


def test_forced_off_is_a_kill_and_reads_off_back(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker")
    docker.set(lag=2)  # the kill shows after two more inspects
    kind(clock=clock).off()
    assert docker.status("kind-worker") == ("exited", False)
    assert docker.verbs() == [INSPECT, "kill --signal KILL", INSPECT, INSPECT, INSPECT]
    assert clock.sleeps == [0.5, 0.5]


def test_graceful_off_is_a_stop_with_the_configured_grace(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker")
    kind(clock=clock, stop_timeout_s=7).off(graceful=True)
    assert docker.verbs() == [INSPECT, "stop --time 7", INSPECT]


def test_off_of_a_stopped_node_and_on_of_a_running_one_send_nothing(
    docker: Docker, clock: FakeClock
) -> None:
    docker.container("kind-worker", "exited")
    docker.container("kind-worker2", "running")
    kind(clock=clock).off()
    kind("kind-worker2", clock=clock).on()
    assert docker.verbs() == [INSPECT, INSPECT]


def test_on_starts_the_container(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker", "exited")
    kind(clock=clock).on()
    assert docker.verbs() == [INSPECT, "start", INSPECT]
    assert docker.status("kind-worker") == ("running", False)


def test_cycle_kills_then_starts(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker")
    kind(clock=clock).cycle()
    assert [v for v in docker.verbs() if v != INSPECT] == ["kill --signal KILL", "start"]
    assert docker.status("kind-worker") == ("running", False)


def test_endpoint_names_the_container(docker: Docker, clock: FakeClock) -> None:
    docker.container("other-name", "exited")
    kind("kind-worker", clock=clock, container="other-name").on()
    assert docker.read()["log"][1] == ["start", "other-name"]


def test_a_state_that_never_comes_times_out_saying_what_was_seen(
    docker: Docker, clock: FakeClock
) -> None:
    docker.container("kind-worker")
    docker.set(never_applies=True)
    with pytest.raises(WaitTimeout) as err:
        kind(clock=clock).off()
    assert err.value.expected == "kind-worker: container kind-worker off after `docker kill`"
    assert err.value.last_seen == "state on"
    assert clock.now == pytest.approx(10.0)


# -- partitions --------------------------------------------------------------------------------


def test_partition_pauses_and_heal_unpauses(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker")
    d = kind(clock=clock)
    d.partition()
    assert docker.status("kind-worker") == ("paused", True)
    assert d.partitioned() is True
    assert d.state() is PowerState.UNKNOWN
    d.partition()  # idempotent
    d.heal()
    assert docker.status("kind-worker") == ("running", False)
    d.heal()  # not paused: nothing sent
    assert [v for v in docker.verbs() if v != INSPECT] == ["pause", "unpause"]


def test_partition_through_the_session_interface_checks_the_node(
    docker: Docker, clock: FakeClock
) -> None:
    docker.container("kind-worker")
    d = kind(clock=clock)
    with pytest.raises(PermanentError, match=r"asked to cut node 'w9', not this one"):
        d.partition("w9", heal_after_s=60.0)
    assert [v for v in docker.verbs() if v != INSPECT] == []
    d.partition(d.node, heal_after_s=60.0)
    assert d.partitioned() is True
    d.heal(d.node)
    assert docker.status("kind-worker") == ("running", False)


def test_partition_of_a_stopped_node_is_refused(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker", "exited")
    with pytest.raises(PermanentError, match=r"is off; only a running node can be partitioned"):
        kind(clock=clock).partition()


def test_on_thaws_a_paused_node_and_off_thaws_before_the_kill(
    docker: Docker, clock: FakeClock
) -> None:
    docker.container("kind-worker", "paused", True)
    docker.container("kind-worker2", "paused", True)
    kind(clock=clock).on()
    kind("kind-worker2", clock=clock).off()
    assert docker.status("kind-worker") == ("running", False)
    assert docker.status("kind-worker2") == ("exited", False)
    assert [v for v in docker.verbs() if v != INSPECT] == [
        "unpause",
        "unpause",
        "kill --signal KILL",
    ]


def test_the_recover_path_heals_a_partition(docker: Docker, tmp_path: Path) -> None:
    """``powercut recover`` runs a ``power_on`` undo through ClusterExecutor: it must thaw
    a paused kind node (its state is UNKNOWN, not ON)."""
    inv = parse_inventory(INVENTORY.format(docker=docker.exe), base_dir=tmp_path)
    docker.container("powercut-worker", "paused", True)
    ClusterExecutor(inv, client=None).power_on("powercut-worker")  # type: ignore[arg-type]
    assert docker.status("powercut-worker") == ("running", False)


# -- errors ------------------------------------------------------------------------------------


def test_missing_container_is_permanent_at_once(docker: Docker, clock: FakeClock) -> None:
    with pytest.raises(PermanentError, match=r"does not exist .*No such object.*kind names node"):
        kind(clock=clock).state()
    assert len(docker.verbs()) == 1
    assert clock.sleeps == []


def test_unreachable_engine_is_permanent_at_once(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker")
    docker.set(down=True)
    with pytest.raises(PermanentError, match="the Docker engine cannot be reached"):
        kind(clock=clock).off()
    assert len(docker.verbs()) == 1


def test_a_busy_container_is_retried_with_backoff(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker", "exited")
    docker.set(busy=2)
    kind(clock=clock).on()
    assert [v for v in docker.verbs() if v != INSPECT] == ["start", "start", "start"]
    assert clock.sleeps == [0.5, 1.0]
    assert docker.status("kind-worker") == ("running", False)


def test_a_refused_request_is_permanent(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker", "exited")
    d = kind(clock=clock)
    with pytest.raises(PermanentError, match="`docker pause`"):
        d._command(("pause",), d._deadline())


def test_a_hanging_cli_is_temporary_until_the_deadline(docker: Docker) -> None:
    docker.container("kind-worker")
    docker.set(hang_s=5)
    d = KindDriver("kind-worker", timeout_s=0.2, poll_s=0.1, call_timeout_s=0.2)
    with pytest.raises(WaitTimeout, match=r"gave no answer within 0\.2s"):
        d.state()


def test_missing_cli_is_a_config_error(clock: FakeClock) -> None:
    d = kind(clock=clock, docker="no-such-docker-cli")
    with pytest.raises(ConfigError, match="'no-such-docker-cli' is not on PATH"):
        d.state()


# -- the inventory -----------------------------------------------------------------------------

INVENTORY = """
cluster: {{kubeconfig: kubeconfig}}
nodes:
  - name: powercut-worker
    role: worker
    power:
      driver: kind
      extra: {{docker: {docker}, stop_timeout_s: 5, timeout_s: 20}}
  - name: powercut-worker2
    role: worker
    power: {{driver: kind, endpoint: renamed-container}}
"""


def test_driver_for_finds_kind_through_the_entry_point(docker: Docker, tmp_path: Path) -> None:
    inv = parse_inventory(INVENTORY.format(docker=docker.exe), base_dir=tmp_path)
    d = driver_for(inv.node("powercut-worker"))
    assert isinstance(d, KindDriver)
    assert (d.container, d.docker, d.stop_timeout_s, d.timeout_s) == (
        "powercut-worker",
        str(docker.exe),
        5,
        20.0,
    )
    d2 = driver_for(inv.node("powercut-worker2"))
    assert isinstance(d2, KindDriver)
    assert (d2.container, d2.docker) == ("renamed-container", "docker")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("{dockr: x}", "unknown option 'dockr' for driver kind.*valid keys: docker, stop"),
        ("{timeout_s: soon}", "extra.timeout_s: 'soon' is not valid; must be a positive number"),
        ("{docker: ''}", "extra.docker: '' is not valid; must be the name or path"),
    ],
)
def test_bad_extra_options_are_refused(tmp_path: Path, extra: str, message: str) -> None:
    """The kind plugin's options model checks extra when the inventory loads."""
    text = f"""
cluster: {{kubeconfig: kubeconfig}}
nodes:
  - {{name: w1, role: worker, power: {{driver: kind, extra: {extra}}}}}
"""
    with pytest.raises(ConfigError, match=message):
        parse_inventory(text, base_dir=tmp_path)


# -- the shipped kind files --------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def kind_node_names(config: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(container/node name, role, zone) as kind names them: <cluster>-control-plane,
    -control-plane2, ..., <cluster>-worker, -worker2, ..."""
    seen: dict[str, int] = {}
    out = []
    for n in config["nodes"]:
        role = n["role"]
        seen[role] = seen.get(role, 0) + 1
        suffix = "" if seen[role] == 1 else str(seen[role])
        zone = (n.get("labels") or {}).get("topology.kubernetes.io/zone", "")
        out.append((f"{config['name']}-{role}{suffix}", role, zone))
    return out


def test_the_kind_example_inventory_matches_the_kind_cluster_config() -> None:
    import yaml

    from harness.inventory import load_inventory

    config = yaml.safe_load((ROOT / "kind" / "cluster.yaml").read_text())
    inv = load_inventory(ROOT / "inventories" / "kind-example.yaml")
    assert [(n.name, n.role, n.rack) for n in inv.nodes] == kind_node_names(config)
    assert [r for _, r, _ in kind_node_names(config)].count("control-plane") == 3
    assert [r for _, r, _ in kind_node_names(config)].count("worker") == 3
    assert {n.power.driver for n in inv.nodes} == {"kind"}
    assert inv.cluster.context == f"kind-{config['name']}"
    # The health endpoint is the NodePort the first control-plane node publishes.
    [mapping] = config["nodes"][0]["extraPortMappings"]
    web = next(w for w in inv.workloads if w.name == "web")
    assert web.health is not None
    assert web.health.http == f"http://{mapping['listenAddress']}:{mapping['hostPort']}/"
    manifests = list(yaml.safe_load_all((ROOT / "kind" / "workloads.yaml").read_text()))
    service = next(m for m in manifests if m["kind"] == "Service")
    assert service["spec"]["ports"][0]["nodePort"] == mapping["containerPort"]
    kinds = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    assert {(w.kind, w.name) for w in inv.workloads} <= kinds
    # Fast timings in the cluster, the fast profile in the inventory.
    patches = [yaml.safe_load(p) for p in config["kubeadmConfigPatches"]]
    cm = next(p for p in patches if p["kind"] == "ClusterConfiguration")
    flags = {a["name"]: a["value"] for a in cm["controllerManager"]["extraArgs"]}
    assert flags["node-monitor-grace-period"] == "16s"
    assert inv.timings == "fast"
    assert inv.timing_budgets().node_not_ready >= 16 + 2 * 2
