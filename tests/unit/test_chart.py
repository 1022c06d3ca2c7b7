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
from harness.kindlab.versions import KUBERNETES

CHART = Path(__file__).resolve().parents[2] / "deploy" / "chart"
KUBE = KUBERNETES.lstrip("v")  # what the kind management cluster runs
KUBE_ARGS = ("--kube-version", KUBE)

#: `make chart` runs them (helm's Go build is long on a cold machine: `make test` runs it
#: in the kind lane, beside the lab stages, not before the unit tests)
pytestmark = pytest.mark.helm


@pytest.fixture(scope="module")
def helm() -> Path:
    return obtain_helm(lambda m: print(m, file=sys.stderr))


def render(helm: Path, values: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "values.yaml"
    f.write_text(yaml.safe_dump(values))
    return subprocess.run(
        [str(helm), "template", "pc", str(CHART), "-f", str(f), "-n", "powercut", *KUBE_ARGS],
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


def runners(ds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runners' CronJobs (not the recover CronJobs beside them)."""
    return [d for d in by_kind(ds, "CronJob") if not d["metadata"]["name"].endswith("-recover")]


def test_one_feature_target(helm: Path, tmp_path: Path) -> None:
    features = {"configMaps": ["mine"], "select": "a or b"}
    ds = docs(
        helm, {"targets": [target("lab", credentialsSecret="bmc", features=features)]}, tmp_path
    )
    (cj,) = runners(ds)
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
    (cj,) = runners(ds)
    pod = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (runner,) = pod["containers"]
    assert runner["command"] == ["/usr/bin/tini", "--", "/bin/sh", "-c"]
    script = runner["args"][0]
    assert script.startswith("exec powercut longevity --inventory /etc/powercut/inventory/")
    assert "--duration 8h" in script and "'--cycles' '3'" in script
    assert "--store /store --store-target night" in script  # the night lands in the store
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["inventory"]["secret"]["secretName"] == "inv"


def test_a_target_named_like_anothers_recover_cronjob_is_allowed_without_it(
    helm: Path, tmp_path: Path
) -> None:
    """Only CronJobs that would exist clash: "a-recover" beside "a" with no recover CronJob."""
    ds = docs(helm, {"targets": [target("a", recover={"enabled": False}), target("a-recover")]},
              tmp_path)  # fmt: skip
    names = sorted(d["metadata"]["name"] for d in by_kind(ds, "CronJob"))
    assert names == ["pc-a", "pc-a-recover", "pc-a-recover-recover"]


def test_fifty_targets(helm: Path, tmp_path: Path) -> None:
    ds = docs(helm, {"targets": [target(f"t{i:02d}") for i in range(50)]}, tmp_path)
    assert len(runners(ds)) == 50
    assert len(by_kind(ds, "CronJob")) == 100  # a recover CronJob beside each
    assert len(by_kind(ds, "PersistentVolumeClaim")) == 51  # a state volume each, one store
    assert len(by_kind(ds, "Deployment")) == 1
    assert len({d["metadata"]["name"] for d in by_kind(ds, "CronJob")}) == 100


@pytest.mark.parametrize(
    ("values", "message"),
    [
        # values.schema.json refuses these first, naming the field and what is allowed
        (
            {"targets": [target("Bad_Name")]},
            "at '/targets/0/name': 'Bad_Name' does not match pattern",
        ),
        (
            {"targets": [target("a", mode="soak")]},
            "at '/targets/0/mode': value must be one of 'features', 'longevity'",
        ),
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
        (
            {"targets": [target("a", targetToken={"projected": {"expirationSeconds": 599}})]},
            "at '/targets/0/targetToken/projected/expirationSeconds': minimum: got 599, want 600",
        ),
        (
            {
                "targets": [
                    target("a", targetToken={"projected": {"audience": "x", "path": "/tmp/t"}})
                ]
            },
            'targets[0].targetToken.projected.path "/tmp/t": its directory would be mounted in '
            "/tmp, where the chart mounts other files",
        ),
        # two targets whose CronJobs would share a name (and so their Jobs)
        (
            {"targets": [target("a"), target("a-recover")]},
            'targets[1].name "a-recover": the CronJob name "pc-a-recover" is also the name of '
            "targets[0]'s recover CronJob",
        ),
        (
            {"targets": [target("a-recover"), target("a")]},
            'targets[1].name "a": the CronJob name "pc-a-recover" is also the name of '
            "targets[0]'s runner CronJob",
        ),
    ],
)
def test_bad_values_name_the_field(
    helm: Path, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    out = render(helm, values, tmp_path)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr


def pods(ds: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every pod spec the chart renders, by its owner's name."""
    out = {}
    for d in ds:
        if d["kind"] == "CronJob":
            out[d["metadata"]["name"]] = d["spec"]["jobTemplate"]["spec"]["template"]
        elif d["kind"] == "Deployment":
            out[d["metadata"]["name"]] = d["spec"]["template"]
    return out


def test_a_projected_token_of_this_cluster_for_the_target_only_when_an_audience_is_given(
    helm: Path, tmp_path: Path
) -> None:
    """targetToken.projected.audience: every pod that talks to that target (the runner, its
    recover init container, the recover CronJob) mounts a ServiceAccount token of the
    release's runner ServiceAccount for that audience (the kubelet renews it), where the
    kubeconfig's tokenFile names it; no other API token (automount stays off); a target
    without an audience, and the page, get none."""
    token = {"projected": {"audience": "powercut-lab"}}
    values: dict[str, Any] = {"targets": [target("lab", targetToken=token), target("plain")]}
    by_owner = pods(docs(helm, values, tmp_path))
    for owner in ("pc-lab", "pc-lab-recover"):
        pod = by_owner[owner]["spec"]
        assert pod["serviceAccountName"] == "pc-runner"
        assert pod["automountServiceAccountToken"] is False
        vols = {v["name"]: v for v in pod["volumes"]}
        assert vols["target-token"]["projected"]["sources"] == [
            {
                "serviceAccountToken": {
                    "audience": "powercut-lab",
                    "expirationSeconds": 3600,
                    "path": "token",
                }
            }
        ]
        for c in pod["containers"] + pod.get("initContainers", []):
            mounts = {m["name"]: m for m in c["volumeMounts"]}
            assert mounts["target-token"] == {
                "name": "target-token",
                "mountPath": "/var/run/secrets/powercut/target",
                "readOnly": True,
            }, c["name"]
    for owner in ("pc-plain", "pc-plain-recover", "pc-page"):
        spec = by_owner[owner]["spec"]
        assert "target-token" not in {v["name"] for v in spec["volumes"]}, owner
        assert not [v for v in spec["volumes"] if "projected" in v], owner
    # the defaults for every target, a target's own life and path over them
    own = {"projected": {"expirationSeconds": 600, "path": "/var/run/powercut/t/jwt"}}
    values = {
        "defaults": {"targetToken": {"projected": {"audience": "fleet"}}},
        "targets": [target("a"), target("b", targetToken=own)],
    }
    by_owner = pods(docs(helm, values, tmp_path))
    srcs = {
        o: next(v for v in by_owner[o]["spec"]["volumes"] if v["name"] == "target-token")
        for o in ("pc-a", "pc-b")
    }
    assert srcs["pc-a"]["projected"]["sources"][0]["serviceAccountToken"]["audience"] == "fleet"
    b = srcs["pc-b"]["projected"]["sources"][0]["serviceAccountToken"]
    assert b == {"audience": "fleet", "expirationSeconds": 600, "path": "jwt"}
    (runner,) = by_owner["pc-b"]["spec"]["containers"]
    assert {"name": "target-token", "mountPath": "/var/run/powercut/t", "readOnly": True} in (
        runner["volumeMounts"]
    )


def test_a_recover_cronjob_per_target_acts_only_when_work_is_owed(
    helm: Path, tmp_path: Path
) -> None:
    ds = docs(helm, {"targets": [target("lab", features={"configMaps": ["mine"]})]}, tmp_path)
    cjs = {d["metadata"]["name"]: d for d in by_kind(ds, "CronJob")}
    assert set(cjs) == {"pc-lab", "pc-lab-recover"}
    rec = cjs["pc-lab-recover"]
    assert rec["spec"]["schedule"] == "*/2 * * * *"
    assert rec["spec"]["concurrencyPolicy"] == "Forbid"
    pod = rec["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["args"] == [
        "recover", "--inventory", "/etc/powercut/inventory/inventory.yaml", "--lock",
        "--when-owed", "--status", "/store/lab/recover.json",
    ]  # fmt: skip
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["state"]["persistentVolumeClaim"]["claimName"] == "pc-lab-state"
    mounts = {m["name"] for m in c["volumeMounts"]}
    assert mounts <= set(vols)  # every mount has its volume (the features ConfigMap too)
    off = docs(helm, {"targets": [target("lab", recover={"enabled": False})]}, tmp_path)
    assert [d["metadata"]["name"] for d in by_kind(off, "CronJob")] == ["pc-lab"]


def test_the_runner_job_tells_exit_codes_apart_and_applies_retention(
    helm: Path, tmp_path: Path
) -> None:
    ds = docs(helm, {"targets": [target("lab", retention={"runs": 5, "days": 7})]}, tmp_path)
    cj = next(d for d in by_kind(ds, "CronJob") if d["metadata"]["name"] == "pc-lab")
    job = cj["spec"]["jobTemplate"]["spec"]
    (rule,) = job["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"] == {"containerName": "runner", "operator": "In",
                                   "values": [1, 2, 3, 4, 5]}  # fmt: skip
    (runner,) = job["template"]["spec"]["containers"]
    assert runner["terminationMessagePolicy"] == "FallbackToLogsOnError"
    args = runner["args"]
    assert args[args.index("--keep-runs") + 1] == "5" and args[args.index("--keep-days") + 1] == "7"


def test_every_container_has_resources_and_the_configured_security_context(
    helm: Path, tmp_path: Path
) -> None:
    values = {
        "image": {"pullSecrets": ["regcred"], "digest": "sha256:" + "a" * 64},
        "podSecurityContext": {"runAsNonRoot": True, "runAsUser": None, "runAsGroup": None,
                               "fsGroup": None},
        "containerSecurityContext": {"allowPrivilegeEscalation": False, "privileged": False},
        "defaults": {"affinity": {"nodeAffinity": {"x": 1}}, "priorityClassName": "low",
                     "podAnnotations": {"a": "b"}},
        "page": {"priorityClassName": "mid", "podAnnotations": {"c": "d"}},
        "targets": [target("lab")],
    }  # fmt: skip
    all_pods = pods(docs(helm, values, tmp_path))
    assert set(all_pods) == {"pc-lab", "pc-lab-recover", "pc-page"}
    for name, tmpl in all_pods.items():
        spec = tmpl["spec"]
        assert spec["imagePullSecrets"] == [{"name": "regcred"}], name
        # null removes a default (OpenShift assigns its own UIDs); the rest stays
        assert spec["securityContext"] == {
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        }, name
        assert spec["priorityClassName"] == ("mid" if name == "pc-page" else "low"), name
        assert tmpl["metadata"]["annotations"] == ({"c": "d"} if name == "pc-page" else {"a": "b"})
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            assert c["resources"]["requests"] and c["resources"]["limits"], (name, c["name"])
            assert c["securityContext"]["privileged"] is False
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert c["image"] == "powercut.local/powercut@sha256:" + "a" * 64
        if name != "pc-page":
            assert spec["affinity"] == {"nodeAffinity": {"x": 1}}
    defaults = pods(docs(helm, {"targets": [target("lab")]}, tmp_path))
    for name, tmpl in defaults.items():
        sc = tmpl["spec"]["securityContext"]
        assert sc["runAsUser"] == 10001 and sc["runAsNonRoot"] is True, name
        for c in [*tmpl["spec"].get("initContainers", []), *tmpl["spec"]["containers"]]:
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_a_cronjob_name_over_52_characters_is_refused_naming_the_target(
    helm: Path, tmp_path: Path
) -> None:
    name = "a" * 40  # pc-<40>-recover: 51 characters, allowed
    assert docs(helm, {"targets": [target(name)]}, tmp_path)
    f = tmp_path / "values.yaml"
    f.write_text(yaml.safe_dump({"targets": [target(name)]}))
    out = subprocess.run(
        [str(helm), "template", "powercut-x", str(CHART), "-f", str(f), "--kube-version", KUBE],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert f'targets[0].name "{name}": the CronJob name "powercut-x-{name}-recover" is 59' in (
        out.stderr
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
        ({"targets": [{**target("a"), "schedul": "* * * * *"}]}, "schedul"),
        ({"page": {"port": "8080"}}, "port"),
        ({"image": {"digest": "abc"}}, "digest"),
    ],
)
def test_the_values_schema_refuses_what_the_chart_cannot_use(
    helm: Path, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    out = render(helm, values, tmp_path)
    assert out.returncode != 0
    assert "values don't meet the specifications of the schema" in out.stderr, out.stderr
    assert message in out.stderr, out.stderr


def test_ingress_httproute_servicemonitor_and_rules_only_when_asked(
    helm: Path, tmp_path: Path
) -> None:
    plain = docs(helm, {"targets": [target("lab")]}, tmp_path)
    assert not {"Ingress", "HTTPRoute", "ServiceMonitor", "PrometheusRule"} & {
        d["kind"] for d in plain
    }
    values = {
        "page": {
            "ingress": {"enabled": True, "className": "nginx", "host": "pc.example.org",
                        "annotations": {"nginx.ingress.kubernetes.io/auth-type": "basic"}},
            "httpRoute": {"enabled": True, "parentRefs": [{"name": "gw"}]},
        },
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kps"}},
                    "prometheusRule": {"enabled": True, "noRunHours": 30}},
        "targets": [target("lab")],
    }  # fmt: skip
    ds = docs(helm, values, tmp_path)
    (ing,) = by_kind(ds, "Ingress")
    assert ing["spec"]["rules"][0]["host"] == "pc.example.org"
    assert ing["metadata"]["annotations"]["nginx.ingress.kubernetes.io/auth-type"] == "basic"
    (route,) = by_kind(ds, "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "pc-page", "port": 80}]
    (sm,) = by_kind(ds, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "kps"
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"
    (svc,) = by_kind(ds, "Service")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (rule,) = by_kind(ds, "PrometheusRule")
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) == {"PowercutRestoreFailed", "PowercutNightFailed",
                           "PowercutNoRecentRun", "PowercutRunnerDied",
                           "PowercutLockHeldByDeadRunner"}  # fmt: skip
    assert "> 108000" in alerts["PowercutNoRecentRun"]["expr"]
    assert "30 h" in alerts["PowercutNoRecentRun"]["annotations"]["summary"]


def test_a_cluster_older_than_1_27_is_refused(helm: Path, tmp_path: Path) -> None:
    f = tmp_path / "values.yaml"
    f.write_text(yaml.safe_dump({"targets": [target("lab")]}))
    out = subprocess.run(
        [str(helm), "template", "pc", str(CHART), "-f", str(f), "--kube-version", "1.26.9"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert "chart requires kubeVersion: >=1.27.0-0" in out.stderr


def notes(helm: Path, values: dict[str, Any], tmp_path: Path) -> str:
    """NOTES.txt as helm renders it (helm template leaves it out: rendered here through a
    copy of the chart whose extra template tpl's it)."""
    import shutil

    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    shutil.copy2(chart / "templates" / "NOTES.txt", chart / "files" / "notes.txt")
    (chart / "templates" / "notes-probe.yaml").write_text(
        'notes: {{ tpl (.Files.Get "files/notes.txt") . | toJson }}\n'
    )
    f = tmp_path / "values.yaml"
    f.write_text(yaml.safe_dump(values))
    out = subprocess.run(
        [str(helm), "template", "pc", str(chart), "-f", str(f), "-n", "powercut", *KUBE_ARGS,
         "--show-only", "templates/notes-probe.yaml"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return str(yaml.safe_load(out.stdout)["notes"])


def test_notes_say_how_to_open_the_page_run_now_and_read_the_last_verdict(
    helm: Path, tmp_path: Path
) -> None:
    text = notes(helm, {"targets": [target("rack-a")]}, tmp_path)
    assert "kubectl -n powercut port-forward svc/pc-page 8080:80" in text
    assert "kubectl -n powercut create job --from=cronjob/pc-rack-a rack-a-now" in text
    assert "exec deploy/pc-page -- tail -n 1 /store/rack-a/history.jsonl" in text
    assert "exit code 4: restore failed" in text
    assert "No target yet" in notes(helm, {}, tmp_path / "empty")
    assert "its credentials" not in text
    token = {"projected": {"audience": "powercut-rack-a"}}
    text = notes(helm, {"targets": [target("rack-a", targetToken=token)]}, tmp_path / "token")
    assert "a token of powercut/pc-runner in this cluster, audience powercut-rack-a" in text
    assert "`tokenFile: /var/run/secrets/powercut/target/token`" in text


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
