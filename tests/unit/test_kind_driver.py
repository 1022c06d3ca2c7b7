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
from tests.fakes.clock import FakeClock
from tests.fakes.docker import Docker, install


@pytest.fixture
def docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Docker:
    return install(tmp_path, monkeypatch)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=0.0)


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


def test_graceful_off_is_a_poweroff_through_systemd(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker")
    kind(clock=clock, stop_timeout_s=7).off(graceful=True)
    # kind's restart policy set aside first, or Docker would start the node again
    assert docker.verbs() == [INSPECT, "update --restart no", "exec poweroff", INSPECT]
    kind(clock=clock).on()
    assert docker.verbs()[-1] == "update --restart on-failure:1"


def test_graceful_off_falls_back_to_docker_stop(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker")
    docker.set(poweroff_ignored=True)
    kind(clock=clock, stop_timeout_s=7).off(graceful=True)
    calls = docker.verbs()
    assert calls[:3] == [INSPECT, "update --restart no", "exec poweroff"]
    assert calls[-2:] == ["stop --time 7", INSPECT]
    assert clock.now == pytest.approx(7.0, abs=0.5)  # waited the grace, no longer


def test_off_of_a_stopped_node_and_on_of_a_running_one_change_nothing(
    docker: Docker, clock: FakeClock
) -> None:
    docker.container("kind-worker", "exited")
    docker.container("kind-worker2", "running")
    kind(clock=clock).off()
    kind("kind-worker2", clock=clock).on()
    # on() of a running node only reads whether it is cut off (the network, its storage)
    # or its kubelet stopped
    assert docker.verbs() == [
        INSPECT,
        INSPECT,
        "exec partition-state",
        "exec storage-state",
        "exec kubelet-state",
    ]


def test_on_starts_the_container(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker", "exited")
    kind(clock=clock).on()
    assert docker.verbs() == [INSPECT, "start", INSPECT, "update --restart on-failure:1"]
    assert docker.status("kind-worker") == ("running", False)


def test_cycle_kills_then_starts(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker")
    kind(clock=clock).cycle()
    assert [v for v in docker.verbs() if v != INSPECT] == [
        "kill --signal KILL",
        "start",
        "update --restart on-failure:1",
    ]
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


STATE = "exec partition-state"


def test_partition_cuts_with_the_heal_armed_and_heal_reconnects(
    docker: Docker, clock: FakeClock
) -> None:
    docker.container("kind-worker")
    d = kind(clock=clock)
    assert d.supports("partition") and d.supports("kubelet") and not d.supports("drain")
    d.partition("kind-worker", heal_after_s=45)
    assert docker.cut("kind-worker") is True
    assert docker.status("kind-worker") == ("running", False)  # it keeps running
    assert d.partitioned() is True
    assert d.state() is PowerState.ON
    d.heal("kind-worker")
    assert docker.cut("kind-worker") is False
    assert d.partitioned() is False
    calls = [v for v in docker.verbs() if v not in (INSPECT, STATE)]
    # One script arms the heal timer (45 s, on the node) and cuts; heal runs now.
    assert calls == ["exec partition 45.000", "exec heal"]


def test_partition_scripts_arm_the_heal_before_the_cut() -> None:
    from harness.power import kind as k

    script = k.PARTITION_SCRIPT
    assert script.index("systemd-run") < script.index("iptables -w -I")
    assert "RemainAfterElapse=no" in script
    stop = k.STOP_KUBELET_SCRIPT
    assert stop.index("systemd-run") < stop.index("systemctl stop kubelet.service")
    # systemd expands $VAR in the command it runs: the armed heal must hold none
    assert "$" not in k._HEAL_BODY


def test_kubelet_stop_and_start(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker")
    d = kind(clock=clock)
    d.stop_kubelet("kind-worker", restart_after_s=30)
    assert docker.kubelet("kind-worker") is False
    assert d.kubelet_active() is False
    d.start_kubelet("kind-worker")
    assert d.kubelet_active() is True
    assert [v for v in docker.verbs() if v.startswith("exec") and "state" not in v] == [
        "exec stop-kubelet 30.000",
        "exec start-kubelet",
    ]


def test_on_of_a_running_node_heals_and_restarts_the_kubelet(
    docker: Docker, clock: FakeClock
) -> None:
    docker.container("kind-worker")
    d = kind(clock=clock)
    d.partition(heal_after_s=60)
    d.stop_kubelet(restart_after_s=60)
    d.on()
    assert (docker.cut("kind-worker"), docker.kubelet("kind-worker")) == (False, True)


def test_failures_of_a_stopped_node_or_another_node_are_refused(
    docker: Docker, clock: FakeClock
) -> None:
    docker.container("kind-worker", "exited")
    d = kind(clock=clock)
    with pytest.raises(PermanentError, match=r"is off; only a running node can be partitioned"):
        d.partition(heal_after_s=10)
    with pytest.raises(PermanentError, match=r"is off; only a running node can have its kubelet"):
        d.stop_kubelet(restart_after_s=10)
    with pytest.raises(ConfigError, match="asked to act on kind-worker2"):
        d.partition("kind-worker2", heal_after_s=10)
    with pytest.raises(ConfigError, match="heal_after_s must be positive"):
        d.partition(heal_after_s=0)
    d.heal()  # off: nothing to heal, nothing sent
    assert [v for v in docker.verbs() if v != INSPECT] == []


def test_freeze_pauses_and_thaw_unpauses(docker: Docker, clock: FakeClock) -> None:
    docker.container("kind-worker")
    d = kind(clock=clock)
    d.freeze()
    assert docker.status("kind-worker") == ("paused", True)
    assert d.state() is PowerState.UNKNOWN
    d.freeze()  # idempotent
    d.thaw()
    d.thaw()
    assert [v for v in docker.verbs() if v != INSPECT] == ["pause", "unpause"]


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
    a paused kind node (its state is UNKNOWN, not ON) and reconnect a partitioned one."""
    inv = parse_inventory(INVENTORY.format(docker=docker.exe), base_dir=tmp_path)
    docker.container("powercut-worker", "paused", True)
    ClusterExecutor(inv, client=None).power_on("powercut-worker")  # type: ignore[arg-type]
    assert docker.status("powercut-worker") == ("running", False)
    KindDriver("powercut-worker", docker=str(docker.exe)).partition(heal_after_s=60)
    assert docker.cut("powercut-worker") is True
    ClusterExecutor(inv, client=None).power_on("powercut-worker")  # type: ignore[arg-type]
    assert docker.cut("powercut-worker") is False


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
    assert [v for v in docker.verbs() if v != INSPECT] == [
        "start",
        "start",
        "start",
        "update --restart on-failure:1",
    ]
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
