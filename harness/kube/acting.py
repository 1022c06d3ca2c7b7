"""What the actions through the API are built from (``actions.py``, ``drain.py``).

Recording an action on the timeline (``<verb> sent``, then ``<verb> done`` or ``<verb>
failed``), reading the objects acted on (metadata, owner, mirror pods), listing the pods
bound to a node, and waiting, by list+watch and never a sleep loop, until objects are gone.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from harness.errors import TemporaryError, WaitTimeout
from harness.kube import names
from harness.kube.client import JSON, Gone, KubeClient
from harness.kube.names import Act, Stage
from harness.kube.timeline import Clock, Timeline

#: An object by (namespace, name); a Node's namespace is "".
Key = tuple[str, str]


@contextmanager
def recorded(
    timeline: Timeline | None, verb: Act, name: str, namespace: str = "", **detail: Any
) -> Iterator[dict[str, Any]]:
    """Record ``<verb> sent`` now and ``<verb> done`` (with the yielded dict) or ``failed``."""
    result: dict[str, Any] = {}
    if timeline is None:
        yield result
        return
    timeline.action(name, verb.at(Stage.SENT), namespace=namespace, **detail)
    try:
        yield result
    except BaseException as exc:
        timeline.action(
            name,
            verb.at(Stage.FAILED),
            namespace=namespace,
            error=f"{type(exc).__name__}: {exc}"[:300],
        )
        raise
    timeline.action(name, verb.at(Stage.DONE), namespace=namespace, **result)


def metadata(obj: JSON) -> JSON:
    return obj.get("metadata") or {}


def pod_ref(obj: JSON) -> str:
    m = metadata(obj)
    return f"{m.get('namespace', '')}/{m.get('name', '')}"


def owner_kind(obj: JSON) -> str:
    refs = metadata(obj).get("ownerReferences") or []
    owner = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return str(owner.get("kind", "")) if owner else ""


def is_mirror(obj: JSON) -> bool:
    return names.ANNOTATION_MIRROR in (metadata(obj).get("annotations") or {})


def pods_on(client: KubeClient, node: str, namespace: str | None = None) -> list[JSON]:
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    items, _ = client.list(path, fieldSelector=f"spec.nodeName={node}")
    return items


# -- waiting for objects to go -------------------------------------------------------------


def wait_gone(
    client: KubeClient,
    collection: str,
    targets: Mapping[Key, str],
    *,
    deadline: float,
    clock: Clock,
    expected: str,
    field_selector: str | None = None,
) -> None:
    """Block until none of ``targets`` ((namespace, name) -> uid) exists any more.

    An object with the same name but another uid counts as gone (it was re-created).
    """
    remaining = dict(targets)
    started = clock.monotonic()
    timers: list[threading.Timer] = []
    while remaining:
        try:
            items, rv = client.list(collection, fieldSelector=field_selector)
        except TemporaryError:
            items, rv = None, ""
        if items is not None:
            present = {
                (str(metadata(o).get("namespace") or ""), str(metadata(o).get("name"))): str(
                    metadata(o).get("uid")
                )
                for o in items
            }
            remaining = {k: u for k, u in remaining.items() if present.get(k) == u}
            if not remaining:
                return
        now = clock.monotonic()
        if now >= deadline:
            left = ", ".join(f"{ns}/{n}" if ns else n for ns, n in sorted(remaining))
            raise WaitTimeout(expected, f"still present: {left}", now - started)
        if items is None:
            clock.sleep(min(1.0, deadline - now))
            continue

        # The server-side timeout is in whole seconds: end the stream at the deadline itself.
        def cancel_at_deadline(cancel: Callable[[], None], left: float = deadline - now) -> None:
            timer = threading.Timer(left, cancel)
            timer.daemon = True
            timers.append(timer)
            timer.start()

        try:
            for ev in client.watch(
                collection,
                resource_version=rv,
                timeout_s=max(1, math.ceil(deadline - now)),
                on_open=cancel_at_deadline,
                fieldSelector=field_selector,
            ):
                m = metadata(ev.object)
                key = (str(m.get("namespace") or ""), str(m.get("name")))
                if key in remaining and (
                    ev.type == "DELETED"
                    or (ev.type in ("ADDED", "MODIFIED") and m.get("uid") != remaining[key])
                ):
                    del remaining[key]
                if not remaining or clock.monotonic() >= deadline:
                    break
        except (Gone, TemporaryError):
            continue  # re-list (a stream cancelled at the deadline ends up here too)
        finally:
            for timer in timers:
                timer.cancel()
            timers.clear()
