"""The lab comes up once per test session, on its own ports and state directory."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.inventory import Inventory, load_inventory
from harness.kube.client import KubeClient
from tests.polling import poll_until

BASE_PORT = int(os.environ.get("POWERCUT_TEST_LAB_PORT", "23000"))
POWERCUT = [sys.executable, "-m", "harness.cli"]


def powercut(
    *args: str, check: bool = True, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*POWERCUT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"powercut {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


@dataclass
class LabHandle:
    state_dir: Path
    inventory_path: Path
    inventory: Inventory
    client: KubeClient
    base_port: int

    def kubectl_like(self, path: str) -> Any:
        return self.client.get(path)

    def booted(self, node: str) -> bool:
        """On and done booting, as the lab's state file says: its kubelet (kwok) runs. A Node
        that reads Ready while it still boots is stale: the controller marks it Unknown once
        the grace period has passed since its last heartbeat."""
        state = json.loads((self.state_dir / "state.json").read_text())
        return bool(state["power"].get(node) == "on" and node not in state.get("booting", []))


def wait_for(what: str, fn: Callable[[], Any], timeout_s: float, every_s: float = 0.2) -> Any:
    """Poll ``fn`` until it returns something truthy; fail naming what and the last value."""
    return poll_until(what, fn, timeout_s, every_s)


@pytest.fixture(scope="session", autouse=True)
def _own_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Journals and locks of these tests in a directory of their own, never the user's (and
    never another lab stage's: `make test` runs two of them side by side)."""
    before = os.environ.get("POWERCUT_STATE_DIR")
    os.environ["POWERCUT_STATE_DIR"] = str(tmp_path_factory.mktemp("powercut-state"))
    yield
    if before is None:
        os.environ.pop("POWERCUT_STATE_DIR", None)
    else:
        os.environ["POWERCUT_STATE_DIR"] = before


@contextlib.contextmanager
def lab_session(root: Path, timings: str = "fast", timeout: float = 600) -> Iterator[LabHandle]:
    """A lab of its own under ``root`` (workloads, ``timings``, the lab tests' ports), taken
    down whatever happens: the lab fixture's and the opt-in upstream lab's."""
    state, inv = root / "state", root / "lab.yaml"
    try:
        out = powercut(
            "lab", "up", "--workloads", "--timings", timings, "--base-port", str(BASE_PORT),
            "--state-dir", str(state), "--inventory-out", str(inv), timeout=timeout,
        )  # fmt: skip
        print(out.stdout, out.stderr)
        inventory = load_inventory(inv)
        client = KubeClient.from_kubeconfig(inventory.cluster.kubeconfig)
        yield LabHandle(state, inv, inventory, client, BASE_PORT)
        client.close()
    finally:
        powercut("lab", "down", "--state-dir", str(state), check=False)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    with lab_session(tmp_path_factory.mktemp("lab")) as handle:
        yield handle
