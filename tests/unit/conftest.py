"""Fixtures shared by the unit tests; a module's own fixture of the same name wins."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakeapi import FakeApiServer


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    """A fake API server on loopback, stopped after the test."""
    with FakeApiServer() as server:
        yield server
