"""The cyclic garbage collector paused while any watcher lists (counted across threads): a
large list allocates many small objects at once, none of them garbage.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_gc_lock = threading.Lock()
_gc_pausers = 0


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while any watcher is listing (counted across threads)."""
    global _gc_pausers
    with _gc_lock:
        _gc_pausers += 1
        if _gc_pausers == 1:
            was_enabled = gc.isenabled()
            gc.disable()
            _gc_state["enabled"] = was_enabled
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_state.get("enabled", True):
                gc.enable()


_gc_state: dict[str, bool] = {}
