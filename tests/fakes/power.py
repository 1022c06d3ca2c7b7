"""Fakes for the power commands' unit tests: BMCs kept in memory, an inventory file and a
kubeconfig that point at a fake API server (``tests.fakes.api``).

``FakeBmcs.install(monkeypatch)`` makes ``driver_for`` hand out :class:`FakeDriver` objects
in the session, the CLI and the pre-flight, so nothing reaches a network or a clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.inventory import NodeSpec
from harness.power.base import NothingToDo, PowerState, PreparedPower, Unprepared
from tests.fakes import api as fakeapi

#: Nodes of :data:`INVENTORY`: three control-plane nodes and four workers in two racks.
CONTROL_PLANE = ("cp1", "cp2", "cp3")
WORKERS = ("w1", "w2", "w3", "w4")

INVENTORY = """\
name: fake-bmc
timings: fast
cluster: {{kubeconfig: {kubeconfig}}}
racks: [{{name: a}}, {{name: b}}]
nodes:
{nodes}
safety: {safety}
"""
NODE = (
    "  - {{name: {name}, role: {role}, rack: {rack}, power: {{driver: ipmi, "
    'endpoint: "10.0.0.{i}", username: admin, password_env: FAKE_BMC_PW}}}}'
)


#: Where ``driver_for`` is looked up by the code under test.
MODULES = (
    "harness.session.core",
    "harness.session.executor",
    "harness.session.restore",
    "harness.cli.power",
    "harness.preflight",
)


class FakeDriver:
    """A :class:`~harness.power.base.PowerDriver` over :class:`FakeBmcs`."""

    def __init__(self, bmcs: FakeBmcs, node: str, protocol: str | None) -> None:
        self.bmcs = bmcs
        self.node = node
        self.protocol = protocol

    def state(self) -> PowerState:
        self.bmcs.act(self.node, "state")
        return self.bmcs.power[self.node]

    def off(self, *, graceful: bool = False) -> None:
        self.bmcs.act(self.node, "off")
        self.bmcs.power[self.node] = PowerState.OFF

    def prepare_off(self, *, graceful: bool = False) -> PreparedPower:
        """As the ipmi and redfish drivers: ready the request (op ``prepare``); firing it is
        the ``off`` op."""
        self.bmcs.act(self.node, "prepare")
        if self.bmcs.power[self.node] is PowerState.OFF:
            return NothingToDo()
        return Unprepared(self, graceful)

    def on(self) -> None:
        self.bmcs.act(self.node, "on")
        self.bmcs.power[self.node] = PowerState.ON

    def cycle(self) -> None:
        self.bmcs.act(self.node, "cycle")
        self.bmcs.power[self.node] = PowerState.ON

    def close(self) -> None:
        return None


class FakeBmcs:
    """The power state of every node, the calls made, and failures to inject.

    ``fail[(node, op)]`` is raised by that call (``op``: state, off, on, cycle);
    ``during[(node, op)]`` runs inside the call before it takes effect.
    """

    def __init__(self, nodes: tuple[str, ...] = CONTROL_PLANE + WORKERS) -> None:
        self.power: dict[str, PowerState] = dict.fromkeys(nodes, PowerState.ON)
        self.calls: list[tuple[str, str]] = []
        self.fail: dict[tuple[str, str], Exception] = {}
        self.during: dict[tuple[str, str], Callable[[], object]] = {}
        self.options: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def act(self, node: str, op: str) -> None:
        with self._lock:
            self.calls.append((node, op))
        hook = self.during.get((node, op))
        if hook is not None:
            hook()
        error = self.fail.get((node, op))
        if error is not None:
            raise error

    def ops(self, op: str) -> list[str]:
        """The nodes that got ``op``, in call order."""
        return [n for n, o in self.calls if o == op]

    def driver_for(self, node: NodeSpec, protocol: str | None = None, **options: Any) -> FakeDriver:
        self.options.append(options)
        return FakeDriver(self, node.name, protocol)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeBmcs:
        monkeypatch.setenv("FAKE_BMC_PW", "not-used")
        for module in MODULES:
            monkeypatch.setattr(f"{module}.driver_for", self.driver_for)
        return self


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n"
        f"clusters: [{{name: fake, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: fake, user: {token: t}}]\n"
    )
    return path


def write_inventory(tmp_path: Path, server: str, *, safety: str = "{max_nodes_down: 2}") -> Path:
    """An inventory of :data:`CONTROL_PLANE` and :data:`WORKERS` whose kubeconfig names
    ``server``; the journal goes under ``tmp_path`` (``POWERCUT_STATE_DIR`` must be set)."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server)
    lines = [
        NODE.format(name=n, role="control-plane", rack="a", i=i)
        for i, n in enumerate(CONTROL_PLANE, 1)
    ]
    lines += [
        NODE.format(name=n, role="worker", rack="ab"[i % 2], i=10 + i)
        for i, n in enumerate(WORKERS)
    ]
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY.format(kubeconfig=kubeconfig, nodes="\n".join(lines), safety=safety))
    return path


def serve_version(monkeypatch: pytest.MonkeyPatch, git_version: str = "v1.36.3") -> None:
    """Make the fake API server answer ``GET /version`` as kube-apiserver does."""
    original = fakeapi._Handler.do_GET

    def do_get(handler: fakeapi._Handler) -> None:
        if handler.path.split("?")[0] == "/version":
            handler._send(200, {"major": "1", "minor": "36", "gitVersion": git_version})
            return
        original(handler)

    monkeypatch.setattr(fakeapi._Handler, "do_GET", do_get)


def add_nodes(api: fakeapi.FakeApiServer, names: tuple[str, ...] = CONTROL_PLANE + WORKERS) -> None:
    for name in names:
        api.add("nodes", fakeapi.node(name))
