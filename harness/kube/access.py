"""Which Kubernetes RBAC permission a request of the client needs: its verb and resource.

The API server authorizes each request as a verb on a resource of an API group (or, for paths
outside ``/api`` and ``/apis``, a verb on a non-resource URL). :func:`access_of` derives that
from the request's method and path the way the API server does, so a 403 names exactly what
the credentials lack (:class:`harness.kube.client.Forbidden`), and the unit test that keeps
``deploy/rbac/target-clusterrole.yaml`` equal to what the code asks for uses the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

#: HTTP method -> RBAC verb of a request on one named object
_OBJECT_VERBS = {
    "GET": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
#: ... on a collection
_COLLECTION_VERBS = {"GET": "list", "POST": "create", "DELETE": "deletecollection"}


@dataclass(frozen=True, order=True)
class Access:
    """One permission: ``verb`` on ``resource`` (``pods``, ``pods/eviction``) of API
    ``group`` (``""``: the core group); for a non-resource URL, ``resource`` is the URL
    (``/version``) and ``group`` is empty."""

    group: str
    resource: str
    verb: str

    @property
    def non_resource(self) -> bool:
        return self.resource.startswith("/")

    def __str__(self) -> str:
        if self.non_resource:
            return f"{self.verb} on the non-resource URL {self.resource}"
        group = f"the API group {self.group!r}" if self.group else 'the core API group ""'
        return f"{self.verb} on {self.resource!r} in {group}"


def access_of(method: str, path: str, *, watch: bool = False) -> Access:
    """The permission ``method path`` needs (``watch``: a watch, also written ``method``
    ``WATCH`` or a ``watch=1`` query)."""
    parts = urlsplit(path)
    method = method.upper()
    if method == "WATCH" or "watch=1" in parts.query.split("&") or "watch=true" in parts.query:
        method, watch = "GET", True
    segs = [s for s in parts.path.split("/") if s]
    if segs[:1] == ["api"] and len(segs) >= 2:
        group, rest = "", segs[2:]
    elif segs[:1] == ["apis"] and len(segs) >= 3:
        group, rest = segs[1], segs[3:]
    else:
        return Access("", parts.path or "/", method.lower() if method != "HEAD" else "get")
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # a namespaced resource
    if not rest:
        return Access("", parts.path, method.lower())  # discovery (/api/v1): non-resource
    resource = rest[0]
    named = len(rest) >= 2
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"  # a subresource: pods/eviction, pods/proxy
    if watch:
        verb = "watch"
    elif named:
        verb = _OBJECT_VERBS.get(method, method.lower())
    else:
        verb = _COLLECTION_VERBS.get(method, method.lower())
    return Access(group, resource, verb)
