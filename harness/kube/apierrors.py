"""The Kubernetes API's error answers as exceptions: one class per status the harness treats
differently (a 403 names the verb and resource to grant; 429 and 5xx are temporary)."""

from __future__ import annotations

import contextlib
from typing import Any, NoReturn

import orjson

from harness.errors import PermanentError, TemporaryError
from harness.kube.access import access_of

JSON = dict[str, Any]


class ApiError(PermanentError):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str, method: str, path: str) -> None:
        self.status = status
        self.reason = reason
        self.api_message = message
        self.method = method
        self.path = path
        super().__init__(f"{method} {path}: {status} {reason}: {message}")


class NotFound(ApiError):
    """404."""


class Forbidden(ApiError):
    """403: the credentials lack a permission. Permanent: no retry makes it appear, and the
    cluster did nothing wrong; the message names the verb and resource to grant, and who
    the API server took the credentials for (``identity``, from a SelfSubjectReview)."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        method: str,
        path: str,
        *,
        who: str = "",
        identity: str = "",
    ) -> None:
        self.access = access_of(method, path)
        self.identity = identity
        super().__init__(status, reason, message, method, path)
        creds = f"powercut's credentials ({who})" if who else "powercut's credentials"
        seen = f", which the API server sees as {identity}," if identity else ""
        self.args = (
            f"{method} {path}: 403 Forbidden: {creds}{seen} lack the permission "
            f"{self.access} (grant it: powercut rbac, docs/rbac.md); "
            f"the API server said: {message}",
        )


class Unauthorized(ApiError):
    """401: the API server did not accept the credentials (expired, revoked, or for
    another cluster); a changing credential has been fetched anew once already."""

    def __init__(
        self, status: int, reason: str, message: str, method: str, path: str, *, who: str = ""
    ) -> None:
        super().__init__(status, reason, message, method, path)
        creds = f"powercut's credentials ({who})" if who else "powercut's credentials"
        self.args = (
            f"{method} {path}: 401 Unauthorized: the API server did not accept {creds}: "
            "expired, revoked or for another cluster? (docs/connecting.md)",
        )


class Conflict(ApiError):
    """409 (already exists, or a stale resourceVersion)."""


class Gone(ApiError):
    """410: the resourceVersion is too old; re-list."""


class TooManyRequests(ApiError, TemporaryError):
    """429: e.g. an eviction refused by a PodDisruptionBudget. Retry with backoff."""


class ServerError(ApiError, TemporaryError):
    """5xx."""


class Unreachable(TemporaryError):
    """The API server did not answer (connection refused, reset, timeout)."""


def error_for(status: int) -> type[ApiError]:
    if status == 401:
        return Unauthorized
    if status == 403:
        return Forbidden
    if status == 404:
        return NotFound
    if status == 409:
        return Conflict
    if status == 410:
        return Gone
    if status == 429:
        return TooManyRequests
    if status >= 500:
        return ServerError
    return ApiError


def raise_status(
    status: int,
    reason: str | None,
    data: bytes,
    method: str,
    path: str,
    *,
    who: str = "",
    identity: str = "",
) -> NoReturn:
    """Raise the :class:`ApiError` for an error answer (its Status body if it has one);
    ``who`` (the kubeconfig user) and ``identity`` (the server's view) word a 401 or 403."""
    payload: JSON = {}
    with contextlib.suppress(orjson.JSONDecodeError):
        loaded = orjson.loads(data) if data else {}
        payload = loaded if isinstance(loaded, dict) else {}
    args = (
        status,
        str(payload.get("reason", reason or "")),
        str(payload.get("message", data[:200].decode(errors="replace"))),
        method,
        path,
    )
    if status == 403:
        raise Forbidden(*args, who=who, identity=identity)
    if status == 401:
        raise Unauthorized(*args, who=who)
    raise error_for(status)(*args)
