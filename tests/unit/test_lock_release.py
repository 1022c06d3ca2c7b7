"""The cluster lock's release retries a temporary failure (the API server coming back while
etcd regains its quorum) for a bounded time, and gives up at once on a permanent one."""

from __future__ import annotations

from typing import Any

from harness.kube.client import Forbidden, ServerError, Unreachable
from harness.kube.lock import LEASE_NAME, ClusterLock
from tests.fakes.clock import FakeClock


class FlakyApi:
    """A Lease held by ``holder``; the first ``failures`` requests raise ``error``."""

    def __init__(self, holder: str, failures: int, error: Exception) -> None:
        self.holder = holder
        self.failures = failures
        self.error = error
        self.deleted: list[str] = []

    def _maybe_fail(self) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise self.error

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        self._maybe_fail()
        return {"metadata": {"uid": "u1"}, "spec": {"holderIdentity": self.holder}}

    def delete(self, path: str, **_: Any) -> None:
        self._maybe_fail()
        self.deleted.append(path)


def _lock(api: FlakyApi) -> ClusterLock:
    return ClusterLock(api, holder=api.holder)  # type: ignore[arg-type]


def test_a_release_retries_while_the_api_server_answers_5xx_then_deletes_the_lease() -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{LEASE_NAME}"
    error = ServerError(503, "ServiceUnavailable", "etcdserver: request timed out", "GET", path)
    api = FlakyApi("me", 3, error)
    t = FakeClock(start=0.0)
    _lock(api).release(retry_s=60, sleep=t.sleep, clock=t)
    assert len(api.deleted) == 1 and api.deleted[0].endswith(f"/leases/{LEASE_NAME}")
    assert t.sleeps == [0.5, 1.0, 2.0]


def test_a_release_gives_up_after_its_bound_and_leaves_the_lease_to_expire() -> None:
    api = FlakyApi("me", 10_000, Unreachable("connection refused"))
    t = FakeClock(start=0.0)
    _lock(api).release(retry_s=10, sleep=t.sleep, clock=t)
    assert api.deleted == []
    assert sum(t.sleeps) <= 10


def test_a_permanent_error_is_not_retried() -> None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{LEASE_NAME}"
    api = FlakyApi("me", 1, Forbidden(403, "Forbidden", "forbidden", "GET", path))
    t = FakeClock(start=0.0)
    _lock(api).release(retry_s=60, sleep=t.sleep, clock=t)
    assert api.deleted == [] and t.sleeps == []
