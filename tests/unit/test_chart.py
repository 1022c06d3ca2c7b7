"""deploy/chart rendered by the real helm (built from the Go module proxy, cached): what one
target, several targets and 50 targets produce, and what bad values say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.kindlab.binaries import obtain_helm

CHART = Path(__file__).resolve().parents[2] / "deploy" / "chart"


@pytest.fixture(scope="module")
def helm() -> Path:
    return obtain_helm(lambda m: print(m, file=sys.stderr))


def render(helm: Path, values: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "values.yaml"
    f.write_text(yaml.safe_dump(values))
    return subprocess.run(
        [str(helm), "template", "pc", str(CHART), "-f", str(f), "--namespace", "powercut"],
        capture_output=True,
        text=True,
        check=False,
    )


def docs(helm: Path, values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    out = render(helm, values, tmp_path)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def target(name: str, **kw: Any) -> dict[str, Any]:
    return {
        "name": name,
        "inventory": {"configMap": f"{name}-inv"},
        "kubeconfigSecret": f"{name}-kube",
        **kw,
    }


def by_kind(ds: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in ds if d["kind"] == kind]


def test_one_feature_target(helm: Path, tmp_path: Path) -> None:
    features = {"configMaps": ["mine"], "select": "a or b"}
    ds = docs(
        helm, {"targets": [target("lab", credentialsSecret="bmc", features=features)]}, tmp_path
    )
    (cj,) = by_kind(ds, "CronJob")
    assert cj["metadata"]["name"] == "pc-lab"
    assert cj["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    (init,) = pod["initContainers"]
    assert init["args"] == [
        "recover",
        "--inventory",
        "/etc/powercut/inventory/inventory.yaml",
        "--lock",
        "90s",
    ]
    (runner,) = pod["containers"]
    args = runner["args"]
    assert args[:8] == [
        "run",
        "--inventory",
        "/etc/powercut/inventory/inventory.yaml",
        "--store",
        "/store",
        "--target",
        "lab",
        "--progress",
    ]
    assert "--features" in args and "/etc/powercut/features/mine" in args
    assert args[-3:] == ["--", "-k", "a or b"]
    for c in (init, runner):
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["envFrom"] == [{"secretRef": {"name": "bmc"}}]
        env = {e["name"]: e["value"] for e in c["env"]}
        assert env["POWERCUT_STATE_DIR"] == "/var/lib/powercut/state"
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        assert {"/var/lib/powercut", "/store", "/tmp", "/etc/powercut/target"} <= set(mounts)
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["state"]["persistentVolumeClaim"]["claimName"] == "pc-lab-state"
    assert vols["store"]["persistentVolumeClaim"]["claimName"] == "pc-store"
    assert vols["target"]["secret"]["secretName"] == "lab-kube"
    pvcs = {d["metadata"]["name"] for d in by_kind(ds, "PersistentVolumeClaim")}
    assert pvcs == {"pc-store", "pc-lab-state"}
    (dep,) = by_kind(ds, "Deployment")
    page = dep["spec"]["template"]["spec"]
    assert page["volumes"][0]["persistentVolumeClaim"]["readOnly"] is True
    assert page["containers"][0]["args"][:4] == ["store", "serve", "--store", "/store"]
    assert by_kind(ds, "Service")


def test_longevity_target(helm: Path, tmp_path: Path) -> None:
    ds = docs(
        helm,
        {
            "targets": [
                target(
                    "night",
                    mode="longevity",
                    extraArgs=["--cycles", "3"],
                    inventory={"secret": "inv"},
                )
            ]
        },
        tmp_path,
    )
    (cj,) = by_kind(ds, "CronJob")
    pod = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (runner,) = pod["containers"]
    assert runner["command"] == ["/usr/bin/tini", "--", "/bin/sh", "-c"]
    script = runner["args"][0]
    assert script.startswith("exec powercut longevity --inventory /etc/powercut/inventory/")
    assert "--duration 8h" in script and "'--cycles' '3'" in script
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["inventory"]["secret"]["secretName"] == "inv"


def test_fifty_targets(helm: Path, tmp_path: Path) -> None:
    ds = docs(helm, {"targets": [target(f"t{i:02d}") for i in range(50)]}, tmp_path)
    assert len(by_kind(ds, "CronJob")) == 50
    assert len(by_kind(ds, "PersistentVolumeClaim")) == 51  # a state volume each, one store
    assert len(by_kind(ds, "Deployment")) == 1
    assert len({d["metadata"]["name"] for d in by_kind(ds, "CronJob")}) == 50


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"targets": [target("Bad_Name")]}, 'targets[0].name "Bad_Name": must be 1-40'),
        ({"targets": [target("a", mode="soak")]}, 'targets[0].mode "soak": must be features'),
        (
            {"targets": [{"name": "a", "kubeconfigSecret": "k"}]},
            "targets[0].inventory: configMap or secret is required",
        ),
        ({"targets": [target("a", kubeconfigSecret="")]}, "targets[0].kubeconfigSecret: required"),
        (
            {"targets": [target("a"), target("a")]},
            'targets[1].name "a": also the name of targets[0]',
        ),
        ({"targets": [target("a", features={"builtin": False})]}, "nothing to run"),
    ],
)
def test_bad_values_name_the_field(
    helm: Path, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    out = render(helm, values, tmp_path)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr


def test_the_lock_policy_is_the_shipped_one(helm: Path, tmp_path: Path) -> None:
    """With lockPolicy.enabled the chart renders deploy/rbac/lock-policy.yaml, its writer
    filled in; without it, no policy; without a writer, an error naming the value."""
    writer = "system:serviceaccount:kube-system:powercut"
    ds = docs(helm, {"lockPolicy": {"enabled": True, "writer": writer}}, tmp_path)
    shipped = list(
        yaml.safe_load_all(
            (CHART.parent / "rbac" / "lock-policy.yaml").read_text().replace("WRITER", writer)
        )
    )
    rendered = [d for d in ds if d["kind"].startswith("ValidatingAdmissionPolicy")]
    assert rendered == shipped
    assert not [d for d in docs(helm, {}, tmp_path) if "Admission" in d["kind"]]
    out = render(helm, {"lockPolicy": {"enabled": True}}, tmp_path)
    assert out.returncode != 0 and "lockPolicy.writer" in out.stderr
