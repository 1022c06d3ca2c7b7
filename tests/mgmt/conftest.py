"""A management cluster for real (``make mgmt-test``): a kind cluster (one node, from the
node image the kind stage builds) on a Docker network of its own, the runner image loaded
into it, the chart installed with one target: a lab served on that network's gateway only
(``powercut lab up --expose``), so that the runner pods reach it and nothing else does.

The runner never holds the lab's admin credentials, nor any token in a Secret: the target
Secret's kubeconfig says only ``tokenFile:`` the path where the chart projects a token of
the MANAGEMENT cluster's ServiceAccount ``powercut/pc-runner`` for the audience
``powercut-lab`` (``targetToken.projected``; the kubelet renews it). The lab trusts the kind
cluster's ServiceAccount issuer for that audience (``lab up --authentication-config``: a
JWT authenticator whose discovery and keys the lab's API servers fetch from the kind API
server, which serves them to anyone), and sees the user
``mgmt:system:serviceaccount:powercut:pc-runner``, holding only the RBAC tiers its feature
needs (``powercut rbac``; tests/role_bound.py), read and lock. A ValidatingAdmissionPolicy
on the lab lets only that user write the cluster lock (Lease ``kube-system/powercut-lock``):
a runner or ``recover --lock`` that holds the lock did so as that identity, in the API
server's own judgement.

Ports: the kind API server at POWERCUT_TEST_MGMT_PORT (default 27000), a Prometheus at that
+ 100 (scraping the page's /metrics on its NodePort with the chart's alerts), the lab from
POWERCUT_TEST_MGMT_LAB_PORT (default that + 200; below the kernel's ephemeral range).
Everything is removed at the end: the chart's cluster, the network, the lab.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.kindlab.versions import KUBERNETES
from harness.kube.client import ApiError, KubeClient
from harness.kube.lock import LEASE_NAME, LEASE_NAMESPACE
from harness.rbac import tiers_for
from tests.polling import poll_until
from tests.role_bound import grant_tiers_to_user, service_account_user, token_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
BASE_PORT = int(os.environ.get("POWERCUT_TEST_MGMT_PORT", "27000"))
LAB_PORT = int(os.environ.get("POWERCUT_TEST_MGMT_LAB_PORT", str(BASE_PORT + 200)))
#: The test's Prometheus (scraping the page's /metrics with the chart's alerts).
PROMETHEUS_PORT = BASE_PORT + 100
NAME = os.environ.get("POWERCUT_TEST_MGMT_NAME", "pcmgmt")
NETWORK = f"{NAME}-net"
NAMESPACE = "powercut"
RELEASE = "pc"
TARGET = "lab"
#: The runner's identity: the chart's ServiceAccount in the management cluster, whose
#: projected token for AUDIENCE the lab accepts (its AuthenticationConfiguration), naming it
#: with USER_PREFIX: a user in the lab bound to the narrow tiers alone.
RUNNER_SA = f"{RELEASE}-runner"
AUDIENCE = f"powercut-{TARGET}"
USER_PREFIX = "mgmt:"
RUNNER_USER = USER_PREFIX + service_account_user(RUNNER_SA, NAMESPACE)
#: where the chart projects that token in the runner's pods (values.yaml's default)
TOKEN_PATH = "/var/run/secrets/powercut/target/token"
LOCK_POLICY = "powercut-test-lock-writer"
#: One built-in scenario: a control-plane node loses power and comes back (as wheel-test).
SCENARIO = os.environ.get("POWERCUT_TEST_MGMT_SCENARIO", "controlplane_node_loses_power")
#: the narrowest tiers that scenario's feature needs (read and lock: it only observes, and
#: power goes through the BMCs)
RUNNER_TIERS = tiers_for([ROOT / "features" / "control_plane_loss.feature"]).tiers
POWERCUT = [sys.executable, "-m", "harness.cli"]
SAY = print


def run(
    cmd: list[str], *, timeout: float = 900, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd[:6])} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
            f"{proc.stderr[-3000:]}"
        )
    return proc


def powercut(*args: str, timeout: float = 1800, env: dict[str, str] | None = None) -> str:
    p = run([*POWERCUT, *args], timeout=timeout, env=env)
    return p.stdout + p.stderr


def wait_for(what: str, fn: Callable[[], Any], timeout_s: float, every_s: float = 2.0) -> Any:
    """Poll ``fn`` until it returns something truthy; fail naming what and the last value."""
    return poll_until(what, fn, timeout_s, every_s)


def _network_gateway() -> str:
    """The IPv4 gateway of the cluster's network (``kind up --network`` made it)."""
    gw = run(
        ["docker", "network", "inspect", NETWORK, "--format",
         "{{range .IPAM.Config}}{{.Gateway}} {{end}}"]
    ).stdout.split()  # fmt: skip
    v4 = [g for g in gw if "." in g]
    assert v4, f"docker network {NETWORK} has no IPv4 gateway: {gw}"
    return v4[0]


def pod_files(
    lab_inventory: Path, gateway: str, dest: Path, *, kubeconfig: Path | None = None
) -> tuple[dict[str, Any], Path]:
    """The lab's inventory as a runner pod sees it: every 127.0.0.1 endpoint on the gateway,
    every file (password, CA, SSH key, known_hosts) in the target Secret at
    /etc/powercut/target/<name>, and the kubeconfig made self-contained with the gateway as
    server: ``kubeconfig`` with its own current context if given, else the inventory's (the
    lab's admin; bench/runner_footprint.py). Returns the inventory and the directory of the
    Secret's files."""
    doc = yaml.safe_load(lab_inventory.read_text())
    files = dest / "target"
    files.mkdir(parents=True)

    def walk(v: Any, key: str = "") -> Any:
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, key) for x in v]
        if isinstance(v, str):
            p = Path(v)
            if key != "kubeconfig" and p.is_absolute() and p.is_file():
                (files / p.name).write_bytes(p.read_bytes())
                return f"/etc/powercut/target/{p.name}"
            return v.replace("127.0.0.1", gateway)
        return v

    out = walk(doc)
    if kubeconfig is None:
        kubeconfig = Path(doc["cluster"]["kubeconfig"])
        out["cluster"]["kubeconfig"] = "/etc/powercut/target/kubeconfig"
    else:  # its own current context (the inventory's names the admin's)
        out["cluster"] = {"kubeconfig": "/etc/powercut/target/kubeconfig"}
    kc = yaml.safe_load(kubeconfig.read_text())
    for c in kc["clusters"]:
        cl = c["cluster"]
        cl["server"] = cl["server"].replace("127.0.0.1", gateway)
        if "certificate-authority" in cl:
            ca = Path(cl.pop("certificate-authority")).read_bytes()
            cl["certificate-authority-data"] = base64.b64encode(ca).decode()
    for u in kc["users"]:
        us = u["user"]
        for k in ("client-certificate", "client-key"):
            if k in us:
                us[f"{k}-data"] = base64.b64encode(Path(us.pop(k)).read_bytes()).decode()
    (files / "kubeconfig").write_text(yaml.safe_dump(kc))
    return out, files


def lock_policy() -> list[tuple[str, dict[str, Any]]]:
    """The shipped ValidatingAdmissionPolicy and its binding (deploy/rbac/lock-policy.yaml),
    which refuse any write of the cluster lock's Lease by anyone but the runner's
    ServiceAccount, under this test's name."""
    text = (ROOT / "deploy" / "rbac" / "lock-policy.yaml").read_text()
    policy, binding = yaml.safe_load_all(text.replace("WRITER", RUNNER_USER))
    assert f"'{LEASE_NAMESPACE}'" in policy["spec"]["validations"][0]["expression"]
    assert f"'{LEASE_NAME}'" in policy["spec"]["validations"][0]["expression"]
    policy["metadata"]["name"] = LOCK_POLICY
    binding["metadata"]["name"] = LOCK_POLICY
    binding["spec"]["policyName"] = LOCK_POLICY
    base = "/apis/admissionregistration.k8s.io/v1"
    return [
        (f"{base}/validatingadmissionpolicies/{LOCK_POLICY}", policy),
        (f"{base}/validatingadmissionpolicybindings/{LOCK_POLICY}", binding),
    ]


def try_lock_write(client: KubeClient) -> str:
    """A dry-run creation of the cluster lock's Lease as ``client``: 'admitted' or the
    API server's refusal (nothing is written either way)."""
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE},
        "spec": {"holderIdentity": "mgmt-test-probe", "leaseDurationSeconds": 1},
    }
    path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
    try:
        client.create(path, body, dryRun="All")
    except ApiError as exc:
        return str(exc)
    return "admitted"


def _anonymous_get(url: str, ca_pem: bytes) -> dict[str, Any] | None:
    """``url`` fetched with no credentials, TLS checked against ``ca_pem``; None on an
    HTTP error (401/403 while the binding below is not yet in force)."""
    import ssl
    import urllib.error
    import urllib.request

    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=10) as r:  # noqa: S310 (https)
            return dict(json.loads(r.read()))
    except urllib.error.HTTPError:
        return None


def federation(kind_kubeconfig: Path, kind_client: KubeClient, dest: Path) -> Path:
    """The lab's AuthenticationConfiguration trusting the kind cluster's ServiceAccount
    issuer for AUDIENCE, users named USER_PREFIX + ``sub``. The kind API server first lets
    anyone read its discovery document and keys (system:service-account-issuer-discovery
    for system:unauthenticated, as the Kubernetes docs show for external consumers); both are
    fetched here with no credentials, as the lab's API servers will. The discovery URL is
    the kind API server as this machine reaches it (127.0.0.1:BASE_PORT); the keys' URL the
    document names is the API server's container address (port 6443, on the kind network).
    Returns the file."""
    kind_client.apply(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/powercut-test-issuer-discovery",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "powercut-test-issuer-discovery"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "system:service-account-issuer-discovery"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                          "name": "system:unauthenticated"}],
        },
    )  # fmt: skip
    kc = yaml.safe_load(kind_kubeconfig.read_text())
    ca_pem = base64.b64decode(kc["clusters"][0]["cluster"]["certificate-authority-data"])
    discovery_url = f"https://127.0.0.1:{BASE_PORT}/.well-known/openid-configuration"
    discovery = wait_for(
        "the kind API server's discovery document, read with no credentials",
        lambda: _anonymous_get(discovery_url, ca_pem), 60, every_s=1,
    )  # fmt: skip
    issuer, jwks_uri = str(discovery["issuer"]), str(discovery["jwks_uri"])
    keys = wait_for("its keys (JWKS), with no credentials",
                    lambda: _anonymous_get(jwks_uri, ca_pem), 60, every_s=1)  # fmt: skip
    assert keys.get("keys"), keys
    SAY(f"mgmt: the lab will trust issuer {issuer} (keys at {jwks_uri}) for {AUDIENCE}")
    config = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AuthenticationConfiguration",
        "jwt": [
            {
                "issuer": {
                    "url": issuer,
                    "discoveryURL": discovery_url,
                    "certificateAuthority": ca_pem.decode(),
                    "audiences": [AUDIENCE],
                },
                "claimMappings": {"username": {"claim": "sub", "prefix": USER_PREFIX}},
            }
        ],
    }
    dest.write_text(yaml.safe_dump(config, sort_keys=False))
    return dest


def mgmt_token(kind_client: KubeClient, audience: str, seconds: int = 7200) -> str:
    """A token of the runner's ServiceAccount in the management cluster (TokenRequest) for
    ``audience``: what the kubelet projects into the runner's pods, for the test's own
    requests as that identity."""
    answer = kind_client.create(
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{RUNNER_SA}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"audiences": [audience], "expirationSeconds": seconds}},
    )  # fmt: skip
    return str(answer["status"]["token"])


def whoami(client: KubeClient) -> str | None:
    """The user name the lab gives ``client``'s credentials (a SelfSubjectReview), or None
    when it refuses them (401)."""
    from harness.kube.client import Unauthorized

    try:
        review = client.create(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    except Unauthorized:
        return None
    return str(review["status"]["userInfo"]["username"])


@dataclass
class Mgmt:
    kind_dir: Path
    lab_dir: Path
    gateway: str
    kubeconfig: Path
    kubectl: str
    helm: str
    lab_client: KubeClient
    kind_client: KubeClient
    timings: dict[str, float]
    image: str = ""  # the runner image's reference, as `powercut image build` printed it
    #: the lab's inventory as `lab up --inventory-out` wrote it (host addresses and paths)
    lab_inventory: Path = Path()
    #: the lab as the runner's identity (a token of the management cluster's ServiceAccount)
    runner_client: KubeClient = field(init=False)

    def k(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        p = run([self.kubectl, "--kubeconfig", str(self.kubeconfig), "-n", NAMESPACE, *args],
                timeout=timeout, check=check)  # fmt: skip
        return p.stdout

    def kj(self, *args: str) -> Any:
        return json.loads(self.k(*args, "-o", "json"))

    def job(self, name: str) -> dict[str, Any]:
        return dict(self.kj("get", "job", name))

    def job_done(self, name: str) -> str | None:
        st = self.job(name).get("status") or {}
        if st.get("succeeded"):
            return "succeeded"
        if st.get("failed"):
            return "failed"
        return None

    def pod_of(self, job: str) -> dict[str, Any] | None:
        items = self.kj("get", "pods", "-l", f"job-name={job}")["items"]
        return dict(items[0]) if items else None

    def logs(self, job: str, container: str, *, gone_ok: bool = False) -> str:
        """``container``'s log in ``job``'s pod; ``gone_ok``: "" when the pod is gone (a
        CronJob's history limit deletes an older Job, and its pod, while it is listed)."""
        pod = self.pod_of(job)
        if pod is None and gone_ok:
            return ""
        assert pod, f"job {job} has no pod"
        return self.k("logs", pod["metadata"]["name"], "-c", container, check=False)

    def in_page(self, *cmd: str) -> str:
        return self.k("exec", f"deploy/{RELEASE}-page", "--", *cmd)

    def lab_state(self) -> dict[str, Any]:
        return dict(json.loads((self.lab_dir / "state.json").read_text()))

    def lab_nodes(self) -> list[dict[str, Any]]:
        items, _ = self.lab_client.list("/api/v1/nodes")
        return items

    def lab_clean(self) -> list[str]:
        """What is left disrupted in the lab: nodes off, cordoned or tainted by powercut."""
        left = [f"{n} off" for n, s in self.lab_state().get("power", {}).items() if s != "on"]
        for n in self.lab_nodes():
            name = n["metadata"]["name"]
            if n["spec"].get("unschedulable"):
                left.append(f"{name} cordoned")
            for t in n["spec"].get("taints") or []:
                if t["key"] in ("node.kubernetes.io/out-of-service",) or "powercut" in t["key"]:
                    left.append(f"{name} tainted {t['key']}")
        return left

    def page_target(self) -> str:
        """``host:port`` of the page's NodePort on the kind node (on the cluster's network)."""
        port = self.kj("get", "service", f"{RELEASE}-page")["spec"]["ports"][0]["nodePort"]
        node = run(["docker", "inspect", "--format",
                    f'{{{{(index .NetworkSettings.Networks "{NETWORK}").IPAddress}}}}',
                    f"{NAME}-control-plane"]).stdout.strip()  # fmt: skip
        return f"{node}:{port}"

    def lease(self) -> dict[str, Any] | None:
        return self.lab_client.get_or_none(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/powercut-lock"
        )


def _ephemeral(base_port: int) -> list[str]:
    """``--allow-ephemeral-ports`` when the lab's ports (a thousand from ``base_port``) lie in
    the kernel's ephemeral range: a machine shared by several runs may leave a run no other
    ports (POWERCUT_TEST_MGMT_LAB_PORT)."""
    from harness.lab.spec import ephemeral_port_range

    low, high = ephemeral_port_range()
    return ["--allow-ephemeral-ports"] if base_port <= high and base_port + 1000 >= low else []


def _values(tmp: Path, image: str) -> Path:
    """The chart's values: the image by the tag `powercut image build` printed (its inputs'
    digest), never a plain version tag."""
    repository, _, tag = image.rpartition(":")
    v = {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "store": {"size": "1Gi"},
        # the page on a NodePort: the test's Prometheus (on the host, on the cluster's
        # network) scrapes its /metrics with the chart's alerts
        "page": {"service": {"type": "NodePort"}},
        "metrics": {"prometheusRule": {"enabled": False}},
        "targets": [
            {
                "name": TARGET,
                "schedule": "*/1 * * * *",
                "suspend": True,  # test_mgmt lets it run on schedule once
                "inventory": {"configMap": "lab-inventory"},
                "kubeconfigSecret": "lab-target",
                # the kubeconfig's tokenFile: a token of this cluster, renewed by the kubelet
                "targetToken": {"projected": {"audience": AUDIENCE, "path": TOKEN_PATH}},
                "features": {"select": SCENARIO},
                "recoverLockWait": "5s",
                # the recover CronJob: suspended with the target; test_mgmt resumes it
                "recover": {"enabled": True, "schedule": "*/2 * * * *"},
                "activeDeadlineSeconds": 1800,
                "terminationGracePeriodSeconds": 120,
                "state": {"size": "100Mi"},
                "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                              "limits": {"memory": "1Gi"}},
            }
        ],
    }  # fmt: skip
    path = tmp / "values.yaml"
    path.write_text(yaml.safe_dump(v))
    return path


@pytest.fixture(scope="session")
def mgmt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mgmt]:
    from harness.kindlab.binaries import NODE_GROUP, obtain_helm
    from harness.lab import build

    tmp = tmp_path_factory.mktemp("mgmt")
    state = Path(os.environ.get("POWERCUT_TEST_MGMT_STATE", str(tmp)))
    kind_dir, lab_dir = state / "kind", state / "lab"
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    helm = str(obtain_helm(SAY))
    kubectl = str(build.obtain(SAY, groups=(NODE_GROUP,)).paths["kubectl"])
    try:
        # kind up first: it starts a dockerd when none answers (stopped by kind down) and
        # creates the cluster's own network, removed by kind down once nothing uses it.
        t = time.monotonic()
        powercut(
            "kind", "up", "--name", NAME, "--workers", "0", "--racks", "1",
            "--network", NETWORK, "--base-port", str(BASE_PORT),
            "--state-dir", str(kind_dir), "--inventory-out", str(tmp / "kind.yaml"),
        )  # fmt: skip
        timings["kind up"] = time.monotonic() - t
        gateway = _network_gateway()
        kind_client = KubeClient.from_kubeconfig(kind_dir / "kubeconfig", timeout_s=10)
        authn = federation(kind_dir / "kubeconfig", kind_client, tmp / "authn.yaml")
        t = time.monotonic()
        built = run([*POWERCUT, "image", "build", "--kind-cluster", NAME, "--json"], timeout=1800)
        image = str(json.loads(built.stdout.strip().splitlines()[-1])["image"])
        timings["runner image (build or reuse) and load"] = time.monotonic() - t
        t = time.monotonic()
        powercut(
            "lab", "up", "--workloads", "--base-port", str(LAB_PORT),
            "--state-dir", str(lab_dir), "--expose", gateway,
            "--inventory-out", str(tmp / "lab.yaml"), *_ephemeral(LAB_PORT),
            "--authentication-config", str(authn),
        )  # fmt: skip
        timings["lab up"] = time.monotonic() - t
        admin = KubeClient.from_kubeconfig(lab_dir / "kubeconfig", timeout_s=10)
        lab_doc = yaml.safe_load((tmp / "lab.yaml").read_text())
        # the runner's identity: only the tiers its feature needs (`powercut rbac --user`)
        namespaces = sorted({w["namespace"] for w in lab_doc.get("workloads") or []})
        grant_tiers_to_user(admin, RUNNER_USER, RUNNER_TIERS, namespaces, prefix="mgmt-runner")
        for path, doc in lock_policy():
            admin.apply(path, doc)
        wait_for("the lock policy to refuse the lab's admin",
                 lambda: "may be written by" in try_lock_write(admin), 60, every_s=0.5)  # fmt: skip
        # the Secret's kubeconfig: the lab (as pods reach it) and only a tokenFile
        pod_kc = tmp / "pod.kubeconfig"
        lab_kc = yaml.safe_load((lab_dir / "kubeconfig").read_text())
        pod_kc.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [lab_kc["clusters"][0]],
            "users": [{"name": "runner", "user": {"tokenFile": TOKEN_PATH}}],
            "contexts": [{"name": "runner", "context": {
                "cluster": lab_kc["clusters"][0]["name"], "user": "runner"}}],
            "current-context": "runner",
        }))  # fmt: skip
        inv, files = pod_files(tmp / "lab.yaml", gateway, tmp, kubeconfig=pod_kc)
        (tmp / "inventory.yaml").write_text(yaml.safe_dump(inv))
        m = Mgmt(
            kind_dir, lab_dir, gateway, kind_dir / "kubeconfig", kubectl, helm,
            admin, kind_client, timings, image,
        )  # fmt: skip
        m.lab_inventory = tmp / "lab.yaml"
        run([kubectl, "--kubeconfig", str(m.kubeconfig), "create", "namespace", NAMESPACE])
        m.k("create", "secret", "generic", "lab-target", f"--from-file={files}")
        m.k("create", "configmap", "lab-inventory", f"--from-file={tmp / 'inventory.yaml'}")
        t = time.monotonic()
        run([helm, "install", RELEASE, str(ROOT / "deploy" / "chart"), "--kubeconfig",
             str(m.kubeconfig), "-n", NAMESPACE, "-f", str(_values(tmp, image))])  # fmt: skip
        # (not helm --wait: a target's state volume binds only when its first Job runs)
        m.k("rollout", "status", f"deploy/{RELEASE}-page", "--timeout", "300s", timeout=320)
        timings["helm install (page Ready)"] = time.monotonic() - t
        # the test's own requests as the runner: a token of the chart's ServiceAccount for
        # the lab's audience, as the kubelet projects it (the lab's JWT authenticator starts
        # in the background: wait until it names the user)
        runner_kc = token_kubeconfig(lab_dir / "kubeconfig", "runner",
                                     mgmt_token(kind_client, AUDIENCE),
                                     tmp / "runner.kubeconfig")  # fmt: skip
        m.runner_client = KubeClient.from_kubeconfig(runner_kc, timeout_s=10)
        wait_for("the lab to name the management cluster's ServiceAccount token's user",
                 lambda: whoami(m.runner_client) == RUNNER_USER, 120, every_s=1)  # fmt: skip
        wait_for("the runner's identity to be let write the lock",
                 lambda: try_lock_write(m.runner_client) == "admitted", 60, 0.5)  # fmt: skip
        timings["setup total"] = time.monotonic() - t0
        yield m
        m.lab_client.close()
        m.kind_client.close()
        m.runner_client.close()
    finally:
        if os.environ.get("POWERCUT_TEST_MGMT_KEEP") != "1":
            run([*POWERCUT, "lab", "down", "--state-dir", str(lab_dir)], check=False)
            down = run([*POWERCUT, "kind", "down", "--state-dir", str(kind_dir)], check=False,
                       timeout=600)  # fmt: skip
            SAY(f"kind down: {down.stdout.strip()} {down.stderr.strip()[-500:]}")


def chart_alerts(helm: str) -> list[dict[str, Any]]:
    """The chart's alerting rules as helm renders them (metrics.prometheusRule.enabled)."""
    out = run([helm, "template", RELEASE, str(ROOT / "deploy" / "chart"), "--set",
               "metrics.prometheusRule.enabled=true", "--kube-version", KUBERNETES.lstrip("v"),
               "--show-only",
               "templates/monitoring.yaml"]).stdout  # fmt: skip
    (rule,) = [d for d in yaml.safe_load_all(out) if d]
    return [r for g in rule["spec"]["groups"] for r in g["rules"]]


@pytest.fixture(scope="session")
def alerts(mgmt: Mgmt, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Prometheus on the host scraping the page's /metrics every second, evaluating the
    chart's alerts; yields its client."""
    from harness.inventory.slo import PrometheusSpec
    from harness.lab.prometheus import PrometheusServer, ScrapeJob
    from harness.slo.client import PrometheusClient

    job = ScrapeJob("powercut-page", [mgmt.page_target()])
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), PROMETHEUS_PORT, [job],
                              rules=chart_alerts(mgmt.helm))  # fmt: skip
    with server, PrometheusClient(PrometheusSpec(url=server.url)) as client:
        yield client
