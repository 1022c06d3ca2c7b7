"""A cluster lock (a coordination.k8s.io Lease) so two disruptive runs cannot collide."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from harness.errors import PermanentError, PowercutError, TemporaryError
from harness.journal.liveness import process_alive
from harness.kube.client import JSON, Conflict, KubeClient, NotFound

log = logging.getLogger(__name__)
LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "powercut-lock"
#: How long a release retries a temporary failure before leaving the Lease to expire.
RELEASE_RETRY_S = 60.0


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(ts: str | None) -> float:
    if not ts:
        return 0.0
    return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def holder_pid(holder: str) -> int | None:
    """The process id of a lock holder (``host/pid-N/...``) that ran on this machine."""
    host, _, rest = holder.partition("/pid-")
    text = rest.split("/", 1)[0]
    return int(text) if host == socket.gethostname() and text.isdigit() else None


def lease_state(client_of: Callable[[], KubeClient]) -> dict[str, object]:
    """The lock as seen now, for a status report: ``held`` (a Lease with a holder),
    ``holder``, ``holder_alive`` (renewed within its duration: a killed holder's lease runs
    out) and ``expires_in_s``; ``error`` instead when the API server cannot be asked."""
    try:
        client = client_of()
    except PowercutError as exc:
        return {"error": str(exc)}
    try:
        lease = client.get_or_none(
            f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
        )
    except PowercutError as exc:
        return {"error": str(exc)}
    finally:
        client.close()
    spec = (lease or {}).get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    if not holder:
        return {"held": False, "holder": "", "holder_alive": False, "expires_in_s": 0.0}
    expires = _parse(spec.get("renewTime")) + float(spec.get("leaseDurationSeconds") or 0)
    left = expires - time.time()
    return {"held": True, "holder": holder, "holder_alive": left > 0, "expires_in_s": left}


def write_status(path: Path, status: Mapping[str, object]) -> None:
    """``status`` as JSON to ``path``, whole or not at all (written aside, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(status, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class ClusterLocked(PermanentError):
    def __init__(self, holder: str, expires_in_s: float) -> None:
        self.holder = holder
        self.expires_in_s = expires_in_s
        super().__init__(
            f"another powercut run holds the cluster lock (Lease {LEASE_NAMESPACE}/{LEASE_NAME}, "
            f"holder {holder}); it expires in {expires_in_s:.0f}s unless renewed. Wait for it, "
            "or run `powercut recover` on the machine that ran it"
        )


class ClusterLock:
    """Hold the Lease while a run disrupts the cluster; renewed in the background."""

    def __init__(self, client: KubeClient, *, duration_s: int = 60, holder: str | None = None):
        self.client = client
        self.duration_s = duration_s
        self.holder = holder or f"{socket.gethostname()}/pid-{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _body(self, rv: str | None = None, transitions: int = 0) -> JSON:
        md: JSON = {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE}
        if rv:
            md["resourceVersion"] = rv
        now = _now()
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": md,
            "spec": {
                "holderIdentity": self.holder,
                "leaseDurationSeconds": self.duration_s,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": transitions,
            },
        }

    def acquire(self) -> None:
        try:
            self.client.create(self._path, self._body())
        except Conflict:
            lease = self.client.get(f"{self._path}/{LEASE_NAME}")
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            expires = _parse(spec.get("renewTime")) + float(spec.get("leaseDurationSeconds") or 0)
            left = expires - time.time()
            if holder and holder != self.holder and left > 0:
                raise ClusterLocked(holder, left) from None
            # Expired or released: take it over (a stale resourceVersion means we lost a race).
            try:
                self.client.replace(
                    f"{self._path}/{LEASE_NAME}",
                    self._body(
                        lease["metadata"]["resourceVersion"],
                        int(spec.get("leaseTransitions") or 0) + 1,
                    ),
                )
            except Conflict:
                raise ClusterLocked("(taken over concurrently)", self.duration_s) from None
        self._thread = threading.Thread(target=self._renew, name="powercut-lock", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.duration_s / 3):
            try:
                self.client.patch(f"{self._path}/{LEASE_NAME}", {"spec": {"renewTime": _now()}})
            except PowercutError as exc:
                log.warning("renewing the cluster lock failed: %s", exc)

    def release(
        self,
        *,
        retry_s: float = RELEASE_RETRY_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Give the lock up. A temporary failure (the API server unreachable or answering
        5xx, as while a run's undo brings control-plane nodes back and etcd regains its
        quorum) is retried with backoff for up to ``retry_s``: a run that restored the
        cluster should not leave its lock for the next run to wait out. After that, or on a
        permanent error, the Lease is left to expire by itself (said in the log)."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        deadline = clock() + retry_s
        delay = 0.5
        while True:
            try:
                lease = self.client.get(f"{self._path}/{LEASE_NAME}")
                if (lease.get("spec") or {}).get("holderIdentity") == self.holder:
                    self.client.delete(
                        f"{self._path}/{LEASE_NAME}",
                        body={"preconditions": {"uid": lease["metadata"]["uid"]}},
                    )
                return
            except NotFound:
                return
            except TemporaryError as exc:
                if clock() + delay > deadline:
                    log.warning(
                        "releasing the cluster lock failed for %.0fs (it expires by itself): %s",
                        retry_s,
                        exc,
                    )
                    return
                log.info("releasing the cluster lock: %s; retrying in %.1fs", exc, delay)
                sleep(delay)
                delay = min(delay * 2, 5.0)
            except PowercutError as exc:
                log.warning("releasing the cluster lock failed (it expires by itself): %s", exc)
                return

    @staticmethod
    def break_stale(
        client: KubeClient, *, verdicts: Mapping[int, bool] | None = None
    ) -> str | None:
        """Delete the lock if a process on this machine held it and is gone (a crashed run;
        a zombie is gone too, see :func:`process_alive`).

        ``verdicts`` (pid -> alive) are decisions made already, such as ``recover``'s
        about the run whose journal it just undid: the same run is never judged twice.
        Returns the holder it removed, or None. A holder on another machine, or alive here,
        is left alone: its Lease expires by itself when it stops renewing.
        """
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
        lease = client.get_or_none(path)
        if lease is None:
            return None
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        pid = holder_pid(holder)
        if pid is None:
            return None
        known = (verdicts or {}).get(pid)
        alive = process_alive(pid) if known is None else known
        if alive:
            return None  # still running
        try:
            client.delete(path, body={"preconditions": {"uid": lease["metadata"]["uid"]}})
        except (NotFound, Conflict):
            return None
        return holder

    def __enter__(self) -> ClusterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
