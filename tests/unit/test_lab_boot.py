"""Lab nodes boot: after a power-on the node reads On to its BMCs at once, but its processes
(the kubelet's stand-in first) start only after its boot time; a fake clock drives the boot
timer, real child processes stand in for the node's components."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.lab.boot import FakeClock
from harness.lab.cli import parse_node_seconds
from harness.lab.machines import LabError
from harness.lab.procs import Proc
from harness.lab.spec import LabSpec, Timings
from harness.lab.supervisor import Lab
from harness.power.base import PowerState

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
FAKE_BINARIES = {
    name: "/nonexistent/" + name
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
}


def spec_of(tmp_path: Path, **kw: object) -> LabSpec:
    return LabSpec(
        state_dir=str(tmp_path / "lab"),
        racks=1,
        workers_per_rack=2,
        control_planes=1,
        base_port=20000,
        binaries=FAKE_BINARIES,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_lab(spec: LabSpec, clock: FakeClock) -> Lab:
    lab = Lab(spec, schedule=clock)
    for name in list(lab.kwok):
        lab.kwok[name] = Proc(f"kwok-{name}", SLEEPER, lab.logs)
    for name, procs in lab.cp_procs.items():
        lab.cp_procs[name] = [Proc(p.name, SLEEPER, lab.logs) for p in procs[:2]]
    for name in lab.power:
        for proc in [*lab.cp_procs.get(name, []), lab.kwok[name]]:
            proc.start()
        lab.power[name] = True
    return lab


@pytest.fixture
def lab(tmp_path: Path, clock: FakeClock) -> Iterator[Lab]:
    lab = make_lab(spec_of(tmp_path), clock)  # the fast profile's boot time: 15 s
    try:
        yield lab
    finally:
        lab.stop()


def off(lab: Lab, node: str) -> None:
    lab.power_off(node, graceful=False)
    lab._settle(node)


def test_the_default_boot_outlasts_the_grace_period_and_a_monitor_period() -> None:
    for name in ("fast", "upstream"):
        t = Timings.named(name)
        assert t.boot_s > t.node_monitor_grace_s + t.node_monitor_period_s


def test_a_powered_on_node_reads_on_but_its_kubelet_starts_only_after_its_boot(
    lab: Lab, clock: FakeClock
) -> None:
    off(lab, "w-a1")
    lab.power_on("w-a1")
    kwok = lab.kwok["w-a1"]
    assert lab.power_state("w-a1") is PowerState.ON  # its BMCs: On, as a server in POST
    assert lab.os_state("w-a1") is PowerState.OFF  # its SSH server: not up yet
    assert lab.booting("w-a1") and not lab.reporting("w-a1")
    assert not kwok.alive()
    clock.advance(14.9)
    assert not kwok.alive()
    assert lab.keep_alive() == []  # a booting node's processes are not "crashed"
    assert not kwok.alive()
    clock.advance(0.2)
    assert kwok.alive()
    assert not lab.booting("w-a1") and lab.reporting("w-a1")
    assert lab.os_state("w-a1") is PowerState.ON


def test_a_control_plane_node_boots_every_process(lab: Lab, clock: FakeClock) -> None:
    off(lab, "cp-1")
    lab.power_on("cp-1")
    procs = [lab.kwok["cp-1"], *lab.cp_procs["cp-1"]]
    assert not any(p.alive() for p in procs)
    clock.advance(15)
    assert all(p.alive() for p in procs)


def test_a_power_off_while_booting_cancels_the_boot(lab: Lab, clock: FakeClock) -> None:
    off(lab, "w-a1")
    lab.power_on("w-a1")
    clock.advance(5)
    off(lab, "w-a1")
    assert lab.power_state("w-a1") is PowerState.OFF and not lab.booting("w-a1")
    assert clock.pending == 0
    clock.advance(100)
    assert not lab.kwok["w-a1"].alive()


def test_off_and_on_again_while_booting_boots_from_the_start(lab: Lab, clock: FakeClock) -> None:
    off(lab, "w-a1")
    lab.power_on("w-a1")
    clock.advance(10)
    lab.reset("w-a1")  # a BMC reset during POST
    lab._settle("w-a1")
    clock.advance(10)  # 20 s after the first power-on, 10 s into the second boot
    assert not lab.kwok["w-a1"].alive()
    clock.advance(5.5)
    assert lab.kwok["w-a1"].alive()


def test_a_reset_of_a_running_node_stops_it_and_boots_it(lab: Lab, clock: FakeClock) -> None:
    before = lab.kwok["w-a2"]._p
    assert before is not None
    lab.reset("w-a2")
    lab._settle("w-a2")
    assert before.poll() is not None  # killed at once
    assert lab.power_state("w-a2") is PowerState.ON and not lab.kwok["w-a2"].alive()
    clock.advance(15)
    assert lab.kwok["w-a2"].alive()


def test_no_cut_while_booting(lab: Lab, clock: FakeClock) -> None:
    off(lab, "w-a1")
    lab.power_on("w-a1")
    with pytest.raises(LabError, match="booting"):
        lab.cut_off("w-a1", "kubelet", undo_after_s=30)
    clock.advance(15)
    lab.cut_off("w-a1", "kubelet", undo_after_s=30)
    lab.reconnect("w-a1", "kubelet")
    assert lab.kwok["w-a1"].alive()


def test_boot_seconds_per_node_over_the_lab_wide_value(tmp_path: Path, clock: FakeClock) -> None:
    spec = spec_of(tmp_path, boot_seconds=20, node_boot_seconds={"w-a1": 40})
    assert spec.boot_s("w-a1") == 40 and spec.boot_s("w-a2") == 20 and spec.boot_s("cp-1") == 20
    lab = make_lab(spec, clock)
    try:
        off(lab, "w-a1")
        off(lab, "w-a2")
        lab.power_on("w-a1")
        lab.power_on("w-a2")
        clock.advance(20)
        assert lab.kwok["w-a2"].alive() and not lab.kwok["w-a1"].alive()
        clock.advance(20)
        assert lab.kwok["w-a1"].alive()
    finally:
        lab.stop()


def test_boot_zero_starts_at_once(tmp_path: Path, clock: FakeClock) -> None:
    lab = make_lab(spec_of(tmp_path, boot_seconds=0), clock)
    try:
        off(lab, "w-a1")
        lab.power_on("w-a1")
        assert lab.kwok["w-a1"].alive() and clock.pending == 0
    finally:
        lab.stop()


def test_the_spec_survives_its_file(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, boot_seconds=3, node_boot_seconds={"w-a2": 7.5})
    spec.root.mkdir(parents=True)
    spec.save()
    again = LabSpec.load(spec.root)
    assert again.boot_s("w-a2") == 7.5 and again.boot_s("w-a1") == 3


@pytest.mark.parametrize(
    ("kw", "field", "says"),
    [
        ({"boot_seconds": -1}, "--boot-seconds", "valid: seconds from 0 to 3600"),
        ({"boot_seconds": True}, "--boot-seconds", "valid: seconds from 0 to 3600"),
        ({"node_boot_seconds": {"w-z9": 5}}, "--node-boot-seconds", "valid: cp-1, w-a1, w-a2"),
        ({"node_boot_seconds": {"w-a1": 1e9}}, "--node-boot-seconds", "for w-a1"),
    ],
)
def test_bad_boot_times_are_refused_naming_the_option_and_valid_values(
    tmp_path: Path, kw: dict[str, object], field: str, says: str
) -> None:
    with pytest.raises(ConfigError, match=field) as exc:
        spec_of(tmp_path, **kw)
    assert says in str(exc.value)


def test_node_seconds_options_are_parsed_or_refused() -> None:
    assert parse_node_seconds(["w-a1=40", "cp-1=2.5"]) == {"w-a1": 40.0, "cp-1": 2.5}
    for bad in ("w-a1", "=4", "w-a1=soon"):
        with pytest.raises(ConfigError, match=r"--node-boot-seconds.*NODE=SECONDS"):
            parse_node_seconds([bad])
