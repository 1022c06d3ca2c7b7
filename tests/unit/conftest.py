"""Fixtures shared by the unit tests; a module's own fixture of the same name wins."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.inventory import Inventory, load_inventory
from tests.fakes.api import FakeApiServer
from tests.fakes.clock import FakeClock
from tests.fakes.power import FakeBmcs, add_nodes, write_inventory


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock that moves only when slept or waited on, or advanced (tests.fakes.clock)."""
    return FakeClock()


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    """A fake API server on loopback, stopped after the test."""
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def bmcs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBmcs:
    """BMCs kept in memory, handed out by ``driver_for``; the journal and locks in tmp_path."""
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    return FakeBmcs().install(monkeypatch)


@pytest.fixture
def inventory(tmp_path: Path, api: FakeApiServer, bmcs: FakeBmcs) -> Inventory:
    """The fake inventory (``tests.fakes.power.INVENTORY``), its nodes in the fake API."""
    add_nodes(api)
    return load_inventory(write_inventory(tmp_path, api.url))
