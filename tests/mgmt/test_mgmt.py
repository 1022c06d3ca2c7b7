"""The chart run for real on a kind management cluster against a lab (tests/mgmt/conftest.py):
scheduled runs that land in the store with their history, the page listing them, the lock
refusing a second runner, and a runner killed mid-scenario recovered by the next Job's init
container, all through an identity bound to the target role alone. In this order (each test
leaves the target clean for the next); the chart is installed with its CronJob suspended,
and the scheduled-run test lets it run once on schedule."""

from __future__ import annotations

import base64
import json
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.mgmt.conftest import (
    AUDIENCE,
    NAMESPACE,
    RELEASE,
    ROOT,
    RUNNER_SA,
    RUNNER_USER,
    TARGET,
    TOKEN_PATH,
    Mgmt,
    mgmt_token,
    run,
    try_lock_write,
    wait_for,
    whoami,
)

# The first test's time includes the management cluster's set-up (a node image rebuilt from
# cached binaries, kind up, the image, the lab) and a whole run.
pytestmark = [pytest.mark.mgmt, pytest.mark.disruptive, pytest.mark.timeout(3600)]
CRONJOB = f"{RELEASE}-{TARGET}"
RUN_TIMEOUT = 1500


def scheduled_jobs(m: Mgmt) -> list[dict[str, object]]:
    items = m.kj("get", "jobs", "-l", f"powercut.io/target={TARGET}")["items"]
    own = [
        j for j in items
        if any(o.get("kind") == "CronJob" for o in j["metadata"].get("ownerReferences") or [])
    ]  # fmt: skip
    return sorted(own, key=lambda j: j["metadata"]["creationTimestamp"])


def history(m: Mgmt) -> list[dict[str, object]]:
    text = m.in_page("cat", f"/store/{TARGET}/history.jsonl")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _runner_running(m: Mgmt, job: str) -> bool:
    pod = m.pod_of(job)
    if not pod:
        return False
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if c["name"] == "runner" and "running" in (c.get("state") or {}):
            return True
    return False


#: Run in a pod made from the runner's own pod template (its volumes: the target Secret and
#: the projected token): the lab's SelfSubjectReview through the Secret's kubeconfig (so
#: through powercut's own credential loading, the tokenFile), and the projected token's
#: claims and file as the kubelet wrote them.
PROBE = """
import base64, json, os, pathlib
from harness.kube.client import KubeClient
from harness.kube.kubeconfig import load_kubeconfig
c = KubeClient(load_kubeconfig("/etc/powercut/target/kubeconfig"))
r = c.create("/apis/authentication.k8s.io/v1/selfsubjectreviews",
             {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
p = pathlib.Path(os.environ["TOKEN"])
body = p.read_text().split(".")[1]
claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
print(json.dumps({"user": r["status"]["userInfo"]["username"], "kind": type(c.creds.auth).__name__,
                  "aud": claims["aud"], "sub": claims["sub"], "iss": claims["iss"],
                  "life": claims["exp"] - claims["iat"], "link": os.readlink(p)}))
"""


def probe_in_runner_pod(m: Mgmt, tmp_path: Path) -> dict[str, Any]:
    """PROBE's answer from a pod with the runner's pod template (the CronJob's), its
    container running the probe instead of powercut; the pod is removed after."""
    tpl = m.kj("get", "cronjob", CRONJOB)["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (runner,) = tpl["containers"]
    keep = {"target", "target-token", "tmp"}
    container = {
        "name": "probe",
        "image": runner["image"],
        "imagePullPolicy": runner["imagePullPolicy"],
        "command": ["/opt/powercut/venv/bin/python", "-c", PROBE],
        "env": [{"name": "TOKEN", "value": TOKEN_PATH}],
        "securityContext": runner["securityContext"],
        "volumeMounts": [v for v in runner["volumeMounts"] if v["name"] in keep],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "identity-probe", "namespace": NAMESPACE},
        "spec": {
            "serviceAccountName": tpl["serviceAccountName"],
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "securityContext": tpl["securityContext"],
            "containers": [container],
            "volumes": [v for v in tpl["volumes"] if v["name"] in keep],
        },
    }
    (tmp_path / "probe.json").write_text(json.dumps(pod))
    m.k("apply", "-f", str(tmp_path / "probe.json"))

    def ended() -> str | None:
        phase = (m.kj("get", "pod", "identity-probe").get("status") or {}).get("phase")
        return str(phase) if phase in ("Succeeded", "Failed") else None

    try:
        phase = wait_for("the identity probe pod to finish", ended, 300)
        log = m.k("logs", "identity-probe", check=False)
        assert phase == "Succeeded", log[-3000:]
        return dict(json.loads(log.strip().splitlines()[-1]))
    finally:
        m.k("delete", "pod", "identity-probe", "--wait=false", check=False)


def test_the_runner_holds_only_the_target_roles_identity(mgmt: Mgmt, tmp_path: Path) -> None:
    """The runner holds no credential of the lab in any Secret: the target Secret's
    kubeconfig (read back from the management cluster) says only ``tokenFile``, the path
    where the chart projects a token of the management cluster's ServiceAccount for the
    lab's audience. In a pod of the runner's own template, powercut reads that file and the
    lab names the federated user (a SelfSubjectReview); the token is the kubelet's (audience,
    one hour, a link through ``..data`` that the kubelet swaps when it renews it). A token
    of the same ServiceAccount for another audience is refused by the lab (401). That user
    holds the narrowest tiers its feature needs (read and lock): the lab refuses it what
    they leave out. The cluster lock may be written by that user alone (the conftest's
    admission policy), so every runner and recover below that holds the lock holds it as
    that user."""
    m = mgmt
    secret = m.kj("get", "secret", "lab-target")["data"]
    files = {k: base64.b64decode(v) for k, v in secret.items()}
    admin_pki = m.lab_dir / "pki"
    for name in ("admin.key", "admin.crt"):
        assert (admin_pki / name).read_bytes() not in files.values(), name
    kc_doc = yaml.safe_load(files["kubeconfig"])
    (user,) = kc_doc["users"]
    assert user["user"] == {"tokenFile": TOKEN_PATH}, user  # no token, no key, no password
    # the projected token, in a pod of the runner's template, through powercut's loading
    seen = probe_in_runner_pod(m, tmp_path)
    assert seen["user"] == RUNNER_USER, seen
    assert seen["kind"] == "TokenFile", seen
    assert seen["aud"] == [AUDIENCE] and seen["life"] == 3600, seen
    assert seen["sub"] == f"system:serviceaccount:{NAMESPACE}:{RUNNER_SA}", seen
    assert seen["link"] == "..data/token", seen  # what the kubelet swaps at each renewal
    # another audience: the same ServiceAccount's token, refused by the lab
    from harness.kube.client import KubeClient
    from tests.role_bound import token_kubeconfig

    other = token_kubeconfig(m.lab_dir / "kubeconfig", "other",
                             mgmt_token(m.kind_client, f"not-{AUDIENCE}", 600),
                             tmp_path / "other.kubeconfig")  # fmt: skip
    wrong = KubeClient.from_kubeconfig(other, timeout_s=10)
    try:
        assert whoami(wrong) is None
    finally:
        wrong.close()
    # what the user may do: the host's kubeconfig of the same token (the Secret's, with the
    # token file the test minted in place of the pod's)
    token = tmp_path / "token"
    token.write_text(mgmt_token(m.kind_client, AUDIENCE, 600))
    user["user"] = {"tokenFile": str(token)}
    kc = tmp_path / "runner.kubeconfig"
    kc.write_text(yaml.safe_dump(kc_doc))  # its server: the lab on the gateway, as pods see it

    def as_runner(*args: str) -> str:
        p = run([m.kubectl, "--kubeconfig", str(kc), *args], timeout=60, check=False)
        return p.stdout.strip()

    assert as_runner("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}") == (
        RUNNER_USER
    )
    denied = {
        "delete namespaces": ("delete", "namespaces"),
        "get secrets in kube-system": ("get", "secrets", "-n", "kube-system"),
        "list secrets everywhere": ("list", "secrets", "-A"),
        "create pods": ("create", "pods", "-n", "default"),
        "update nodes": ("update", "nodes"),
        # the tiers its feature does not need (it only observes; power goes to the BMCs)
        "patch nodes": ("patch", "nodes"),
        "create pods/eviction": ("create", "pods", "--subresource=eviction", "-n", "default"),
        "update another Lease": ("update", "leases/kube-scheduler", "-n", "kube-system"),
    }
    allowed = {
        "list nodes": ("list", "nodes"),
        "watch pods": ("watch", "pods", "-A"),
        "update the lock's Lease": ("update", "leases/powercut-lock", "-n", "kube-system"),
        "create a Lease in kube-system": ("create", "leases", "-n", "kube-system"),
    }
    said = {what: as_runner("auth", "can-i", *args) for what, args in {**denied, **allowed}.items()}
    assert {w: a for w, a in said.items() if w in denied} == dict.fromkeys(denied, "no")
    assert {w: a for w, a in said.items() if w in allowed} == dict.fromkeys(allowed, "yes")
    # the lock: the lab's admin is refused it, the runner's identity is not
    assert f"may be written by {RUNNER_USER} only" in try_lock_write(m.lab_client)
    assert try_lock_write(m.runner_client) == "admitted"


def test_the_image_holds_the_wheels_files_and_its_sbom(mgmt: Mgmt, tmp_path: Path) -> None:
    """The runner image's installed package holds exactly the files of the wheel built from
    this checkout (steps/ and features/ included), and its SBOM lists the locked versions."""
    from harness.kindlab import runner_image as ri

    listing = run(["docker", "run", "--rm", "--entrypoint", "/opt/powercut/venv/bin/python",
                   mgmt.image, "-c",
                   "import harness, pathlib; r = pathlib.Path(harness.__file__).parent; "
                   "print('\\n'.join(sorted('harness/' + p.relative_to(r).as_posix() "
                   "for p in r.rglob('*') if p.is_file() and '__pycache__' not in p.parts)))"],
                  ).stdout.split()  # fmt: skip
    src = tmp_path / "src"
    ri.copy_sources(ROOT, ri.source_files(ROOT), src)
    with zipfile.ZipFile(ri._wheel(src, tmp_path / "wheel")) as z:
        wheel = sorted(n for n in z.namelist() if n.startswith("harness/"))
    assert listing == wheel, (sorted(set(wheel) - set(listing)), sorted(set(listing) - set(wheel)))
    assert "harness/steps/plugin.py" in listing
    assert any(n.startswith("harness/features/") for n in listing)
    sbom = json.loads(run(["docker", "run", "--rm", "--entrypoint", "cat", mgmt.image,
                           ri.SBOM_PATH]).stdout)  # fmt: skip
    purls = {c.get("purl", "") for c in sbom["components"]}
    lock = dict(
        ln.split("==", 1) for ln in (ROOT / "requirements/lock.txt").read_text().splitlines()
        if "==" in ln
    )  # fmt: skip
    assert f"pkg:pypi/pydantic@{lock['pydantic']}" in purls
    assert any(p.startswith("pkg:deb/debian/ipmitool@") for p in purls)
    assert any(p.startswith("pkg:npm/allure@") for p in purls)


def test_a_second_runner_is_refused_by_the_lock(mgmt: Mgmt) -> None:
    m = mgmt
    m.k("create", "job", f"--from=cronjob/{CRONJOB}", "first")
    wait_for("the first runner to run", lambda: _runner_running(m, "first"), 600)
    wait_for(
        "the first runner to hold the target's lock",
        lambda: (m.lease() or {}).get("spec", {}).get("holderIdentity", "").startswith("first-"),
        300,
    )
    # (written as the runner's ServiceAccount: the lock's admission policy admits no one else)
    m.k("create", "job", f"--from=cronjob/{CRONJOB}", "second")
    wait_for("the second runner to stop", lambda: m.job_done("second"), 600, every_s=3)
    assert m.job_done("second") == "failed"
    log = m.logs("second", "recover")
    assert "not recovering: another powercut run holds the cluster lock" in log, log
    assert "holder first-" in log
    assert m.job_done("first") is None, "the first run must still be running"
    wait_for("the first run to finish", lambda: m.job_done("first"), RUN_TIMEOUT, every_s=5)
    assert m.job_done("first") == "succeeded", m.logs("first", "runner")[-3000:]
    assert len(history(m)) == 1
    assert m.lab_clean() == []


def test_a_scheduled_run_lands_in_the_store_with_the_previous_runs_history(mgmt: Mgmt) -> None:
    """After the lock test's run: the CronJob's own schedule starts the next run, whose
    record follows the previous one's in the target's history and whose report carries
    Allure's history on; the page lists both."""
    m = mgmt
    before = {str(j["metadata"]["name"]) for j in scheduled_jobs(m)}  # type: ignore[index]
    t0 = time.monotonic()
    m.k("patch", "cronjob", CRONJOB, "-p", '{"spec": {"suspend": false}}')
    job = wait_for(
        "the CronJob to start a run on its schedule",
        lambda: next(
            (str(j["metadata"]["name"]) for j in scheduled_jobs(m)  # type: ignore[index]
             if str(j["metadata"]["name"]) not in before),  # type: ignore[index]
            None,
        ),
        150,
    )  # fmt: skip
    m.k("patch", "cronjob", CRONJOB, "-p", '{"spec": {"suspend": true}}')
    wait_for("the scheduled run to finish", lambda: m.job_done(job), RUN_TIMEOUT, every_s=5)
    m.timings["scheduled run"] = time.monotonic() - t0
    assert m.job_done(job) == "succeeded", m.logs(job, "runner")[-3000:]
    assert "nothing to recover" in m.logs(job, "recover")
    runs = history(m)
    assert len(runs) >= 2, runs
    previous, last = runs[-2], runs[-1]
    assert previous["target"] == last["target"] == TARGET
    assert previous["verdict"] == last["verdict"] == "passed"
    assert str(previous["run_id"]) < str(last["run_id"])
    for r in (previous, last):
        names = [s["name"] for s in r["scenarios"]]  # type: ignore[attr-defined]
        assert len(names) == 1, names
        listing = m.in_page("ls", f"/store/{TARGET}/runs/{r['run_id']}")
        assert "allure-results" in listing and ("report.html" in listing or "index.html" in listing)
    # the last run's report continues the previous one's (Allure's historyPath per target)
    allure_history = m.in_page("cat", f"/store/{TARGET}/allure-history.jsonl").splitlines()
    assert len([h for h in allure_history if h.strip()]) >= 2
    page = m.in_page(
        "python3", "-c",
        "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8080/').read()"
        ".decode())",
    )  # fmt: skip
    for r in (previous, last):
        assert str(r["run_id"]) in page
    assert m.lab_clean() == []


def _firing(client: Any) -> set[str]:
    return {
        str(series.labels["alertname"])
        for series in client.query(f'ALERTS{{alertstate="firing",target="{TARGET}"}}')
    }


def test_a_runner_killed_mid_cut_is_recovered_within_minutes_and_alerted(
    mgmt: Mgmt, alerts: Any
) -> None:
    """SIGKILL a runner while a node is off: the target's recover CronJob (on its default
    schedule, every 2 minutes) powers it back on within 5 minutes, acting only once the
    killed runner's lease has run out. The check that acted records the dead runner it
    found and the lock free as it left it: in a real Prometheus scraping the page's
    /metrics, the chart's PowercutRunnerDied fires (a killed night is seen) and
    PowercutLockHeldByDeadRunner does not (nothing is left held). The next Job finds
    nothing to recover, runs clean, and PowercutRunnerDied clears."""
    m = mgmt
    recover_cj = f"{CRONJOB}-recover"
    m.k("create", "job", f"--from=cronjob/{CRONJOB}", "killed")
    wait_for("the runner to run", lambda: _runner_running(m, "killed"), 600)
    m.k("patch", "cronjob", recover_cj, "-p", '{"spec": {"suspend": false}}')
    off = wait_for(
        "a node powered off by the runner",
        lambda: [n for n, s in m.lab_state().get("power", {}).items() if s != "on"],
        900,
        every_s=0.5,
    )
    pod = m.pod_of("killed")
    assert pod
    # SIGKILL, no grace: the runner's tini (PID 1 of its container) and powercut with it
    cid = next(
        c["containerID"] for c in pod["status"]["containerStatuses"] if c["name"] == "runner"
    ).split("://")[-1]
    node = pod["spec"]["nodeName"]
    pid = run(["docker", "exec", node, "crictl", "inspect", "--output", "go-template",
               "--template", "{{.info.pid}}", cid]).stdout.strip()  # fmt: skip
    run(["docker", "exec", node, "kill", "-KILL", pid])
    killed_at = time.monotonic()
    wait_for("the killed Job to fail", lambda: m.job_done("killed") == "failed", 300)
    left = m.lab_clean()
    assert any(f"{n} off" in left for n in off), f"nothing was left to recover: {left}"
    seen_alerts: set[str] = set()

    def nodes_back() -> bool:
        seen_alerts.update(_firing(alerts))
        return not [x for x in m.lab_clean() if x.endswith(" off")]

    wait_for("the killed runner's nodes back on (recover CronJob)", nodes_back, 300, every_s=2)
    back_s = time.monotonic() - killed_at
    m.timings["killed runner: nodes back"] = back_s
    # no further recover Job (its history keeps one): the one that acted keeps its log
    m.k("patch", "cronjob", recover_cj, "-p", '{"spec": {"suspend": true}}')
    assert back_s < 300, back_s
    wait_for("nothing left disrupted", lambda: m.lab_clean() == [], 180, every_s=2)

    def recover_jobs_ended() -> list[dict[str, Any]] | None:
        # (the one that acted writes its record after its last undo)
        items = m.kj("get", "jobs", "-l", "powercut.io/role=recover")["items"]
        done = [j for j in items if m.job_done(j["metadata"]["name"])]
        return items if items and len(done) == len(items) else None

    jobs = wait_for("the recover Jobs to end", recover_jobs_ended, 180, every_s=2)
    # (a Job listed here may be deleted by the CronJob's history limit meanwhile: the
    # one that acted is the newest and is kept, and its log must hold the undos below)
    logs = "\n".join(m.logs(j["metadata"]["name"], "recover", gone_ok=True) for j in jobs)
    assert "not now: the lock is held" in logs or "holding the cluster lock" in logs, logs
    for n in off:
        assert f"power_on(node='{n}')" in logs, logs
    # the check that acted: it found the killed runner's lock dead with undos owed, and
    # left the lock free and nothing owed
    status = json.loads(m.in_page("cat", f"/store/{TARGET}/recover.json"))
    assert status["exit_code"] == 0, status
    assert status["found"]["owed"] > 0 and status["owed"] == 0, status
    assert str(status["found"]["lock"]["holder"]).startswith("killed-"), status
    assert status["found"]["lock"]["holder_alive"] is False, status
    assert status["lock"]["held"] is False, status
    assert str(status["dead_holder"]["holder"]).startswith("killed-"), status

    # a killed night is seen (PowercutRunnerDied); no lock is left held by the dead runner
    def died_alert() -> bool:
        seen_alerts.update(_firing(alerts))
        return "PowercutRunnerDied" in seen_alerts

    wait_for("PowercutRunnerDied to fire", died_alert, 120, every_s=2)
    m.timings["killed runner: runner-died alert"] = time.monotonic() - killed_at
    assert not seen_alerts & {"PowercutLockHeldByDeadRunner", "PowercutRestoreFailed"}, seen_alerts
    m.k("create", "job", f"--from=cronjob/{CRONJOB}", "next")
    wait_for("the next run to finish", lambda: m.job_done("next"), RUN_TIMEOUT, every_s=5)
    assert m.job_done("next") == "succeeded", m.logs("next", "runner")[-3000:]
    assert "nothing to recover" in m.logs("next", "recover") or "nothing owed" in m.logs(
        "next", "recover"
    )
    assert m.lab_clean() == []
    metrics = m.in_page(
        "python3", "-c",
        "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8080/metrics')"
        ".read().decode())",
    )  # fmt: skip
    assert f'powercut_last_run_exit_code{{target="{TARGET}"}} 0' in metrics, metrics[-2000:]
    assert f'powercut_lock_held{{target="{TARGET}"}} 0' in metrics, metrics[-2000:]
    # the next run finished after the dead runner was found: the killed night's alert clears
    wait_for("PowercutRunnerDied to clear", lambda: "PowercutRunnerDied" not in _firing(alerts), 60)
    assert "PowercutLockHeldByDeadRunner" not in seen_alerts, seen_alerts
    print("mgmt-test timings (s):", json.dumps({k: round(v) for k, v in m.timings.items()}))
