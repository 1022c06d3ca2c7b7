"""The polling wait the lab, kind and management-cluster tests share (each conftest keeps
its own default interval: a lab answers in milliseconds, a kind Job in seconds)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def poll_until(what: str, fn: Callable[[], Any], timeout_s: float, every_s: float) -> Any:
    """Poll ``fn`` until it returns something truthy; fail naming what and the last value."""
    start = time.monotonic()
    last: Any = None
    while time.monotonic() - start < timeout_s:
        try:
            last = fn()
        except Exception as exc:  # noqa: BLE001 (kept as the last observation)
            last = exc
        else:
            if last:
                return last
        time.sleep(every_s)
    pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}; last seen: {last!r}")
