"""The data check's logic against a fake client (the real thing runs in tests/kind)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.checks.base import CheckFailed
from harness.checks.data import verify_tokens, write_tokens
from harness.errors import ConfigError
from harness.kube.client import NotFound
from tests.fakes.clock import FakeClock


def pod(name: str, claim: str | None, *, ready: bool = True) -> dict[str, Any]:
    vols: list[dict[str, Any]] = [{"name": "kube-api-access", "projected": {}}]
    vols.append(
        {"name": "data", "persistentVolumeClaim": {"claimName": claim}}
        if claim
        else {"name": "data", "emptyDir": {}}
    )
    return {
        "metadata": {"name": name},
        "spec": {"volumes": vols},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


class FakeClient:
    """Pods and their volumes' files; answers the pod proxy like the probe app."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.files: dict[tuple[str, str], str] = {}  # (claim or pod, volume) -> token

    def _key(self, pod_name: str, volume: str) -> tuple[str, str]:
        p = next(p for p in self.pods if p["metadata"]["name"] == pod_name)
        for v in p["spec"]["volumes"]:
            if v["name"] == volume and "persistentVolumeClaim" in v:
                return (v["persistentVolumeClaim"]["claimName"], volume)
        return (pod_name, volume)

    def list(self, path: str, **params: Any) -> tuple[list[dict[str, Any]], str]:
        return self.pods, "1"

    def request_raw(self, method: str, path: str, **kw: Any) -> bytes:
        target = path.split("/pods/")[1]
        pod_name = target.split(":")[0]
        volume = path.rsplit("/", 1)[1]
        key = self._key(pod_name, volume)
        if method == "PUT":
            self.files[key] = kw["body"].decode()
            return b""
        if key not in self.files:
            raise NotFound(404, "NotFound", f"no token on volume {volume}", method, path)
        return self.files[key].encode()


def test_tokens_survive_a_replacement_that_mounts_the_same_claim() -> None:
    c = FakeClient([pod("single-abc", "single-data")])
    tokens = write_tokens(c, "shop", "app=single")  # type: ignore[arg-type]
    assert [(t.volume, t.claim) for t in tokens] == [("data", "single-data")]
    c.pods = [pod("single-xyz", "single-data")]  # the replacement, another name
    m = verify_tokens(c, tokens, timeout_s=5, sleep=lambda s: None)  # type: ignore[arg-type]
    assert m.detail["held_by"] == {"volume data (claim shop/single-data)": "single-xyz"}


def test_a_lost_token_fails_naming_the_volume() -> None:
    c = FakeClient([pod("quorum-0", None), pod("quorum-1", "data-quorum-1")])
    tokens = write_tokens(c, "shop", "app=quorum")  # type: ignore[arg-type]
    c.files.pop(("quorum-0", "data"))  # an emptyDir: the replacement starts empty
    c.files[("data-quorum-1", "data")] = "something else"
    with pytest.raises(CheckFailed) as err:
        verify_tokens(c, tokens, timeout_s=5, sleep=lambda s: None)  # type: ignore[arg-type]
    msg = str(err.value)
    assert "volume data of pod shop/quorum-0: token lost" in msg
    assert "volume data (claim shop/data-quorum-1): different token" in msg


def test_no_pod_holding_the_volume_fails_at_the_deadline() -> None:
    c = FakeClient([pod("single-abc", "single-data")])
    tokens = write_tokens(c, "shop", "app=single")  # type: ignore[arg-type]
    c.pods = [pod("single-xyz", "single-data", ready=False)]
    clock = FakeClock(start=0.0)
    with pytest.raises(CheckFailed, match=r"not read back in 3s: no ready pod holds it"):
        verify_tokens(c, tokens, timeout_s=3, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert clock.monotonic() == pytest.approx(3.0)


def test_a_workload_without_ready_pods_is_a_harness_error() -> None:
    c = FakeClient([pod("single-abc", "single-data", ready=False)])
    with pytest.raises(ConfigError, match="no ready pod in shop matches 'app=single'"):
        write_tokens(c, "shop", "app=single")  # type: ignore[arg-type]


def test_a_token_that_moved_is_read_on_the_replacement_node_and_checked_so() -> None:
    from harness.scenario.expectations.data import Tokens, moved_off

    c = FakeClient(
        [
            dict(
                pod("single-abc", "single-data"),
                spec={**pod("x", "single-data")["spec"], "nodeName": "w1"},
            )
        ]
    )
    tokens = write_tokens(c, "shop", "app=single")  # type: ignore[arg-type]
    replacement = pod("single-xyz", "single-data")
    replacement["spec"]["nodeName"] = "w2"
    c.pods = [replacement]
    m = verify_tokens(c, tokens, timeout_s=5, sleep=lambda s: None)  # type: ignore[arg-type]
    label = "volume data (claim shop/single-data)"
    assert m.detail["held_on"] == {label: "w2"}
    written = Tokens(("Deployment/shop/single",), tuple(tokens))
    assert moved_off(written, {label: "w2"}, ["w1"], ["single-abc"]) == [label]
    with pytest.raises(CheckFailed, match="read on w1"):
        moved_off(written, {label: "w1"}, ["w1"], ["single-abc"])
    with pytest.raises(CheckFailed, match="none of the 1 token"):
        moved_off(written, {label: "w2"}, ["w3"], ["web-1"])
