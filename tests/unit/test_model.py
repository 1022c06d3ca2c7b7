"""The cluster's own model (harness.model): read from a fake API server over real HTTP,
the bounds it predicts, impossible budgets refused, budget files derived, phases judged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.budgets import PROFILES, Budgets
from harness.errors import ConfigError
from harness.lab.controlplane import cluster_configuration
from harness.lab.spec import LabSpec
from harness.model import ClusterModel, load_model, read_model
from harness.model.derive import Margin, derive_text, parse_margin
from harness.model.judge import budget_of_phase, judge
from harness.model.refuse import budgets_named, refusals
from harness.model.settings import go_duration
from tests.fakes.api import FakeApiServer, node, pod


class _W:
    """A workload of the inventory, as harness.inventory gives it."""

    def __init__(self, kind: str, name: str, namespace: str = "lab") -> None:
        self.kind, self.name, self.namespace, self.selector = kind, name, namespace, None


def _workload(api: FakeApiServer, resource: str, name: str, **spec: Any) -> None:
    api.add(
        resource,
        {
            "metadata": {"name": name, "namespace": "lab"},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {}},
                **spec,
            },
        },
    )


def _pod(api: FakeApiServer, name: str, app: str, node_name: str, seconds: int | None) -> None:
    p = pod(name, node_name=node_name, namespace="lab", labels={"app": app})
    tol: dict[str, Any] = {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
    }
    if seconds is not None:
        tol["tolerationSeconds"] = seconds
    p["spec"]["tolerations"] = [tol]
    api.add("pods", p)


@pytest.fixture
def api() -> Any:
    with FakeApiServer() as server:
        for i, zone in enumerate(["a", "a", "a", "b"]):
            n = node(f"w{i}")
            n["metadata"].setdefault("labels", {})["topology.kubernetes.io/zone"] = zone
            server.add("nodes", n)
            server.add(
                "leases",
                {
                    "metadata": {"name": f"w{i}", "namespace": "kube-node-lease"},
                    "spec": {"leaseDurationSeconds": 40},
                },
            )
        _workload(server, "deployments", "web", replicas=3)
        _workload(server, "statefulsets", "quorum", replicas=3, podManagementPolicy="Parallel")
        _workload(server, "daemonsets", "node-agent")
        for i in range(3):
            _pod(server, f"web-{i}", "web", f"w{i}", 300)
            _pod(server, f"quorum-{i}", "quorum", f"w{i}", 30)
            _pod(server, f"node-agent-{i}", "node-agent", f"w{i}", None)
        server.add(
            "poddisruptionbudgets",
            {
                "metadata": {"name": "web", "namespace": "lab"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            },
        )
        yield server


WORKLOADS = [_W("Deployment", "web"), _W("StatefulSet", "quorum"), _W("DaemonSet", "node-agent")]


def test_go_durations_read_as_components_write_them() -> None:
    assert go_duration("40s") == 40 and go_duration("1m0s") == 60 and go_duration("500ms") == 0.5
    assert go_duration("300") == 300 and go_duration("soon") is None and go_duration("5x") is None


def test_without_published_flags_the_defaults_are_assumed_and_leases_read(
    api: FakeApiServer,
) -> None:
    model = read_model(api.client(), WORKLOADS)
    grace = model.settings["node-monitor-grace-period"]
    assert grace.assumed and grace.value == 50 and "default" in grace.source
    lease = model.settings["nodeLeaseDurationSeconds"]
    assert not lease.assumed and lease.value == 40 and "4 of 4 Leases" in lease.source
    b = model.bounds["node_not_ready"]
    # NotReady 50 s after the last renewal (every 10 s), seen within a 5 s monitor period
    assert (b.low_s, b.high_s) == (40, 57)
    assert b.setting == "node-monitor-grace-period" and "assumed" in b.source
    assert list(model.zones) == [3, 1]
    assert model.bounds["taint_applied"].high_s == 5 + 2 * 10 + 2  # zone a: 3 nodes at 0.1/s


def test_kubeadm_configuration_as_the_lab_publishes_it_is_read_not_assumed(
    api: FakeApiServer, tmp_path: Path
) -> None:
    spec = LabSpec(state_dir=str(tmp_path), timings="fast")
    cm = cluster_configuration(spec, next(n for n in spec.nodes() if n.role == "control-plane"))
    api.add("configmaps", cm)
    model = read_model(api.client(), WORKLOADS)
    grace = model.settings["node-monitor-grace-period"]
    assert not grace.assumed and grace.value == 12
    assert "kubeadm-config" in grace.source and "--node-monitor-grace-period=12s" in grace.source
    assert model.settings["default-unreachable-toleration-seconds"].value == 10
    assert model.settings["node-monitor-period"].value == 1


def test_a_static_pods_flags_win_over_kubeadm_config(api: FakeApiServer) -> None:
    p = pod(
        "kube-controller-manager-cp1",
        node_name="cp1",
        namespace="kube-system",
        labels={"component": "kube-controller-manager"},
    )
    p["spec"]["containers"] = [
        {
            "name": "kcm",
            "command": [
                "kube-controller-manager",
                "--node-monitor-grace-period=20s",
                "--node-eviction-rate=0.5",
            ],
        }
    ]
    api.add("pods", p)
    model = read_model(api.client(), WORKLOADS)
    grace = model.settings["node-monitor-grace-period"]
    assert (
        grace.value == 20 and "static pod kube-system/kube-controller-manager-cp1" in grace.source
    )
    assert model.settings["node-eviction-rate"].value == 0.5


def test_workloads_tolerations_semantics_and_pdb(api: FakeApiServer) -> None:
    model = read_model(api.client(), WORKLOADS)
    by = {w.ref: w for w in model.workloads}
    web, quorum, agent = by["lab/web"], by["lab/quorum"], by["lab/node-agent"]
    assert web.unreachable_s == 300 and "3 pod(s)" in web.source
    assert web.pdb == "lab/web (minAvailable 2)" and "ReplicaSet" in web.semantics
    assert quorum.unreachable_s == 30 and quorum.pod_management_policy == "Parallel"
    assert "never replaced" in quorum.semantics and "Parallel" in quorum.semantics
    assert agent.unreachable_s == float("inf")
    eviction = model.bounds["pod_eviction"]  # the DaemonSet is never evicted: not counted
    assert eviction.low_s == 300 and eviction.setting == "lab/web's unreachable tolerationSeconds"


def test_a_budget_below_the_model_is_refused_naming_the_setting(
    api: FakeApiServer, tmp_path: Path
) -> None:
    feature = tmp_path / "x.feature"
    feature.write_text(
        "Feature: f\n  Scenario: s\n    # the recovery budget, in a comment: not named\n"
        "    Then every pod is evicted within the pod-eviction budget\n"
        "    And the node is NotReady within the node-not-ready budget\n"
    )
    assert set(budgets_named([feature])) == {"pod_eviction", "node_not_ready"}
    fast = PROFILES["fast"]  # pod-eviction 25 s, node-not-ready 20 s
    # a default assumed (the grace period not shown to these credentials) refuses nothing
    assumed = read_model(api.client(), WORKLOADS)
    assert not [r for r in refusals(assumed, fast, [feature]) if "node-not-ready" in r]
    p = pod(
        "kube-controller-manager-cp1",
        node_name="cp1",
        namespace="kube-system",
        labels={"component": "kube-controller-manager"},
    )
    p["spec"]["containers"] = [
        {
            "name": "kcm",
            "command": [
                "kube-controller-manager",
                "--node-monitor-grace-period=40s",
                "--node-monitor-period=5s",
            ],
        }
    ]
    api.add("pods", p)
    model = read_model(api.client(), WORKLOADS)
    refused = refusals(model, fast, [feature])
    assert len(refused) == 2
    assert refused[0].startswith(
        f"{feature}:4: lab/web's pods tolerate unreachable for 300 s, "
        "so pod-eviction 25 s cannot hold"
    )
    assert "lower lab/web's unreachable tolerationSeconds or raise the budget" in refused[0]
    assert (
        "node-not-ready 20 s cannot hold" in refused[1]
        and "node-monitor-grace-period" in refused[1]
    )
    # the upstream profile's figures can hold
    assert refusals(model, PROFILES["upstream"], [feature]) == []


def test_derived_budgets_load_as_an_inventory_budgets_mapping_and_hold(api: FakeApiServer) -> None:
    model = read_model(api.client(), WORKLOADS)
    text = derive_text(
        model, PROFILES["upstream"], "upstream", parse_margin("10%,5s"), source="lab"
    )
    doc = yaml.safe_load(text)
    assert doc["profile"] == "upstream"
    derived = PROFILES["upstream"].with_overrides(doc["overrides"])
    assert derived.node_not_ready == 68  # ceil(57 * 1.1 + 5)
    assert derived.pod_eviction == 339  # ceil(303 * 1.1 + 5)
    assert model.impossible(derived) == []
    assert "# dominated by node-monitor-grace-period" in text
    assert "# drain: not modelled, profile's 300 s kept" in text
    with pytest.raises(ConfigError, match="margin 'lots' not understood"):
        parse_margin("lots")
    assert str(Margin(0.25, 0)) == "25%"


def test_the_model_kept_with_a_run_reads_back(api: FakeApiServer, tmp_path: Path) -> None:
    model = read_model(api.client(), WORKLOADS)
    model.save(tmp_path)
    again = load_model(tmp_path)
    assert again is not None and again.to_json() == model.to_json()
    assert again.workloads[2].unreachable_s == float("inf")
    assert load_model(tmp_path / "nothing") is None


def test_phases_are_judged_against_their_bound_apart_from_the_budget(api: FakeApiServer) -> None:
    model = read_model(api.client(), WORKLOADS)
    budgets = PROFILES["fast"].as_dict()
    assert budget_of_phase("w-b3 NotReady", 30.0, budgets) == "control_plane_node_not_ready"
    assert budget_of_phase("w-b3 NotReady", 20.0, budgets) == "node_not_ready"
    assert budget_of_phase("lab-vol-1 released by w-b3", 420.0) == "volume_detach"
    assert budget_of_phase("harness time", None) is None
    within = judge(model, {"phase": "w1 NotReady", "seconds": 50.0, "budget_s": 75.0})
    assert within is not None and not within.deviation and within.model_text == "40-57"
    beyond = judge(model, {"phase": "w1 NotReady", "seconds": 61.0, "budget_s": 75.0})
    assert beyond is not None and beyond.deviation  # inside its budget, beyond Kubernetes'
    assert judge(model, {"phase": "w1 pods", "value": 3}) is None
    unmodelled = judge(None, {"phase": "w1 NotReady", "seconds": 61.0, "budget_s": 75.0})
    assert unmodelled is not None and not unmodelled.deviation and unmodelled.model_text == "-"


def test_an_unknown_or_empty_cluster_still_gives_a_model(tmp_path: Path) -> None:
    with FakeApiServer() as server:
        model = read_model(server.client(), [_W("Deployment", "gone")])
    assert model.version == "unknown" and model.workloads == []
    assert all(s.assumed for s in model.settings.values())
    assert model.bounds["pod_eviction"].low_s == 300  # the API server's default, assumed
    assert isinstance(ClusterModel.from_json(model.to_json()), ClusterModel)
    assert Budgets().pod_eviction >= model.bounds["pod_eviction"].low_s


# -- powercut run and --dry-run refuse an impossible budget before anything is touched ------

FEATURE = """\
Feature: A throwaway feature
  Scenario: Pods leave a dead node
    Then the outcome is pass
"""

STEPS = """\
from pathlib import Path
import os
from pytest_bdd import parsers, scenarios, then

scenarios("fake.feature")


@then(parsers.parse("the outcome is {what}"))
def outcome(what):
    Path(os.environ["FAKE_DIR"], "ran").write_text("yes")
"""


@pytest.mark.parametrize("dry_run", [True, False])
def test_run_refuses_an_impossible_budget_before_touching(
    api: FakeApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    dry_run: bool,
) -> None:
    from harness.cli import main
    from harness.cli.run import EXIT_HARNESS
    from tests.fakes.power import write_kubeconfig

    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url)
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f"name: fake\ncluster: {{kubeconfig: {kubeconfig}}}\n"
        "nodes:\n  - {name: w1, role: worker, power: {driver: kind}}\n"
        "workloads:\n  - {namespace: lab, kind: Deployment, name: web}\n"
        "budgets: {profile: fast}\n"  # pod-eviction 25 s; web tolerates unreachable 300 s
    )
    steps = tmp_path / "steps"
    steps.mkdir()
    (steps / "fake.feature").write_text(FEATURE)
    (steps / "test_fake.py").write_text(STEPS)
    before = len(api.requests)
    argv = ["run", "-i", str(inv), "--steps", str(steps), "--out", str(tmp_path / "out")]
    assert main([*argv, "--no-html", *(["--dry-run"] if dry_run else [])]) == EXIT_HARNESS
    err = capfd.readouterr().err
    assert "budgets below what this cluster's own settings allow (nothing was touched)" in err
    assert "lab/web's pods tolerate unreachable for 300 s, so pod-eviction 25 s cannot hold" in err
    assert ".feature:" in err  # where the budget is named
    assert not (tmp_path / "out").exists() and not (tmp_path / "ran").exists()
    assert {r.method for r in list(api.requests)[before:]} == {"GET"}  # read, never written


def test_the_kubelets_settings_come_from_the_first_ready_worker_whose_configz_answers(
    api: FakeApiServer,
) -> None:
    """w0's kubelet answers no configz (down, or configz off): w1's is read, not the
    kubelet's defaults assumed; a NotReady worker is asked last, a control plane after it."""
    api.configz["w1"] = {"shutdownGracePeriod": "30s", "shutdownGracePeriodCriticalPods": "10s"}
    api.configz["w2"] = {"shutdownGracePeriod": "99s"}
    model = read_model(api.client(), WORKLOADS)
    grace = model.settings["shutdownGracePeriod"]
    assert not grace.assumed and grace.value == 30, grace
    assert "configz of node w1" in grace.source
    assert model.settings["shutdownGracePeriodCriticalPods"].value == 10
    asked = [r.path for r in api.requests if r.path.endswith("/proxy/configz")]
    assert asked == ["/api/v1/nodes/w0/proxy/configz", "/api/v1/nodes/w1/proxy/configz"]


def test_configz_is_asked_of_ready_workers_first_and_of_three_nodes_at_most() -> None:
    from harness.model.read import configz_candidates

    cp = node("cp0")
    cp["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = ""
    nodes = [cp, node("w-down", ready="False"), node("w0"), node("w1"), node("w2")]
    assert configz_candidates(nodes) == ["w0", "w1", "w2"]
    assert configz_candidates(nodes[:3]) == ["w0", "w-down", "cp0"]


def test_with_no_configz_anywhere_the_kubelets_defaults_are_assumed(api: FakeApiServer) -> None:
    model = read_model(api.client(), WORKLOADS)
    assert model.settings["shutdownGracePeriod"].assumed
    asked = [r.path for r in api.requests if r.path.endswith("/proxy/configz")]
    assert len(asked) == 3  # CONFIGZ_TRIES, then the defaults
