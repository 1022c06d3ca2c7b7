"""powercut with only the permissions of deploy/rbac/target-clusterrole.yaml (#22 item 4),
and features from outside the checkout (#22 item 1), on the lab's real API server (RBAC on).

A ServiceAccount is bound to the role alone; its token comes from the TokenRequest API and
goes into a kubeconfig of its own, which a copy of the lab's inventory names. Through it,
``powercut run``, started from this checkout (its pyproject.toml has pytest settings of its
own), runs a reboot and a planned maintenance whose feature files lie in a directory outside
the checkout. Then the same with a role that lacks one verb (``create`` on
``pods/eviction``): the drain's first eviction is refused, and the run reports that once, as
a harness error naming the verb and resource, never as a failure of the cluster, with the
node uncordoned again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli.run import EXIT_HARNESS, EXIT_PASSED
from harness.inventory import load_inventory
from harness.journal import Journal
from harness.kube.client import Forbidden, KubeClient
from harness.session import journal_path_for
from tests.lab.conftest import POWERCUT, LabHandle
from tests.role_bound import grant, revoke, target_role, token_kubeconfig

pytestmark = [pytest.mark.lab, pytest.mark.disruptive, pytest.mark.serial]

REPO = Path(__file__).resolve().parents[2]
#: the two scenarios (pytest-bdd test names) run through the role
REBOOT = "test_a_worker_is_rebooted_through_its_bmc"
DRAIN = "test_a_worker_is_drained_powercycled_through_its_bmc_and_uncordoned"


def inventory_with_token(lab: LabHandle, name: str, token: str) -> Path:
    """A kubeconfig holding only the token (the lab's server and CA), and a copy of the lab's
    inventory naming it, beside the original so its relative paths still hold."""
    kubeconfig = token_kubeconfig(
        Path(lab.inventory.cluster.kubeconfig),
        name,
        token,
        lab.inventory_path.parent / f"{name}.kubeconfig",
    )
    inv = yaml.safe_load(lab.inventory_path.read_text())
    inv["cluster"] = {"kubeconfig": str(kubeconfig)}
    path = lab.inventory_path.parent / f"{name}.yaml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two features, copied to a directory outside the checkout."""
    d = tmp_path_factory.mktemp("shared") / "failure-cases"
    d.mkdir()
    for name in ("reboot.feature", "planned_maintenance.feature"):
        shutil.copy(REPO / "features" / name, d / name)
    assert not d.resolve().is_relative_to(REPO)
    return d


def run(inv: Path, features: Path, out: Path, select: str) -> subprocess.CompletedProcess[str]:
    """``powercut run`` from the checkout, only the features of ``features``."""
    return subprocess.run(
        [
            *POWERCUT,
            "run",
            "-i",
            str(inv),
            "--features",
            str(features),
            "--no-builtin",
            "--out",
            str(out),
            "--no-html",
            "--progress",
            "plain",
            "--",
            "-k",
            select,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )


def results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (out / "allure-results").glob("*-result.json")]


@pytest.fixture
def role() -> dict[str, Any]:
    return target_role()


@pytest.fixture
def granted(lab: LabHandle) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        revoke(lab.client, name)


def test_features_from_outside_the_checkout_run_with_only_the_role(
    lab: LabHandle,
    elsewhere: Path,
    role: dict[str, Any],
    granted: list[str],
    tmp_path: Path,
) -> None:
    granted.append("powercut-rbac-test")
    inv = inventory_with_token(
        lab, "powercut-rbac-test", grant(lab.client, "powercut-rbac-test", role)
    )
    # the token holds the role and nothing else: what it does not grant is refused
    limited = KubeClient.from_kubeconfig(load_inventory(inv).cluster.kubeconfig)
    with pytest.raises(Forbidden):
        limited.list("/api/v1/secrets")
    assert limited.list("/api/v1/nodes")[0]
    limited.close()
    out = tmp_path / "out"
    proc = run(inv, elsewhere, out, f"{REBOOT} or {DRAIN}")
    log = (out / "run.log").read_text() if (out / "run.log").exists() else ""
    assert proc.returncode == EXIT_PASSED, proc.stdout + proc.stderr + log[-4000:]
    found = results(out)
    assert sorted(r["status"] for r in found) == ["passed", "passed"], [
        (r["name"], r.get("statusDetails")) for r in found
    ]
    # outside pytest's rootdir: the directory holding the file, then the feature's name
    assert {r["titlePath"][0] for r in found} == {"failure-cases"}
    assert "Forbidden" not in log


def test_a_missing_verb_is_one_clear_error_not_a_cluster_failure(
    lab: LabHandle,
    elsewhere: Path,
    role: dict[str, Any],
    granted: list[str],
    tmp_path: Path,
) -> None:
    rules = [r for r in role["rules"] if r.get("resources") != ["pods/eviction"]]
    assert len(rules) == len(role["rules"]) - 1
    granted.append("powercut-rbac-no-evict")
    token = grant(lab.client, "powercut-rbac-no-evict", {**role, "rules": rules})
    inv = inventory_with_token(lab, "powercut-rbac-no-evict", token)
    out = tmp_path / "out"
    proc = run(inv, elsewhere, out, DRAIN)
    said = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_HARNESS, said
    (result,) = results(out)
    assert result["status"] == "broken", result.get("statusDetails")
    message = result["statusDetails"]["message"]
    assert "Forbidden" in message
    assert "lack the permission create on 'pods/eviction' in the core API group" in message
    assert message.count("403 Forbidden") == 1, message  # said once, not once per retry
    # the summary: one harness error, no failure of the cluster
    assert "1 scenario: 1 broken" in said, said
    cases = list(ET.parse(out / "junit.xml").getroot().iter("testcase"))  # noqa: S314 (ours)
    assert len(cases) == 1
    # nothing left behind: no undo owed, every node schedulable
    journal = journal_path_for(load_inventory(inv))
    if journal.exists():
        with Journal(journal) as j:
            assert not j.pending_undos()
    nodes, _ = lab.client.list("/api/v1/nodes")
    assert not [n["metadata"]["name"] for n in nodes if n.get("spec", {}).get("unschedulable")]
