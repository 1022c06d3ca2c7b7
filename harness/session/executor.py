"""What carries out the journal's undos: against the real cluster and BMCs, idempotently.

The session's undo stack and ``powercut recover`` hand each undo the journal owes to a
:class:`ClusterExecutor`: power a node on, uncordon it, remove a taint, re-create a deleted
Node or Job, heal a partition, start a kubelet, heal a storage cut, release a stale cluster lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from harness.errors import PermanentError, PowercutError
from harness.inventory import Inventory
from harness.kube import actions
from harness.kube.client import KubeClient, NotFound, Unreachable
from harness.kube.lock import ClusterLock
from harness.power.base import (
    PowerDriver,
    SupportsKubeletStop,
    SupportsPartition,
    SupportsStorageCut,
)
from harness.power.factory import driver_for
from harness.session.restore import restore_power


class ClusterExecutor:
    """Carries out journal undos against the real cluster and BMCs (idempotent).

    ``client`` is a :class:`KubeClient` or a function that makes one, called the first time
    an undo needs the API: power-ons need only the BMCs, so they work without a kubeconfig
    or an API server. Once the API server did not answer, the other Kubernetes undos of
    this executor fail at once with that reason instead of each waiting for a timeout.
    """

    def __init__(self, inventory: Inventory, client: KubeClient | Callable[[], KubeClient]) -> None:
        self.inventory = inventory
        self._client: KubeClient | None = client if isinstance(client, KubeClient) else None
        self._connect = None if isinstance(client, KubeClient) else client
        self._owns_client = False
        self._api_down: PowercutError | None = None  # why later API calls are not tried

    @property
    def client(self) -> KubeClient:
        """The API client (made on first use); once it could not be made, or the API server
        did not answer, raises that reason at once, every time."""
        if self._api_down is not None:
            raise type(self._api_down)(f"not tried: {self._api_down}")
        if self._client is None:
            assert self._connect is not None
            try:
                self._client = self._connect()
            except (PowercutError, OSError) as exc:
                self._api_down = PermanentError(f"no API client: {exc}")
                raise self._api_down from exc
            self._owns_client = True
        return self._client

    @contextlib.contextmanager
    def _api(self) -> Iterator[KubeClient]:
        """The client, remembering when the API server does not answer."""
        client = self.client
        try:
            yield client
        except Unreachable as exc:
            self._api_down = Unreachable(f"the API server did not answer earlier ({exc})")
            raise

    def close(self) -> None:
        """Close the client if this executor made it."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    def power_on(self, node: str) -> str | None:
        """Power the node on through a BMC, unless it already reads ON through any of its
        ways (then the note says through which). A node whose only way is SSH cannot be
        powered on, but an SSH answer settles it."""
        return restore_power(self.inventory, node)

    def uncordon(self, node: str) -> str | None:
        with self._api() as client, contextlib.suppress(NotFound):
            actions.uncordon(client, node)
        return None

    def remove_taint(self, node: str, key: str, effect: str) -> str | None:
        with self._api() as client:
            try:
                changed = actions.remove_taint(client, node, key, effect)
            except NotFound:
                return f"Node {node} is gone"
        return None if changed else f"taint {key}:{effect} already gone"

    def restore_node(self, node: str, manifest: dict[str, Any]) -> str | None:
        with self._api() as client:
            if client.get_or_none(f"/api/v1/nodes/{node}") is None:
                client.create("/api/v1/nodes", manifest)
                return None
        return f"Node {node} exists already"

    def restore_job(self, namespace: str, name: str, manifest: dict[str, Any]) -> str | None:
        with self._api() as client:
            collection = f"/apis/batch/v1/namespaces/{namespace}/jobs"
            if client.get_or_none(f"{collection}/{name}") is None:
                client.create(collection, manifest)
                return None
        return f"Job {namespace}/{name} exists already"

    def heal(self, node: str, protocol: str) -> None:
        """Heal a partition through the driver that made it (idempotent)."""
        with self._through(node, protocol) as driver:
            if not isinstance(driver, SupportsPartition):
                raise PermanentError(f"{node}: the {protocol} driver cannot heal a partition")
            driver.heal(node)

    def start_kubelet(self, node: str, protocol: str) -> None:
        """Start a stopped kubelet through the driver that stopped it (idempotent)."""
        with self._through(node, protocol) as driver:
            if not isinstance(driver, SupportsKubeletStop):
                raise PermanentError(f"{node}: the {protocol} driver cannot start a kubelet")
            driver.start_kubelet(node)

    def heal_storage(self, node: str, protocol: str) -> None:
        """Give the node its storage network back through the driver that cut it
        (idempotent: a node not cut, or off, is left as it is)."""
        with self._through(node, protocol) as driver:
            if not isinstance(driver, SupportsStorageCut):
                raise PermanentError(f"{node}: the {protocol} driver cannot heal a storage cut")
            driver.heal_storage(node)

    @contextlib.contextmanager
    def _through(self, node: str, protocol: str) -> Iterator[PowerDriver]:
        """The driver that made a cut (``protocol``), closed afterwards."""
        driver = driver_for(self.inventory.node(node), protocol or None)
        try:
            yield driver
        finally:
            driver.close()

    def release_stale_lock(self, verdicts: Mapping[int, bool] | None = None) -> str | None:
        """Delete the cluster lock of a run on this machine that is gone (a zombie is
        gone); its holder, or None. ``verdicts``: pid -> alive, decided already."""
        with self._api() as client:
            return ClusterLock.break_stale(client, verdicts=verdicts)
