"""The RBAC tiers (harness/rbac.py): together exactly the shipped ClusterRole, each feature
family only what it needs, ``powercut rbac`` renders them, and preflight names a missing
verb found by SelfSubjectAccessReview before anything is touched."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.kube.lock import LEASE_NAME, LEASE_NAMESPACE
from harness.rbac import TIERS, required, review, tiers_for
from tests.role_bound import target_role

REPO = Path(__file__).resolve().parents[2]


def grants(rules: list[dict[str, object]]) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for r in rules:
        for verb in r["verbs"]:  # type: ignore[attr-defined]
            for url in r.get("nonResourceURLs", []):  # type: ignore[attr-defined]
                out.add(("", url, verb))
            for g in r.get("apiGroups", []):  # type: ignore[attr-defined]
                for res in r.get("resources", []):  # type: ignore[attr-defined]
                    out.add((g, res, verb))
    return out


def test_the_tiers_together_grant_exactly_the_shipped_role() -> None:
    tiers: set[tuple[str, str, str]] = set()
    for t in TIERS.values():
        tiers |= grants([*t.cluster_rules, *t.namespaced_rules])
    assert tiers == grants(target_role()["rules"])


def test_the_lock_is_a_role_in_its_namespace_its_writes_by_name_only() -> None:
    perms = required(["lock"], ["shop"])
    assert {p.namespace for p in perms} == {LEASE_NAMESPACE}
    named = {p.verb for p in perms if p.name == LEASE_NAME}
    assert named == {"get", "update", "patch", "delete"}
    assert {p.verb for p in perms if not p.name} == {"create"}  # a create has no name yet


def feature(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"Feature: {name}\n  Scenario: s\n{body}")
    return path


def test_tiers_follow_what_the_steps_do_not_what_they_check(tmp_path: Path) -> None:
    reboot = feature(
        tmp_path,
        "reboot.feature",
        (
            "    Given a worker node\n    When the node is power-cycled\n"
            "    Then the node's pods are Terminating within the pod-eviction budget\n"
            "    And the node is tainted unreachable within the taint-applied budget\n"
        ),
    )
    assert tiers_for([reboot]).tiers == ["read", "lock"]
    drain = feature(
        tmp_path,
        "drain.feature",
        (
            "    Given a worker node\n    When the node is drained within the drain budget\n"
            "    And the node is uncordoned\n    Then the node is Ready within 1 minute\n"
        ),
    )
    assert tiers_for([drain]).tiers == ["read", "lock", "node-patch", "evict"]
    delete = feature(
        tmp_path,
        "delete.feature",
        (
            "    Given a worker node\n    When the node is powered off\n"
            "    And the Node object is deleted\n"
            "    And the Job seed-data in namespace lab is re-run from its manifest\n"
        ),
    )
    choice = tiers_for([delete])
    assert choice.tiers == ["read", "lock", "node-delete", "workloads"]
    assert choice.namespaces == ["lab"]
    assert choice.why["node-delete"] == ["delete.feature"]


def test_every_builtin_feature_needs_at_least_read_and_lock() -> None:
    files = sorted((REPO / "features").rglob("*.feature"))
    assert files
    full = tiers_for(files).tiers
    assert set(full) == set(TIERS)  # the built-in library uses every tier
    assert tiers_for([REPO / "features" / "reboot.feature"]).tiers == ["read", "lock"]


def test_a_subresource_is_asked_as_one() -> None:
    (evict,) = required(["evict"], [])
    spec = review(evict)["spec"]["resourceAttributes"]
    assert spec == {"resource": "pods", "subresource": "eviction", "verb": "create"}


def test_powercut_rbac_renders_the_roles_the_features_need(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    drain = feature(tmp_path, "drain.feature", "    When the node is drained within 1 minute\n")
    inv = REPO / "inventories" / "kind-example.yaml"
    assert main(["rbac", "-i", str(inv), "--features", str(drain)]) == 0
    out, err = capsys.readouterr()
    docs = list(yaml.safe_load_all(out))
    names = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert names == sorted(
        [
            ("ClusterRole", "powercut-read"),
            ("ClusterRoleBinding", "powercut-read"),
            ("Role", "powercut-lock"),
            ("RoleBinding", "powercut-lock"),
            ("ClusterRole", "powercut-node-patch"),
            ("ClusterRoleBinding", "powercut-node-patch"),
            ("ClusterRole", "powercut-evict"),
            ("ClusterRoleBinding", "powercut-evict"),
        ]
    )
    bindings = [d for d in docs if d["kind"].endswith("Binding")]
    assert all(
        b["subjects"]
        == [{"kind": "ServiceAccount", "name": "powercut", "namespace": "kube-system"}]
        for b in bindings
    )
    assert "tier evict" in err and "drain.feature" in err
    assert not any(
        "nodes" in r.get("resources", []) and "delete" in r["verbs"]
        for d in docs
        for r in d.get("rules", [])
    )


def test_workload_roles_land_in_the_inventory_namespaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = feature(
        tmp_path,
        "job.feature",
        "    When the pods labelled app=web in namespace shop are restarted\n",
    )
    inv = REPO / "inventories" / "kind-example.yaml"
    assert main(["rbac", "-i", str(inv), "--features", str(job), "--user", "alice"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    roles = [
        d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "powercut-workloads"
    ]
    assert roles and all(d["metadata"]["namespace"] for d in roles)
    assert not [
        d
        for d in docs
        if d["kind"] == "ClusterRole" and any("jobs" in r.get("resources", []) for r in d["rules"])
    ]
    assert docs[1]["subjects"][0] == {
        "kind": "User",
        "apiGroup": "rbac.authorization.k8s.io",
        "name": "alice",
    }
