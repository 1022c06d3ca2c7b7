"""`lab up` / `status` / `down` on a small lab of its own: idempotent, leaves nothing behind."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from harness.inventory import load_inventory
from harness.journal.liveness import process_alive
from harness.lab.spec import LabSpec, busy_ports
from tests.lab.conftest import powercut

pytestmark = pytest.mark.lab
PORT = 24000


def _pids(state: Path) -> list[int]:
    data = json.loads((state / "state.json").read_text())
    pids = [int(data["supervisor_pid"])]
    pids += [c["pid"] for c in data["components"].values() if c["pid"]]
    return pids


def _components(state: Path) -> dict[str, int]:
    data = json.loads((state / "state.json").read_text())
    return {n: int(c["pid"]) for n, c in data["components"].items() if c["pid"]}


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def test_up_is_idempotent_and_down_leaves_nothing(tmp_path: Path) -> None:
    state, inv = tmp_path / "state", tmp_path / "inv.yaml"
    common = ["--state-dir", str(state)]
    up = [
        "lab",
        "up",
        "--control-planes",
        "1",
        "--racks",
        "1",
        "--workers-per-rack",
        "1",
        "--base-port",
        str(PORT),
        "--timings",
        "upstream",
        "--inventory-out",
        str(inv),
        *common,
    ]
    # The lab's own temporary directory: other processes on the machine use /tmp too.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    try:
        powercut(*up, env=env)
        spec = LabSpec.load(state)
        pids = _pids(state)
        assert len(pids) >= 6  # supervisor, etcd, apiserver, cm, scheduler, 2 kwoks
        assert all(process_alive(p) for p in pids)
        # The upstream profile reaches the inventory and the real components' flags.
        assert load_inventory(inv).timings == "upstream"
        argv = {name: _cmdline(pid) for name, pid in _components(state).items()}
        (cm,) = [a for n, a in argv.items() if "controller-manager" in n]
        (api,) = [a for n, a in argv.items() if "apiserver" in n]
        assert "--node-monitor-grace-period=50s" in cm, cm
        assert "--default-unreachable-toleration-seconds=300" in api, api
        assert "--default-not-ready-toleration-seconds=300" in api, api

        again = powercut(*up, env=env)
        assert "already running" in again.stdout
        assert _pids(state) == pids, "a second `up` must change nothing"

        status = powercut("lab", "status", *common, env=env)
        assert "cp-1" in status.stdout and "w-a1" in status.stdout
        assert "Ready" in status.stdout
    finally:
        down = powercut("lab", "down", *common, env=env)
    assert "lab stopped" in down.stdout
    assert not state.exists(), "down must remove the state directory"
    assert not [p for p in pids if process_alive(p)], "down must stop every process it started"
    assert busy_ports(spec.all_ports()) == []
    leaked = set(os.listdir(tmp))
    assert not leaked, f"down left temporary files behind: {sorted(leaked)}"
    again = powercut("lab", "down", *common)
    assert again.returncode == 0 and "nothing to do" in again.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--racks", "0"], "--racks"),
        (["--timings", "slowest"], "fast, upstream"),
        (["--control-planes", "2"], "1, 3 or 5"),
        (["--base-port", "40000"], "ephemeral range"),
        (["--racks", "x"], "--racks"),
        (["--colour", "red"], "--colour"),
    ],
)
def test_bad_options_give_one_clear_line(tmp_path: Path, args: list[str], needle: str) -> None:
    out = powercut("lab", "up", "--state-dir", str(tmp_path / "s"), *args, check=False)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert needle in lines[0]
    assert not (tmp_path / "s").exists()


def test_busy_port_gives_one_clear_line(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", PORT + 100 + 3))  # a health-endpoint port of that lab
    holder.listen()
    try:
        out = powercut(
            "lab",
            "up",
            "--control-planes",
            "1",
            "--racks",
            "1",
            "--workers-per-rack",
            "1",
            "--base-port",
            str(PORT),
            "--state-dir",
            str(tmp_path / "s"),
            check=False,
        )
    finally:
        holder.close()
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert str(PORT + 103) in lines[0] and "--base-port" in lines[0]
    assert not (tmp_path / "s" / "supervisor.pid").exists()
