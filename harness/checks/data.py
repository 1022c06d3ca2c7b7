"""The data check: no data lost in a failover.

Before the disruption, :func:`write_tokens` writes a fresh random token to each volume of
every ready pod of a probe workload; after the failover, :func:`verify_tokens` finds the
pod that now holds each volume (the pod mounting the same PersistentVolumeClaim, or the pod
of the same name for a volume that is not a claim: a StatefulSet's emptyDir) and reads the
token back. A lost or different token fails the check, naming the volume.

Works on any cluster where the probe app serves its volumes over HTTP (``PUT`` / ``GET
/tokens/<volume>``, volumes mounted at ``/data/<volume>``; ``harness/kindlab/go/cmd/probe``):
every request goes through the API server's pod proxy, so nothing but the kubeconfig is
needed. The tokens carry no secret: they are random and written by the check itself.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.checks.base import CheckFailed, Measurement
from harness.clock import SYSTEM_CLOCK
from harness.errors import ConfigError, PermanentError, PowercutError
from harness.kube.client import ApiError, KubeClient, NotFound

JSON = dict[str, Any]
#: Volumes that are not data: the service-account token, config, the downward API.
_NOT_DATA = ("projected", "configMap", "secret", "downwardAPI")
PROBE_PORT = 8080


@dataclass(frozen=True)
class VolumeToken:
    """One token written to one volume."""

    namespace: str
    pod: str  # the pod that wrote it
    volume: str  # the volume's name in the pod spec (its mount is /data/<volume>)
    claim: str | None  # the PersistentVolumeClaim, or None (emptyDir, hostPath ...)
    token: str

    @property
    def label(self) -> str:
        if self.claim:
            return f"volume {self.volume} (claim {self.namespace}/{self.claim})"
        return f"volume {self.volume} of pod {self.namespace}/{self.pod}"


def _proxy(namespace: str, pod: str, port: int, volume: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy/tokens/{volume}"


def _ready(pod: JSON) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    conds = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return conds.get("Ready") == "True"


def _data_volumes(pod: JSON) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        if any(k in vol for k in _NOT_DATA):
            continue
        claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
        out.append((vol["name"], claim))
    return out


def write_tokens(
    client: KubeClient, namespace: str, selector: str, *, port: int = PROBE_PORT
) -> list[VolumeToken]:
    """Write a fresh token to every data volume of every ready pod matching ``selector``
    and read each back at once; the tokens written. A workload with no ready pod or no
    data volume, or a token that does not read back, is a harness error (the check could
    not be set up), not a product failure."""
    pods, _ = client.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)
    ready = [p for p in pods if _ready(p)]
    if not ready:
        raise ConfigError(
            f"data check: no ready pod in {namespace} matches {selector!r}", field="selector"
        )
    tokens: list[VolumeToken] = []
    for pod in sorted(ready, key=lambda p: p["metadata"]["name"]):
        name = pod["metadata"]["name"]
        for volume, claim in _data_volumes(pod):
            token = f"powercut-{secrets.token_hex(8)}"
            path = _proxy(namespace, name, port, volume)
            client.request_raw("PUT", path, body=token.encode(), content_type="text/plain")
            back = client.request_raw("GET", path).decode(errors="replace")
            if back != token:
                raise PermanentError(
                    f"data check: pod {namespace}/{name} did not read back the token it "
                    f"was just given on volume {volume} (got {back[:80]!r})"
                )
            tokens.append(VolumeToken(namespace, name, volume, claim, token))
    if not tokens:
        raise ConfigError(
            f"data check: the pods of {namespace} matching {selector!r} have no data volume",
            field="selector",
        )
    return tokens


def _holder(pods: list[JSON], t: VolumeToken) -> str | None:
    """The ready pod that now holds ``t``'s volume."""
    for pod in pods:
        if not _ready(pod):
            continue
        if t.claim is None:
            if pod["metadata"]["name"] == t.pod:
                return t.pod
            continue
        if any(claim == t.claim for _, claim in _data_volumes(pod)):
            return str(pod["metadata"]["name"])
    return None


def _read(client: KubeClient, t: VolumeToken, pod: str, port: int, volume: str) -> str | None:
    """The token on the volume, or None when the probe says it holds none."""
    try:
        return client.request_raw("GET", _proxy(t.namespace, pod, port, volume)).decode(
            errors="replace"
        )
    except NotFound as exc:
        if "no token" in exc.api_message:
            return None
        raise


def verify_tokens(
    client: KubeClient,
    tokens: list[VolumeToken],
    *,
    timeout_s: float,
    port: int = PROBE_PORT,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = SYSTEM_CLOCK.sleep,
) -> Measurement:
    """Read every token back from the pod that now holds its volume, waiting up to
    ``timeout_s`` for such a pod to be ready and answer. Raises :class:`CheckFailed`
    naming each volume whose token is lost or different (or that no ready pod holds)."""
    start = clock()
    deadline = start + timeout_s
    pending = list(tokens)
    held: dict[str, str] = {}
    held_on: dict[str, str] = {}  # label -> the node of the pod it was read from
    bad: dict[str, str] = {}
    last: dict[str, str] = {}
    while pending:
        namespaces = sorted({t.namespace for t in pending})
        pods: list[JSON] = []
        for ns in namespaces:
            items, _ = client.list(f"/api/v1/namespaces/{ns}/pods")
            pods.extend(items)
        still: list[VolumeToken] = []
        for t in pending:
            pod = _holder(pods, t)
            if pod is None:
                last[t.label] = "no ready pod holds it"
                still.append(t)
                continue
            volume = _volume_in(pods, pod, t)
            try:
                seen = _read(client, t, pod, port, volume)
            except (ApiError, PowercutError) as exc:  # the proxy while the pod starts
                last[t.label] = f"pod {pod} did not answer: {exc}"
                still.append(t)
                continue
            held[t.label] = pod
            held_on[t.label] = next(
                (
                    str((p.get("spec") or {}).get("nodeName") or "")
                    for p in pods
                    if p["metadata"]["name"] == pod
                    and p["metadata"].get("namespace", t.namespace) == t.namespace
                ),
                "",
            )
            if seen is None:
                bad[t.label] = f"token lost (pod {pod} finds none)"
            elif seen != t.token:
                bad[t.label] = f"different token (pod {pod} read {seen[:40]!r})"
        pending = still
        if pending and clock() >= deadline:
            for t in pending:
                bad[t.label] = f"not read back in {timeout_s:g}s: {last.get(t.label, '?')}"
            break
        if pending:
            sleep(1.0)
    took = clock() - start
    if bad:
        raise CheckFailed(
            f"the token written before the disruption on each of {len(tokens)} volume(s)",
            "; ".join(f"{label}: {why}" for label, why in sorted(bad.items())),
            took,
            check="data kept",
            detail={"lost": sorted(bad), "held_by": dict(held), "held_on": dict(held_on)},
        )
    return Measurement(
        "data kept",
        start,
        took,
        timeout_s,
        detail={"held_by": dict(held), "held_on": dict(held_on)},
    )


def _volume_in(pods: list[JSON], pod: str, t: VolumeToken) -> str:
    """The name ``pod`` gives the token's volume (a claim may be mounted under another)."""
    if t.claim is None:
        return t.volume
    for p in pods:
        if p["metadata"]["name"] == pod:
            for volume, claim in _data_volumes(p):
                if claim == t.claim:
                    return volume
    return t.volume


def tokens_to_json(tokens: list[VolumeToken]) -> list[Mapping[str, Any]]:
    """For a scenario's record (the tokens are random; they carry no secret)."""
    return [
        {"namespace": t.namespace, "pod": t.pod, "volume": t.volume, "claim": t.claim}
        for t in tokens
    ]
