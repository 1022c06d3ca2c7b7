"""Credentials on the lab's real API server, compared with kubectl's own reading (#30).

- Every kubeconfig form powercut resolves (token, tokenFile, exec plugins v1 and v1beta1
  with a token or a client certificate, several files merged, ``--context``) is read by
  kubectl and by powercut: both must reach the API server as the same user
  (``kubectl auth whoami`` against powercut's SelfSubjectReview) and see the same server.
- The ServiceAccount behind it holds only the tiers its features need (``powercut rbac``).
- An exec plugin that mints a real token (``kubectl create token``, bound to a Secret it
  deletes when it mints the next one: a token it replaced stops working) and says it
  expires after ``LIFETIME_S``: a built-in scenario runs through it with the plugin called
  again and again as each credential lapses, never a 401, nothing lost (no observation
  gap, no failed restore, the journal owing nothing); and its longevity twin, two cycles
  of ``powercut longevity`` through the same plugin.
- A credential revoked before its stated expiry: the 401 makes the client fetch a new one
  and retry, counted.
- The lock's admission policy (deploy/rbac/lock-policy.yaml) refuses the Lease to anyone
  but its writer; a verb removed from the role is named by ``powercut preflight``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli.run import EXIT_PASSED
from harness.errors import ConfigError
from harness.inventory import load_inventory
from harness.journal import Journal
from harness.kube.client import ApiError, KubeClient
from harness.kube.credentials import ExecPlugin
from harness.kube.kubeconfig import load_kubeconfig
from harness.lab import build
from harness.rbac import tiers_for
from harness.session import journal_path_for
from tests.lab.conftest import POWERCUT, LabHandle, powercut, wait_for
from tests.role_bound import (
    grant,
    grant_tiers,
    revoke,
    revoke_tiers,
    service_account_user,
    target_role,
)

pytestmark = [pytest.mark.lab, pytest.mark.disruptive, pytest.mark.serial]

REPO = Path(__file__).resolve().parents[2]
SA = "powercut-creds"
USER = service_account_user(SA, "default")
#: what the plugin says each credential lives (the token itself is valid 10 minutes)
LIFETIME_S = 30
REBOOT = "test_a_worker_is_rebooted_through_its_bmc"
DRAIN = "test_a_worker_is_drained_powercycled_through_its_bmc_and_uncordoned"

PLUGIN = """\
#!{python}
# An exec credential plugin: a token of {sa} bound to a Secret of its own, said to expire
# after LIFETIME s; the Secrets of tokens past their stated expiry are deleted, so such a
# token stops working as a lapsed one would (a client that ignored the expiry gets 401).
import datetime, json, os, subprocess, sys, uuid
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
log = os.environ["PLUGIN_LOG"]
k = [{kubectl!r}, "--kubeconfig", {admin!r}, "-n", "default"]
now = datetime.datetime.now(datetime.timezone.utc).timestamp()
old = [json.loads(x) for x in open(log)] if os.path.exists(log) else []
lapsed = [c["secret"] for c in old if c["exp"] < now - 2]
if lapsed:
    subprocess.run(k + ["delete", "secret", "--ignore-not-found", "--wait=false", *lapsed],
                   check=True, capture_output=True)
secret = "{sa}-cred-" + uuid.uuid4().hex[:10]
subprocess.run(k + ["create", "secret", "generic", secret], check=True, capture_output=True)
token = subprocess.run(
    k + ["create", "token", "{sa}", "--duration=10m", "--bound-object-kind=Secret",
         "--bound-object-name=" + secret],
    check=True, capture_output=True, text=True).stdout.strip()
lifetime = int(os.environ.get("LIFETIME", "{lifetime}"))
exp = now + lifetime
with open(log, "a") as f:
    f.write(json.dumps({{"secret": secret, "at": now, "exp": exp, "caller": os.getppid(),
                         "spec": info["spec"], "argv": sys.argv[1:]}}) + "\\n")
stamp = datetime.datetime.fromtimestamp(exp, datetime.timezone.utc)
print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                  "status": {{"token": token,
                             "expirationTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}))
"""

CERT_PLUGIN = """\
#!{python}
import json, os
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential",
    "status": {{"clientCertificateData": open({cert!r}).read(),
               "clientKeyData": open({key!r}).read()}}}}))
"""


@pytest.fixture(scope="module")
def kubectl() -> str:
    # kubectl is built with the kind node's binaries (the lab itself does not run it): the
    # cache's, or built here once (the kind stage's node image uses the same group)
    from harness.kindlab.binaries import NODE_GROUP

    return str(build.obtain(groups=(NODE_GROUP,)).paths["kubectl"])


@pytest.fixture(scope="module")
def admin(lab: LabHandle) -> dict[str, Any]:
    """The lab's admin kubeconfig: its cluster (server, CA) and its user."""
    doc: dict[str, Any] = yaml.safe_load(Path(lab.inventory.cluster.kubeconfig).read_text())
    return doc


#: the features the run goes through, and the tiers they need (harness/rbac.py)
FEATURES = [REPO / "features" / "reboot.feature", REPO / "features" / "planned_maintenance.feature"]


@pytest.fixture(scope="module")
def account(lab: LabHandle) -> Iterator[str]:
    """The ServiceAccount the plugins mint tokens for, holding only the tiers the run's
    features need, as ``powercut rbac`` renders them."""
    choice = tiers_for(FEATURES)
    assert choice.tiers == ["read", "lock", "node-patch", "evict"]
    namespaces = sorted({w.namespace for w in lab.inventory.workloads})
    token = grant_tiers(lab.client, SA, choice.tiers, namespaces)
    yield token
    revoke_tiers(lab.client, SA, choice.tiers, namespaces)


def kubeconfig(
    path: Path, admin: dict[str, Any], user: dict[str, Any], *, name: str = "pc", **cluster: Any
) -> Path:
    c = admin["clusters"][0]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": name, "cluster": {**c["cluster"], **cluster}}],
                "users": [{"name": name, "user": user}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
                "current-context": name,
            }
        )
    )
    path.chmod(0o600)
    return path


def plugin(tmp: Path, kubectl: str, lab: LabHandle, lifetime_s: int = LIFETIME_S) -> Path:
    script = tmp / "mint-token"
    script.write_text(
        PLUGIN.format(
            python=sys.executable,
            kubectl=kubectl,
            admin=str(lab.inventory.cluster.kubeconfig),
            sa=SA,
            lifetime=lifetime_s,
        )
    )
    script.chmod(0o755)
    return script


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def kubectl_whoami(kubectl: str, env_kubeconfig: str, context: str | None) -> str:
    args = [kubectl, "auth", "whoami", "-o", "json"] + (["--context", context] if context else [])
    out = subprocess.run(
        args,
        env={**os.environ, "KUBECONFIG": env_kubeconfig},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return str(json.loads(out.stdout)["status"]["userInfo"]["username"])


def kubectl_view(kubectl: str, env_kubeconfig: str, context: str | None) -> dict[str, Any]:
    args = [kubectl, "config", "view", "--minify", "--raw", "-o", "json"]
    args += ["--context", context] if context else []
    out = subprocess.run(
        args, env={**os.environ, "KUBECONFIG": env_kubeconfig}, capture_output=True,
        text=True, timeout=60, check=True,
    )  # fmt: skip
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def powercut_whoami(env_kubeconfig: str, context: str | None) -> tuple[str, str]:
    client = KubeClient(load_kubeconfig(env_kubeconfig, context))
    try:
        return client.server, client.identity().split("'")[1]
    finally:
        client.close()


def test_every_form_reaches_the_server_as_kubectl_does(
    lab: LabHandle,
    kubectl: str,
    admin: dict[str, Any],
    account: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "plugin.log"
    monkeypatch.setenv("PLUGIN_LOG", str(log))  # the plugin's record (kubectl passes it on)
    script = plugin(tmp_path, kubectl, lab, lifetime_s=600)
    (tmp_path / "token").write_text(account)
    admin_user = admin["users"][0]["user"]
    cert_dir = tmp_path / "cert"
    cert_dir.mkdir()
    cert_user = {}
    if "client-certificate" in admin_user or "client-certificate-data" in admin_user:
        import base64

        def pem(key: str) -> bytes:
            if f"{key}-data" in admin_user:
                return base64.b64decode(admin_user[f"{key}-data"])
            return Path(admin_user[key]).read_bytes()

        (cert_dir / "c.pem").write_bytes(pem("client-certificate"))
        (cert_dir / "k.pem").write_bytes(pem("client-key"))
        cert_script = tmp_path / "cert-plugin"
        cert_script.write_text(
            CERT_PLUGIN.format(
                python=sys.executable, cert=str(cert_dir / "c.pem"), key=str(cert_dir / "k.pem")
            )
        )
        cert_script.chmod(0o755)
        cert_user = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": str(cert_script),
                "interactiveMode": "Never",
            }
        }
    v1 = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": str(script),
        "args": ["--for", "powercut"],
        "interactiveMode": "Never",
        "provideClusterInfo": True,
    }
    v1beta1 = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script)}
    forms: dict[str, dict[str, Any]] = {
        "token": {"token": account},
        "tokenFile": {"tokenFile": "token"},
        "exec v1": {"exec": v1},
        "exec v1beta1": {"exec": v1beta1},
    }
    if cert_user:
        forms["exec client certificate"] = cert_user
    seen: dict[str, tuple[str, str, str]] = {}
    for form, user in forms.items():
        path = kubeconfig(tmp_path / f"{form.replace(' ', '-')}.kubeconfig", admin, user)
        server, who = powercut_whoami(str(path), None)
        view = kubectl_view(kubectl, str(path), None)
        seen[form] = (
            who,
            kubectl_whoami(kubectl, str(path), None),
            view["clusters"][0]["cluster"]["server"],
        )
        assert server == view["clusters"][0]["cluster"]["server"].rstrip("/"), form
    for form, (ours, theirs, _) in seen.items():
        assert ours == theirs, (form, seen)
    assert seen["token"][0] == USER and seen["exec v1"][0] == USER
    # the plugin got what kubectl gives it: the cluster with provideClusterInfo, its args
    plugin_calls = [c for c in calls(log) if c["spec"].get("cluster")]
    assert plugin_calls and all(c["argv"] == ["--for", "powercut"] for c in plugin_calls)
    assert all(c["spec"]["interactive"] is False for c in plugin_calls)
    assert plugin_calls[0]["spec"]["cluster"]["server"] == view["clusters"][0]["cluster"]["server"]


def test_merged_files_and_context_as_kubectl(
    lab: LabHandle, kubectl: str, admin: dict[str, Any], account: str, tmp_path: Path
) -> None:
    a = kubeconfig(tmp_path / "a.kubeconfig", admin, {"token": account}, name="sa")
    b_doc = yaml.safe_load(Path(lab.inventory.cluster.kubeconfig).read_text())
    b = tmp_path / "b.kubeconfig"
    b.write_text(yaml.safe_dump(b_doc))
    admin_ctx = b_doc["current-context"]
    joined = f"{a}{os.pathsep}{b}"
    for ctx in (None, admin_ctx, "sa"):
        _, ours = powercut_whoami(joined, ctx)
        assert ours == kubectl_whoami(kubectl, joined, ctx), ctx
    assert powercut_whoami(joined, None)[1] == USER  # the first file's current-context
    assert powercut_whoami(f"{b}{os.pathsep}{a}", None)[1] != USER


def test_a_missing_user_is_an_error_where_kubectl_goes_anonymous(
    kubectl: str, admin: dict[str, Any], tmp_path: Path
) -> None:
    path = kubeconfig(tmp_path / "k", admin, {"token": "x"})
    doc = yaml.safe_load(path.read_text())
    doc["contexts"][0]["context"]["user"] = "nobody"
    path.write_text(yaml.safe_dump(doc))
    proc = subprocess.run(
        [kubectl, "auth", "whoami", "-o", "json"], env={**os.environ, "KUBECONFIG": str(path)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "anonymous" in proc.stdout + proc.stderr or proc.returncode != 0
    with pytest.raises(ConfigError, match="user 'nobody' of context 'pc' not found"):
        load_kubeconfig(path)


def test_a_revoked_credential_is_fetched_anew_on_the_401_and_counted(
    lab: LabHandle,
    kubectl: str,
    admin: dict[str, Any],
    account: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "plugin.log"
    monkeypatch.setenv("PLUGIN_LOG", str(log))
    script = plugin(tmp_path, kubectl, lab, lifetime_s=3600)
    exec_ = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script),
             "interactiveMode": "Never"}  # fmt: skip
    client = KubeClient(load_kubeconfig(kubeconfig(tmp_path / "k", admin, {"exec": exec_})))
    assert client.list("/api/v1/nodes")[0]
    (first,) = calls(log)
    lab.client.delete(f"/api/v1/namespaces/default/secrets/{first['secret']}")

    # the API server caches a token's review for some seconds: ask until it refuses it
    wait_for(
        "a 401 answered with a new credential",
        lambda: client.list("/api/v1/nodes")[0] and client.auth_stats.retries >= 1,
        30,
        1.0,
    )
    assert client.auth_stats.retries >= 1
    assert len(calls(log)) == 1 + client.auth_stats.retries
    assert client.list("/api/v1/nodes")[0]
    assert isinstance(client.creds.auth, ExecPlugin)
    client.close()


def _exec_inventory(
    lab: LabHandle, kubectl: str, admin: dict[str, Any], tmp_path: Path, name: str
) -> tuple[Path, Path]:
    """The lab's inventory with its cluster reached through the exec plugin (credentials
    living ``LIFETIME_S``): ``<name>.yaml`` beside the lab's inventory, and the plugin's log
    of its calls."""
    log = tmp_path / "plugin.log"
    script = plugin(tmp_path, kubectl, lab)
    exec_ = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script),
             "interactiveMode": "Never",
             "env": [{"name": "PLUGIN_LOG", "value": str(log)}]}  # fmt: skip
    kc = kubeconfig(lab.inventory_path.parent / f"{name}.kubeconfig", admin, {"exec": exec_})
    inv_doc = yaml.safe_load(lab.inventory_path.read_text())
    inv_doc["cluster"] = {"kubeconfig": str(kc)}
    inv = lab.inventory_path.parent / f"{name}.yaml"
    inv.write_text(yaml.safe_dump(inv_doc, sort_keys=False))
    return inv, log


def test_a_run_outlives_its_credentials(
    lab: LabHandle, kubectl: str, admin: dict[str, Any], account: str, tmp_path: Path
) -> None:
    inv, log = _exec_inventory(lab, kubectl, admin, tmp_path, "exec")
    out = tmp_path / "out"
    started = time.time()
    proc = subprocess.run(
        [*POWERCUT, "run", "-i", str(inv), "--out", str(out), "--no-html", "--progress",
         "plain", "--", "-k", f"{REBOOT} or {DRAIN}"],
        cwd=REPO, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    took = time.time() - started
    run_log = (out / "run.log").read_text() if (out / "run.log").exists() else ""
    assert proc.returncode == EXIT_PASSED, proc.stdout[-3000:] + proc.stderr[-3000:]
    made = calls(log)
    # each credential source (one per process that reads the kubeconfig) called its plugin
    # again as each credential lapsed: never more often than its stated life allows (the
    # cache held), and the run's longest-lived source several times
    # long enough that its credentials lapse at least once (each is fetched again a tenth of
    # its life early): on a quiet machine the two scenarios take about 58 s
    assert took > 1.5 * LIFETIME_S, f"the run took {took:.0f} s: too short to see expiries"
    by_caller: dict[int, list[float]] = {}
    for c in made:
        by_caller.setdefault(c["caller"], []).append(c["at"])
    assert max(len(v) for v in by_caller.values()) >= 2, made
    for at in by_caller.values():
        gaps = [b - a for a, b in itertools.pairwise(at)]
        assert all(g >= LIFETIME_S * 0.8 for g in gaps), gaps
    assert "401 Unauthorized" not in run_log + proc.stderr  # renewed before it lapsed
    results = [json.loads(p.read_text()) for p in (out / "allure-results").glob("*-result.json")]
    assert sorted(r["status"] for r in results) == ["passed", "passed"]
    params = [p["name"] for r in results for p in r.get("parameters", [])]
    assert not [p for p in params if "observation gap" in p]
    journal = journal_path_for(load_inventory(inv))
    if journal.exists():
        with Journal(journal) as j:
            assert not j.pending_undos()
    nodes, _ = lab.client.list("/api/v1/nodes")
    assert not [n["metadata"]["name"] for n in nodes if n.get("spec", {}).get("unschedulable")]
    powercut("lab", "status", "--state-dir", str(lab.state_dir), check=False)


#: the longevity twin: cycles long enough that the run outlives two credentials and more
LONGEVITY_CYCLES = 2
LONGEVITY_OUTAGE = "20s"


def test_a_longevity_run_outlives_its_credentials(
    lab: LabHandle, kubectl: str, admin: dict[str, Any], account: str, tmp_path: Path
) -> None:
    """The longevity twin of :func:`test_a_run_outlives_its_credentials`: ``powercut
    longevity`` through the same exec plugin (each credential said to live ``LIFETIME_S``,
    its Secret deleted once it lapsed), for at least one and a half lifetimes: the plugin
    called again as each credential lapses, no 401 left unanswered, every cycle's nodes
    powered back on and judged, no observation gap on any cycle's timeline, and the journal
    owing nothing afterwards (``powercut recover --status``)."""
    from harness.kube.observer import gaps
    from harness.kube.timeline import ACTION, Timeline
    from harness.longevity.records import CYCLES_FILE, read_log

    inv, log = _exec_inventory(lab, kubectl, admin, tmp_path, "exec-night")
    out, run_log = tmp_path / "night", tmp_path / "powercut.log"
    started = time.time()
    proc = subprocess.Popen(
        [*POWERCUT, "longevity", "-i", str(inv), "--out", str(out),
         "--cycles", str(LONGEVITY_CYCLES), "--outage", LONGEVITY_OUTAGE,
         "--probe-interval", "0.25s", "--budget", "cleanup=20s", "--keep-timelines", "all",
         "--progress", "plain"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "POWERCUT_LOG": str(run_log)},
    )  # fmt: skip
    stdout, stderr = proc.communicate(timeout=600)
    took = time.time() - started
    said = stdout[-3000:] + stderr[-3000:]
    assert proc.returncode in (0, 1), said  # 1: a phase over its budget, not a lost restore
    assert f"stopped: {LONGEVITY_CYCLES} cycles done" in stdout, said
    assert took > 1.5 * LIFETIME_S, f"the run took {took:.0f} s: too short to see expiries"
    # renewals: the run's own credential source called the plugin again as each lapsed
    mine = [c["at"] for c in calls(log) if c["caller"] == proc.pid]
    assert len(mine) >= 2, calls(log)
    gaps_s = [b - a for a, b in itertools.pairwise(mine)]
    assert all(g >= LIFETIME_S * 0.8 for g in gaps_s), gaps_s
    # no 401 left unanswered: any the server sent was answered with a new credential and the
    # request retried (the client's log line); none reached the run's output or its records
    text = run_log.read_text() if run_log.exists() else ""
    refused = [line for line in text.splitlines() if "401" in line]
    retried = [line for line in refused if "fetching" in line and "retrying once" in line]
    assert refused == retried, refused
    assert "Unauthorized" not in stdout + stderr, said
    # every cycle restored and judged, back to back: no cycle missing, none failed
    cycles = read_log(out / CYCLES_FILE).cycles
    assert [c.cycle for c in cycles] == list(range(1, LONGEVITY_CYCLES + 1))
    assert all(c.status != "failed" for c in cycles), [c.reason for c in cycles]
    assert all(a.ended_at <= b.started_at for a, b in itertools.pairwise(cycles))
    for c in cycles:
        assert c.phases["recovery"] is not None and c.phases["not_ready"] is not None, c
        assert c.timeline is not None
        tl = Timeline.from_json((out / c.timeline).read_bytes())
        acked = {t.name for t in tl.all(ACTION, transition="power-on acknowledged")}
        assert set(c.nodes) <= acked, (c.cycle, c.nodes, acked)
        assert gaps(tl) == [], (c.cycle, gaps(tl))  # no watch re-listed: nothing unseen
    # the journal owes nothing, as `powercut recover --status` (the chart's check) says
    journal = journal_path_for(load_inventory(inv))
    if journal.exists():
        with Journal(journal) as j:
            assert not j.pending_undos()
    status = tmp_path / "recover.json"
    rec = powercut("recover", "-i", str(inv), "--status", str(status), check=False)
    assert rec.returncode == 0, rec.stdout + rec.stderr
    checked = json.loads(status.read_text())
    assert checked["owed"] == 0 and checked["found"]["owed"] == 0, checked
    assert checked["exit_code"] == 0 and not checked["lock"].get("held"), checked
    nodes, _ = lab.client.list("/api/v1/nodes")
    assert not [n["metadata"]["name"] for n in nodes if n.get("spec", {}).get("unschedulable")]
    retries = len(retried)
    print(
        f"longevity through {len(calls(log))} credentials ({len(mine)} for the run) in "
        f"{took:.0f} s; cycles {[round(c.duration_s) for c in cycles]} s; 401s retried: {retries}"
    )


def test_preflight_names_a_verb_removed_from_the_role(
    lab: LabHandle, admin: dict[str, Any], tmp_path: Path
) -> None:
    role = target_role()
    rules = [r for r in role["rules"] if r.get("resources") != ["pods/eviction"]]
    name = "powercut-creds-noevict"
    token = grant(lab.client, name, {**role, "rules": rules})
    try:
        kc = kubeconfig(tmp_path / "k", admin, {"token": token})
        inv_doc = yaml.safe_load(lab.inventory_path.read_text())
        inv_doc["cluster"] = {"kubeconfig": str(kc)}
        inv = lab.inventory_path.parent / "noevict.yaml"
        inv.write_text(yaml.safe_dump(inv_doc, sort_keys=False))
        drain = REPO / "features" / "planned_maintenance.feature"
        proc = powercut("preflight", "-i", str(inv), "--features", str(drain), check=False)
        failed = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
        assert proc.returncode == 2
        assert failed == [
            f"FAIL  permission: '{service_account_user(name, 'default')}' (groups: "
            "system:serviceaccounts, system:serviceaccounts:default, system:authenticated) "
            "lacks create on 'pods/eviction' in the core API group \"\" cluster-wide "
            "(tier evict) (docs/rbac.md, powercut rbac)"
        ], proc.stdout
        ok = powercut(
            "preflight", "-i", str(inv), "--features", str(REPO / "features" / "reboot.feature")
        )
        assert "ok    permissions" in ok.stdout
    finally:
        revoke(lab.client, name)


def test_the_shipped_lock_policy_keeps_the_lease_to_its_writer(
    lab: LabHandle, account: str
) -> None:
    from harness.kube.lock import LEASE_NAME, LEASE_NAMESPACE

    text = (REPO / "deploy" / "rbac" / "lock-policy.yaml").read_text().replace("WRITER", USER)
    policy, binding = yaml.safe_load_all(text)
    base = "/apis/admissionregistration.k8s.io/v1"
    name = policy["metadata"]["name"]
    lab.client.apply(f"{base}/validatingadmissionpolicies/{name}", policy)
    lab.client.apply(f"{base}/validatingadmissionpolicybindings/{name}", binding)
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE},
            "spec": {"holderIdentity": "probe", "leaseDurationSeconds": 1}}  # fmt: skip
    path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
    try:

        def refused() -> str:
            try:
                lab.client.create(path, body, dryRun="All")
            except ApiError as exc:
                return str(exc)
            return ""

        said = wait_for("the policy to refuse the admin", refused, 30, 0.5)
        assert f"may be written by {USER} only" in said
        creds = replace(lab.client.creds, token=account, cert_file=None, key_file=None,
                        cert_data=None, key_data=None, auth=None)  # fmt: skip
        runner = KubeClient(creds)
        runner.create(path, body, dryRun="All")  # the writer is admitted
        runner.close()
    finally:
        lab.client.delete(f"{base}/validatingadmissionpolicybindings/{name}")
        lab.client.delete(f"{base}/validatingadmissionpolicies/{name}")


def test_a_file_and_its_data_both_given_are_refused_by_both(
    kubectl: str, admin: dict[str, Any], account: str, tmp_path: Path
) -> None:
    cluster = admin["clusters"][0]["cluster"]
    if "certificate-authority-data" in cluster:
        import base64

        ca = tmp_path / "ca.crt"
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        extra = {"certificate-authority": str(ca)}
    else:
        data = Path(cluster["certificate-authority"]).read_bytes()
        extra = {"certificate-authority-data": __import__("base64").b64encode(data).decode()}
    path = kubeconfig(tmp_path / "k", admin, {"token": account}, **extra)
    proc = subprocess.run(
        [kubectl, "auth", "whoami"], env={**os.environ, "KUBECONFIG": str(path)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "both specified" in proc.stderr, proc.stderr
    with pytest.raises(ConfigError, match="both given"):
        load_kubeconfig(path)


def _doc(name: str, user: dict[str, Any], server: str, **cluster: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "contexts": [{"name": name, "context": {"cluster": f"k{name}", "user": f"u{name}"}}],
        "clusters": [{"name": f"k{name}", "cluster": {"server": server, **cluster}}],
        "users": [{"name": f"u{name}", "user": user}],
    }


def test_the_merge_and_context_as_kubectl_config_view_shows_them(
    kubectl: str, tmp_path: Path
) -> None:
    """Without a server: for merged files and each context, kubectl's ``config view
    --minify --raw`` and powercut pick the same server, the same user entry, the same
    TLS server name and proxy."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "tok").write_text("from-b")
    a = _doc("a", {"token": "a-token"}, "https://a.example:6443", **{"tls-server-name": "api"})
    a["users"].append({"name": "ub", "user": {"token": "shadowing"}})
    b = _doc("b", {"tokenFile": "tok"}, "https://b.example:6443", **{"proxy-url": "http://p:3128"})
    b["contexts"].append({"name": "c", "context": {"cluster": "kb", "user": "ua"}})
    pa, pb = tmp_path / "a" / "config", tmp_path / "b" / "config"
    pa.write_text(yaml.safe_dump(a))
    pb.write_text(yaml.safe_dump(b))
    for order in ([pa, pb], [pb, pa]):
        joined = os.pathsep.join(map(str, order))
        for ctx in (None, "a", "b", "c"):
            view = kubectl_view(kubectl, joined, ctx)
            cluster = view["clusters"][0]["cluster"]
            user = view["users"][0]["user"]
            ours = load_kubeconfig(joined, ctx)
            assert ours.server == cluster["server"], (order, ctx)
            assert ours.tls_server_name == cluster.get("tls-server-name"), (order, ctx)
            assert ours.proxy_url == cluster.get("proxy-url"), (order, ctx)
            if "token" in user:
                assert ours.token == user["token"], (order, ctx)
            else:  # the path as written; relative to the file it came from (not the cwd)
                assert user["tokenFile"] == "tok"
                assert ours.auth is not None and ours.auth.current().header == "Bearer from-b"


def test_context_names_resolve_as_kubectl_resolves_them(kubectl: str, tmp_path: Path) -> None:
    """``--context`` over three files, as kubectl reads them: a context defined in two files
    is the first file's, with the cluster and user of the first file that defines each; an
    unknown context is an error for both, kubectl's words in powercut's, with the valid
    ones listed (``kubectl config view --minify --context X -o json``)."""
    docs = {
        "a": _doc("a", {"token": "a-token"}, "https://a.example:6443"),
        "b": _doc("b", {"token": "b-token"}, "https://b.example:6443"),
        "c": _doc("c", {"token": "c-token"}, "https://c.example:6443"),
    }
    # b redefines context "a" (pointing at b's cluster): the first file's "a" wins
    docs["b"]["contexts"].append({"name": "a", "context": {"cluster": "kb", "user": "ub"}})
    # c defines "x" with a cluster name that a defines first: a's cluster is the one used
    docs["c"]["contexts"].append({"name": "x", "context": {"cluster": "ka", "user": "uc"}})
    docs["c"]["current-context"] = "x"
    paths = []
    for name, doc in docs.items():
        path = tmp_path / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(doc))
        paths.append(path)
    joined = os.pathsep.join(map(str, paths))
    for ctx in ("a", "b", "c", "x", None):
        view = kubectl_view(kubectl, joined, ctx)
        ours = load_kubeconfig(joined, ctx)
        assert ours.server == view["clusters"][0]["cluster"]["server"], ctx
        assert ours.token == view["users"][0]["user"]["token"], ctx
        assert ours.describe == f"user {view['users'][0]['name']!r} (a token)", ctx
    proc = subprocess.run(
        [kubectl, "get", "nodes", "--context", "prod"], env={**os.environ, "KUBECONFIG": joined},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    said = "context was not found for specified context: prod"
    assert said in proc.stderr, proc.stderr
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(joined, "prod")
    assert f"{said}; valid: a, b, c, x" in str(info.value)


def test_context_picks_another_user_of_the_lab_and_is_refused_where_nodes_are_missing(
    lab: LabHandle, admin: dict[str, Any], account: str, tmp_path: Path
) -> None:
    """``--context`` on the real API server: the inventory names the admin's context, the
    command picks the ServiceAccount's (the same cluster) and says so; an inventory naming
    a node the cluster lacks is refused before anything is touched, naming the context,
    the server and the node (docs/connecting.md, "Another context")."""
    doc = yaml.safe_load(Path(lab.inventory.cluster.kubeconfig).read_text())
    cluster = doc["contexts"][0]["context"]["cluster"]
    doc["users"].append({"name": "sa", "user": {"token": account}})
    doc["contexts"].append({"name": "sa", "context": {"cluster": cluster, "user": "sa"}})
    kc = tmp_path / "two.kubeconfig"
    kc.write_text(yaml.safe_dump(doc))
    inv_doc = yaml.safe_load(lab.inventory_path.read_text())
    inv_doc["cluster"] = {"kubeconfig": str(kc), "context": doc["current-context"]}
    inv = lab.inventory_path.parent / "two-contexts.yaml"
    inv.write_text(yaml.safe_dump(inv_doc, sort_keys=False))
    node = lab.inventory.node_names()[-1]
    ok = powercut("preflight", "-i", str(inv), "--context", "sa", "--no-permissions", node)
    n = len(lab.inventory.nodes)
    assert ok.stdout.splitlines()[0] == (
        f"ok    context: sa (--context): its cluster holds every one of the inventory's {n} nodes"
    ), ok.stdout
    assert f"ok    node {node}" in ok.stdout
    assert powercut_whoami(str(kc), "sa")[1] == USER  # the context's user, not the admin
    dry = powercut("run", "-i", str(inv), "--context", "sa", "--dry-run")
    assert "; context sa (--context); nothing will be touched" in dry.stdout, dry.stdout
    ghost = dict(inv_doc["nodes"][-1], name="ghost-1")
    inv_doc["nodes"].append(ghost)
    bad = lab.inventory_path.parent / "ghost.yaml"
    bad.write_text(yaml.safe_dump(inv_doc, sort_keys=False))
    refused = powercut("preflight", "-i", str(bad), "--context", "sa", check=False)
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout
    server = lab.client.server
    assert f"context 'sa' (--context) reaches {server}, a cluster with no Node named ghost-1" in (
        refused.stderr
    ), refused.stderr
    unknown = powercut("preflight", "-i", str(inv), "--context", "prod", check=False)
    assert unknown.returncode == 2
    assert "context was not found for specified context: prod; valid: " in unknown.stderr
