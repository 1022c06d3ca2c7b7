"""Two targets at once from one management cluster (issue #32): beside the conftest's lab
(target ``lab``), a second, smaller lab (target ``lab-b``: three control planes as the
scenario needs, one worker per rack) served on the same Docker network's gateway, added as
the second entry of the chart's ``targets:`` by a ``helm upgrade`` of the same release, with
its own inventory ConfigMap, its own kubeconfig Secret (a token of a ServiceAccount of that
lab holding only the scenario's tiers; that lab's lock admission policy admits only it) and
its own schedule. One Job of each target's CronJob is created at the same moment; then:

- both succeed; each lab's lock Lease (``kube-system/powercut-lock``) was held by its own
  target's runner only, both at once at some moment, and neither runner was refused a lock;
- the store holds each target's own history (a new run each) and run directory, the page
  shows each target's section with its own runs and verdict, and /metrics (read by the
  page's server, and scraped by a real Prometheus) has both targets' series;
- neither disturbed the other: each run's report (its environment and the timeline's
  nodes) names its own cluster only, each lab powered off exactly the nodes its own run
  says it did, and afterwards every node of both labs is on, Ready, uncordoned and
  untainted.

Ports: the second lab from POWERCUT_TEST_MGMT_LAB2_PORT (default the first lab's + 50). A
lab listens on a few ports spread over a thousand from its base (docs/lab.md): base+0..54,
+100..121, +200.. (IPMI), +600.. (SSH), so a second lab 50 above the first falls in the
first's gaps (checked before it starts). The second lab is taken down at the end and the
release upgraded back to the one target (unless POWERCUT_TEST_MGMT_KEEP=1, as the conftest).
"""

from __future__ import annotations

import datetime as dt
import functools
import io
import json
import os
import re
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.kube.client import KubeClient
from harness.kube.names import TAINT_CONTROL_PLANE
from harness.kube.timeline import ACTION
from harness.lab.spec import LabSpec
from harness.report.allure_env import read_environment
from tests.mgmt.conftest import (
    LAB_PORT,
    NAMESPACE,
    POWERCUT,
    RELEASE,
    ROOT,
    RUNNER_TIERS,
    RUNNER_USER,
    TARGET,
    Mgmt,
    _ephemeral,
    _values,
    lock_policy,
    pod_files,
    powercut,
    run,
    try_lock_write,
    wait_for,
)
from tests.role_bound import grant_tiers, service_account_user, token_kubeconfig

pytestmark = [pytest.mark.mgmt, pytest.mark.disruptive, pytest.mark.timeout(3600)]
LAB2_PORT = int(os.environ.get("POWERCUT_TEST_MGMT_LAB2_PORT", str(LAB_PORT + 50)))
TARGET2 = "lab-b"
#: the smallest lab the scenario runs on: three control planes (one loses power), and the
#: sample workloads (a StatefulSet of three, one per node) on one worker per rack
LAB2_RACKS, LAB2_WORKERS_PER_RACK = 3, 1
#: the second target's schedule: its own (both stay suspended: the test starts the Jobs)
SCHEDULE2 = "*/3 * * * *"
#: the two Jobs started together (neither name a prefix of the other: the lock's holder is
#: the runner pod's name, ``<job>-<suffix>/pid-N/...``)
JOBS = {TARGET: "at-once-a", TARGET2: "at-once-b"}
RUN_TIMEOUT = 1500
#: the second target's runner identity in its lab: a ServiceAccount whose token its Secret's
#: kubeconfig holds, bound to the scenario's tiers alone (tests/role_bound.py); the only
#: writer its lab's lock policy admits
LAB2_SA, LAB2_SA_NAMESPACE = "powercut", "kube-system"
LAB2_USER = service_account_user(LAB2_SA, LAB2_SA_NAMESPACE)
#: what a runner or its init container says when another run holds the target's lock
REFUSED = ("another powercut run holds the cluster lock", "taken over concurrently")


@dataclass
class Lab2:
    lab_dir: Path
    admin: KubeClient
    inventory_name: str


def _check_ports_apart(first_lab: Path, second: LabSpec) -> None:
    """The second lab's ports are none of the first's (a clear error before it starts)."""
    taken = LabSpec.load(first_lab).all_ports()
    mine = second.all_ports()
    both = sorted(set(taken) & set(mine))
    assert not both, (
        f"POWERCUT_TEST_MGMT_LAB2_PORT={LAB2_PORT}: the second lab's ports "
        f"{[f'{p} ({mine[p]}; first lab: {taken[p]})' for p in both][:5]} are the first lab's"
    )


def _runner_secret(m: Mgmt, admin: KubeClient, lab_dir: Path, lab_yaml: Path, tmp: Path) -> str:
    """As the conftest does for the first lab: the runner's ServiceAccount with the
    scenario's tiers alone, the lock's admission policy, the inventory and the Secret's files
    as a pod sees them; the ConfigMap and the Secret created. Returns the inventory's name."""
    lab_doc = yaml.safe_load(lab_yaml.read_text())
    namespaces = sorted({w["namespace"] for w in lab_doc.get("workloads") or []})
    token = grant_tiers(admin, LAB2_SA, RUNNER_TIERS, namespaces,
                        namespace=LAB2_SA_NAMESPACE, expiration_s=6 * 3600)  # fmt: skip
    runner_kc = token_kubeconfig(lab_dir / "kubeconfig", LAB2_SA, token,
                                 tmp / "runner.kubeconfig")  # fmt: skip
    runner = KubeClient.from_kubeconfig(runner_kc, timeout_s=10)
    try:
        for path, doc in lock_policy():
            # the conftest's policy, with this target's runner as the writer
            admin.apply(path, json.loads(json.dumps(doc).replace(RUNNER_USER, LAB2_USER)))
        wait_for("the lock policy to refuse the second lab's admin",
                 lambda: "may be written by" in try_lock_write(admin), 60, every_s=0.5)  # fmt: skip
        wait_for("the runner's identity to be let write the second lab's lock",
                 lambda: try_lock_write(runner) == "admitted", 60, every_s=0.5)  # fmt: skip
    finally:
        runner.close()
    inv, files = pod_files(lab_yaml, m.gateway, tmp, kubeconfig=runner_kc)
    inv["name"] = TARGET2  # shown in its reports' environment: which inventory a run read
    (tmp / "inventory.yaml").write_text(yaml.safe_dump(inv))
    m.k("create", "secret", "generic", f"{TARGET2}-target", f"--from-file={files}")
    m.k("create", "configmap", f"{TARGET2}-inventory", f"--from-file={tmp / 'inventory.yaml'}")
    return TARGET2


def _two_target_values(tmp: Path, image: str) -> Path:
    """The conftest's values with a second entry in ``targets:``: the first target's
    settings, with the second's name, inventory, kubeconfig Secret and schedule."""
    one = _values(tmp, image)
    v = yaml.safe_load(one.read_text())
    first = {k: x for k, x in v["targets"][0].items() if k != "targetToken"}  # its own kubeconfig
    second = {
        **first,
        "name": TARGET2,
        "schedule": SCHEDULE2,
        "inventory": {"configMap": f"{TARGET2}-inventory"},
        "kubeconfigSecret": f"{TARGET2}-target",
    }
    v["targets"].append(second)
    path = tmp / "values-two.yaml"
    path.write_text(yaml.safe_dump(v))
    return path


def _helm_upgrade(m: Mgmt, values: Path) -> None:
    run([m.helm, "upgrade", RELEASE, str(ROOT / "deploy" / "chart"), "--kubeconfig",
         str(m.kubeconfig), "-n", NAMESPACE, "-f", str(values)])  # fmt: skip


@pytest.fixture(scope="module")
def lab2(mgmt: Mgmt, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab2]:
    """The second lab up on the cluster's gateway, and the release upgraded to two targets."""
    m = mgmt
    tmp = tmp_path_factory.mktemp("lab-b")
    lab_dir = m.lab_dir.parent / "lab-b"
    spec = LabSpec(str(lab_dir), racks=LAB2_RACKS, workers_per_rack=LAB2_WORKERS_PER_RACK,
                   base_port=LAB2_PORT, workloads=True)  # fmt: skip
    _check_ports_apart(m.lab_dir, spec)
    keep = os.environ.get("POWERCUT_TEST_MGMT_KEEP") == "1"
    try:
        t = time.monotonic()
        powercut(
            "lab", "up", "--workloads", "--racks", str(spec.racks),
            "--workers-per-rack", str(spec.workers_per_rack), "--base-port", str(LAB2_PORT),
            "--state-dir", str(lab_dir), "--expose", m.gateway,
            "--inventory-out", str(tmp / "lab-b.yaml"), *_ephemeral(LAB2_PORT),
        )  # fmt: skip
        m.timings["second lab up"] = time.monotonic() - t
        admin = KubeClient.from_kubeconfig(lab_dir / "kubeconfig", timeout_s=10)
        name = _runner_secret(m, admin, lab_dir, tmp / "lab-b.yaml", tmp)
        t = time.monotonic()
        _helm_upgrade(m, _two_target_values(tmp, m.image))
        m.timings["helm upgrade to two targets"] = time.monotonic() - t
        yield Lab2(lab_dir, admin, name)
        admin.close()
        if not keep:
            _helm_upgrade(m, _values(tmp, m.image))  # the release as the conftest made it
    finally:
        if not keep:
            run([*POWERCUT, "lab", "down", "--state-dir", str(lab_dir)], check=False)


# -- the two runs, started together ---------------------------------------------------------


@dataclass
class LeaseLog:
    """Each lab's lock Lease sampled twice a second, by a client of its own per lab (its
    admin, who may read it): target -> the holders seen, and how many samples found both
    held at once."""

    kubeconfigs: dict[str, Path]
    holders: dict[str, set[str]] = field(default_factory=dict)
    both_held: int = 0
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _sample(self, clients: dict[str, KubeClient]) -> None:
        path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/powercut-lock"
        held = 0
        for target, client in clients.items():
            try:
                lease = client.get_or_none(path)
            except Exception as exc:  # noqa: BLE001 (a lab's API answering slowly: noted)
                self.errors.append(f"{target}: {exc}")
                continue
            holder = str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
            if holder:
                self.holders.setdefault(target, set()).add(holder)
                held += 1
        self.both_held += held == len(clients)

    def _loop(self) -> None:
        clients = {
            t: KubeClient.from_kubeconfig(kc, timeout_s=5) for t, kc in self.kubeconfigs.items()
        }
        try:
            while not self._stop.wait(0.5):
                self._sample(clients)
        finally:
            for c in clients.values():
                c.close()

    def __enter__(self) -> LeaseLog:
        self._thread = threading.Thread(target=self._loop, name="lease-log", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)


def _create_jobs_together(m: Mgmt) -> dict[str, str]:
    """``kubectl create job --from=cronjob/...`` for both targets at the same moment (two
    processes started side by side); returns target -> the Job's creation timestamp."""
    base = [m.kubectl, "--kubeconfig", str(m.kubeconfig), "-n", NAMESPACE, "create", "job"]
    procs = {}
    for t, job in JOBS.items():
        cmd = [*base, f"--from=cronjob/{RELEASE}-{t}", job]
        procs[t] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for t, p in procs.items():
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, f"creating {JOBS[t]}: {out}{err}"
    return {t: str(m.job(job)["metadata"]["creationTimestamp"]) for t, job in JOBS.items()}


@dataclass
class Together:
    created: dict[str, str]
    leases: LeaseLog
    history_before: dict[str, list[dict[str, Any]]]
    progress_before: dict[str, int]
    seconds: float


def history_of(m: Mgmt, target: str) -> list[dict[str, Any]]:
    text = m.k("exec", f"deploy/{RELEASE}-page", "--", "cat", f"/store/{target}/history.jsonl",
               check=False)  # fmt: skip
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _progress_log(lab_dir: Path) -> Path:
    return lab_dir / "progress.log"


@pytest.fixture(scope="module")
def together(mgmt: Mgmt, lab2: Lab2) -> Together:
    m = mgmt
    before = {t: history_of(m, t) for t in JOBS}
    labs = {TARGET: m.lab_dir, TARGET2: lab2.lab_dir}
    progress = {t: _progress_log(d).stat().st_size for t, d in labs.items()}
    t0 = time.monotonic()
    with LeaseLog({t: d / "kubeconfig" for t, d in labs.items()}) as leases:
        created = _create_jobs_together(m)
        for job in JOBS.values():
            wait_for(f"{job} to finish", functools.partial(m.job_done, job), RUN_TIMEOUT, 5)
    seconds = time.monotonic() - t0
    m.timings["two targets' runs at once"] = seconds
    m.timings["both locks held at once (samples / 2)"] = leases.both_held / 2
    print("lock holders seen:", {t: sorted(h) for t, h in leases.holders.items()})
    return Together(created, leases, before, progress, seconds)


# -- what the runs left --------------------------------------------------------------------


def _new_run(m: Mgmt, tg: Together, target: str) -> dict[str, Any]:
    """The target's one new history line (its run of this test)."""
    before = {r["run_id"] for r in tg.history_before[target]}
    new = [r for r in history_of(m, target) if r["run_id"] not in before]
    assert len(new) == 1, (target, new)
    return new[0]


def _run_results(m: Mgmt, target: str, run_id: str, dest: Path) -> Path:
    """The run's allure-results copied out of the store (tar through the page's pod)."""
    p = subprocess.run(
        [m.kubectl, "--kubeconfig", str(m.kubeconfig), "-n", NAMESPACE, "exec",
         f"deploy/{RELEASE}-page", "--", "tar", "-C", f"/store/{target}/runs/{run_id}", "-cf",
         "-", "allure-results"],
        capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    with tarfile.open(fileobj=io.BytesIO(p.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "allure-results"


def _timelines(results: Path) -> list[dict[str, Any]]:
    out = []
    for f in results.glob("*-attachment.json"):
        try:
            doc = json.loads(f.read_text())
        except ValueError:  # an attachment of another shape: not a timeline
            continue
        if isinstance(doc, dict) and "transitions" in doc and "start_mono" in doc:
            out.append(doc)
    return out


def _what_the_report_names(results: Path) -> tuple[dict[str, str], set[str], set[str]]:
    """The report's environment, the nodes its timelines saw and those it powered off."""
    nodes: set[str] = set()
    off: set[str] = set()
    timelines = _timelines(results)
    assert timelines, f"no timeline in {sorted(p.name for p in results.iterdir())[:20]}"
    for doc in timelines:
        for t in doc["transitions"]:
            if t["kind"] == "Node":
                nodes.add(t["name"])
            elif t["kind"] == ACTION and t["transition"] == "power-off sent":
                off.add(t["name"])
    return read_environment(results / "environment.properties"), nodes, off


def _powered_off_since(lab_dir: Path, offset: int) -> set[str]:
    """Nodes the lab itself powered off (its progress log) after ``offset`` bytes."""
    with _progress_log(lab_dir).open("rb") as fh:
        fh.seek(offset)
        text = fh.read().decode()
    return set(re.findall(r"power off (\S+) \(", text))


def _left_disrupted(lab_dir: Path, client: KubeClient) -> list[str]:
    """What is not back in a lab: nodes off, NotReady, cordoned or tainted (but the
    control-plane nodes' own NoSchedule taint)."""
    state = json.loads((lab_dir / "state.json").read_text())
    left = [f"{n} off" for n, s in state.get("power", {}).items() if s != "on"]
    items, _ = client.list("/api/v1/nodes")
    for n in items:
        name = n["metadata"]["name"]
        ready = [c for c in n["status"].get("conditions") or [] if c["type"] == "Ready"]
        if not ready or ready[0]["status"] != "True":
            left.append(f"{name} not Ready")
        if n["spec"].get("unschedulable"):
            left.append(f"{name} cordoned")
        for t in n["spec"].get("taints") or []:
            if t["key"] != TAINT_CONTROL_PLANE:
                left.append(f"{name} tainted {t['key']}:{t['effect']}")
    return left


def _seconds_apart(stamps: list[str]) -> float:
    times = [dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() for s in stamps]
    return max(times) - min(times)


def _nothing_left(lab_dir: Path, client: KubeClient) -> bool:
    """True when nothing is left disrupted in the lab; else an error naming what is (the
    polling wait shows the last one)."""
    left = _left_disrupted(lab_dir, client)
    if left:
        raise AssertionError(f"left disrupted: {left}")
    return True


def _page_sections(page: str) -> dict[str, tuple[str, str]]:
    """The page's sections: target -> (its last verdict, the HTML of its section)."""
    heads = list(re.finditer(r"<h2 id='([^']+)'>.*?last: <span class='[^']*'>([^<]+)</span>",
                             page))  # fmt: skip
    out = {}
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(page)
        out[h.group(1)] = (h.group(2), page[h.start() : end])
    return out


def _page_get(m: Mgmt, path: str) -> str:
    return m.in_page(
        "python3", "-c",
        f"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8080{path}')"
        ".read().decode())",
    )  # fmt: skip


# -- the tests -----------------------------------------------------------------------------


def test_the_chart_gives_each_target_its_own_cronjob_volume_secret_and_schedule(
    mgmt: Mgmt, lab2: Lab2
) -> None:
    m = mgmt
    cronjobs = {c["metadata"]["name"]: c for c in m.kj("get", "cronjobs")["items"]}
    for target, secret, schedule in ((TARGET, "lab-target", "*/1 * * * *"),
                                     (TARGET2, f"{TARGET2}-target", SCHEDULE2)):  # fmt: skip
        cj = cronjobs[f"{RELEASE}-{target}"]
        assert cj["spec"]["schedule"] == schedule
        assert f"{RELEASE}-{target}-recover" in cronjobs
        pod = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        vols = {v["name"]: v for v in pod["volumes"]}
        assert vols["state"]["persistentVolumeClaim"]["claimName"] == f"{RELEASE}-{target}-state"
        assert vols["target"]["secret"]["secretName"] == secret
        assert vols["inventory"]["configMap"]["name"] == f"{target}-inventory"
        args = pod["containers"][0]["args"]
        assert args[args.index("--target") + 1] == target


def test_both_runs_succeed_at_once_each_holding_its_own_clusters_lock(
    mgmt: Mgmt, together: Together
) -> None:
    m, tg = mgmt, together
    assert _seconds_apart(list(tg.created.values())) <= 5, tg.created
    for target, job in JOBS.items():
        assert m.job_done(job) == "succeeded", (target, m.logs(job, "runner")[-3000:])
        logs = m.logs(job, "recover") + m.logs(job, "runner")
        refused = [r for r in REFUSED if r in logs]
        assert not refused, (target, refused, logs[-3000:])
    # each lab's lock was held by its own target's runner, never by the other's
    for target, job in JOBS.items():
        seen = tg.leases.holders.get(target, set())
        assert seen, f"{target}'s lab never had its lock held ({tg.leases.errors[-3:]})"
        assert all(h.startswith(f"{job}-") for h in seen), (target, seen)
    assert tg.leases.both_held > 0, (
        "the two runs never held their locks at the same moment",
        tg.leases.holders,
    )
    # and the runs' own records overlap in time
    a, b = (_new_run(m, tg, t) for t in JOBS)
    assert a["started"] < b["finished"] and b["started"] < a["finished"], (a, b)


def test_each_target_has_its_own_history_page_row_and_metrics(
    mgmt: Mgmt, together: Together, alerts: Any
) -> None:
    m, tg = mgmt, together
    runs = {t: _new_run(m, tg, t) for t in JOBS}
    assert len(history_of(m, TARGET2)) == len(tg.history_before[TARGET2]) + 1
    for target, r in runs.items():
        assert r["target"] == target and r["verdict"] == "passed", r
        assert r.get("exit_code") == 0, r
        listing = m.in_page("ls", f"/store/{target}/runs/{r['run_id']}")
        assert "allure-results" in listing and ("report.html" in listing or "index.html" in listing)
    # the page: a section per target, its own runs in it, its own verdict
    sections = _page_sections(_page_get(m, "/"))
    assert set(JOBS) <= set(sections), list(sections)
    for target, r in runs.items():
        verdict, html = sections[target]
        assert verdict == "passed", (target, verdict)
        assert r["run_id"] in html
        other = next(t for t in JOBS if t != target)
        assert runs[other]["run_id"] not in html, (target, runs[other]["run_id"])
    # /metrics: both targets' series, each with its own last run
    metrics = _page_get(m, "/metrics")
    for target in JOBS:
        assert f'powercut_last_run_verdict{{target="{target}",verdict="passed"}} 1' in metrics
        assert f'powercut_last_run_exit_code{{target="{target}"}} 0' in metrics
        assert f'powercut_store_read_errors{{target="{target}"}} 0' in metrics

    def scraped() -> set[str]:
        series = alerts.query('powercut_last_run_verdict{verdict="passed"} == 1')
        return {str(s.labels["target"]) for s in series}

    wait_for("Prometheus to scrape both targets' verdicts", lambda: set(JOBS) <= scraped(), 60)


def test_neither_run_disturbed_the_other_target(
    mgmt: Mgmt, lab2: Lab2, together: Together, tmp_path: Path
) -> None:
    m, tg = mgmt, together
    first_inv = yaml.safe_load(m.kj("get", "configmap", "lab-inventory")["data"]["inventory.yaml"])
    labs = {
        TARGET: (m.lab_dir, m.lab_client, str(first_inv.get("name") or "")),
        TARGET2: (lab2.lab_dir, lab2.admin, lab2.inventory_name),
    }
    cluster_nodes = {
        t: {n["metadata"]["name"] for n in client.list("/api/v1/nodes")[0]}
        for t, (_, client, _) in labs.items()
    }
    assert cluster_nodes[TARGET] != cluster_nodes[TARGET2], cluster_nodes
    for target, (lab_dir, _client, inventory) in labs.items():
        r = _new_run(m, tg, target)
        results = _run_results(m, target, str(r["run_id"]), tmp_path / target)
        env, seen, off = _what_the_report_names(results)
        # the report describes its own cluster: its inventory, its size, its nodes only
        assert env.get("Inventory") == inventory, (target, env)
        assert env.get("Nodes") == str(len(cluster_nodes[target])), (target, env)
        assert seen == cluster_nodes[target], (target, sorted(seen ^ cluster_nodes[target]))
        # the nodes it powered off were powered off by its own lab, and no others there
        assert off, f"{target}'s run powered nothing off"
        assert _powered_off_since(lab_dir, tg.progress_before[target]) == off, target
    for target, (lab_dir, client, _) in labs.items():
        wait_for(f"every node of {target}'s lab on, Ready, uncordoned, untainted",
                 functools.partial(_nothing_left, lab_dir, client), 180)  # fmt: skip
    print("two-targets timings (s):", json.dumps({k: round(v) for k, v in m.timings.items()}))
