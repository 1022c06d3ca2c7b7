"""The observer's slim decoding against every object of a live cluster.

Runs after the power and longevity tests (files run in name order), so the lab holds what
an outage leaves: taints, Multi-Attach events, VolumeAttachments that moved, terminating
pods. For each resource the observer watches: the real list decodes through its schema
without falling back, every key the projection reads is in the schema, and each object's
projection is the same whether it was decoded in full or through the schema.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
import pytest

from harness.kube import fields
from harness.kube.observer.handlers import _EventHandler
from tests.lab.conftest import LabHandle
from tests.unit.test_fields import CASES, _schema_paths, _track

pytestmark = [pytest.mark.lab]

# the handlers of the unit tests, each over its resource's cluster-wide path
HANDLERS: list[tuple[str, Any]] = [(f"{h.api}/{h.resource}", h) for _, h, _ in CASES]


@pytest.mark.parametrize(("path", "handler"), HANDLERS, ids=[h[1].resource for h in HANDLERS])
def test_live_objects_project_alike_in_full_and_slim(
    lab: LabHandle, path: str, handler: Any
) -> None:
    raw = lab.client.request_raw("GET", path)
    full = orjson.loads(raw)["items"]
    assert full, f"the lab has no {handler.resource}"
    if isinstance(handler, _EventHandler):
        # every reason, so that every Event of the lab is projected, not only the few kept
        handler = _EventHandler(frozenset(str(e.get("reason") or "") for e in full))
    # no fallback: the real objects have the shapes the schema expects
    slim = msgspec.json.Decoder(fields.ListOf[handler.schema]).decode(raw)["items"]
    assert slim is not None
    assert len(slim) == len(full)
    kept = _schema_paths(handler.schema)
    projected = 0
    for f, s in zip(full, slim, strict=True):
        seen: set[str] = set()
        expected = handler.project(_track(f, "$", seen))
        assert not seen - kept, f"{handler.resource}: reads {sorted(seen - kept)}"
        assert handler.project(s) == expected, f"{handler.resource} {f['metadata']['name']}"
        projected += expected is not None
    assert projected, f"no {handler.resource} was projected: the comparison proved nothing"
