"""``--context NAME`` (as kubectl's) on every command that talks to the target cluster, and
its guard: the chosen context's cluster must hold every node the inventory names, checked
before anything is touched (docs/connecting.md, "Another context: --context").

Two fake API servers on loopback: ``api`` holds the inventory's seven nodes (contexts
``fake``, the current one, and ``sa``, another user of the same cluster); ``other`` holds
six of them and a stranger (context ``other``); context ``down`` names a port nobody
listens on. The BMCs are fakes (``tests.fakes.power``): a refused context must reach none.
kubectl's own reading of the same contexts is compared in
``tests/lab/test_credentials_lab.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness.cli import build_parser, main
from harness.errors import ConfigError, TemporaryError
from harness.inventory import Inventory, load_inventory
from harness.journal import Journal, UndoSpec
from harness.kube.target import ContextUnchecked, aim_at_context, client_for, context_shown
from harness.longevity.run import RunOptions, options_for_resume
from harness.power.base import PowerState
from harness.report.allure_env import read_environment
from harness.session import Session, journal_path_for
from tests.fakes.api import FakeApiServer, node
from tests.fakes.power import CONTROL_PLANE, WORKERS, FakeBmcs, serve_version, write_inventory
from tests.unit.test_cli_recover import dead_server

pytestmark = pytest.mark.filterwarnings("ignore:.cgi. is deprecated:DeprecationWarning")

REPO = Path(__file__).resolve().parents[2]
ALL = CONTROL_PLANE + WORKERS


@pytest.fixture
def other() -> Iterator[FakeApiServer]:
    """Another cluster: six of the inventory's nodes (not w4) and one of its own."""
    with FakeApiServer() as server:
        for name in (*CONTROL_PLANE, "w1", "w2", "w3", "x9"):
            server.add("nodes", node(name))
        yield server


def kubeconfig(path: Path, contexts: dict[str, str]) -> Path:
    """One kubeconfig, a context per server (and a user each); the first is current."""
    names = list(contexts)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": names[0],
                "contexts": [
                    {"name": n, "context": {"cluster": f"k-{n}", "user": f"u-{n}"}} for n in names
                ],
                "clusters": [
                    {"name": f"k-{n}", "cluster": {"server": url}} for n, url in contexts.items()
                ],
                "users": [{"name": f"u-{n}", "user": {"token": f"t-{n}"}} for n in names],
            }
        )
    )
    return path


@pytest.fixture
def inv_path(
    tmp_path: Path,
    api: FakeApiServer,
    other: FakeApiServer,
    bmcs: FakeBmcs,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    serve_version(monkeypatch)
    for name in ALL:
        api.add("nodes", node(name))
    path = write_inventory(tmp_path, api.url)
    kubeconfig(
        tmp_path / "kubeconfig",
        {"fake": api.url, "sa": api.url, "other": other.url, "down": dead_server()},
    )
    return path


@pytest.fixture
def inv(inv_path: Path) -> Inventory:
    return load_inventory(inv_path)


def writes(server: FakeApiServer) -> list[str]:
    return [f"{r.method} {r.path}" for r in server.requests if r.method != "GET"]


# -- the guard ---------------------------------------------------------------------------------


def test_a_context_whose_cluster_holds_the_nodes_is_used_and_says_so(inv: Inventory) -> None:
    assert aim_at_context(inv, None) is inv
    assert aim_at_context(inv, "") is inv  # kubectl ignores an empty --context too
    assert (inv.cluster.context, inv.context_from) == (None, "current-context")
    assert context_shown(inv) == "fake (the kubeconfig's current-context)"
    aimed = aim_at_context(inv, "sa")
    assert (aimed.cluster.context, aimed.context_from) == ("sa", "--context")
    assert context_shown(aimed) == "sa (--context)"
    assert aimed.source == inv.source and aimed.node_names() == inv.node_names()
    assert inv.cluster.context is None  # the loaded inventory is left as it was
    client = client_for(aimed)
    try:
        assert client.creds.token == "t-sa"  # the chosen context's user, not the current one
    finally:
        client.close()


def test_a_context_of_another_cluster_is_refused_naming_it_its_server_and_the_missing(
    inv: Inventory, other: FakeApiServer
) -> None:
    with pytest.raises(ConfigError) as info:
        aim_at_context(inv, "other")
    said = str(info.value)
    assert info.value.field == "--context"
    assert said.startswith(f"--context: context 'other' (--context) reaches {other.url}, ")
    assert "a cluster with no Node named w4 (1 of the 7 nodes of the inventory" in said
    assert str(inv.source) in said
    assert "leave --context out to use the kubeconfig's current-context" in said
    # it only listed the Nodes
    assert [f"{r.method} {r.path}" for r in other.requests] == ["GET /api/v1/nodes"]


def test_the_advice_names_the_inventorys_own_context(inv_path: Path) -> None:
    text = inv_path.read_text().replace(
        "cluster: {kubeconfig: ", "cluster: {context: sa, kubeconfig: "
    )
    inv_path.write_text(text)
    inv = load_inventory(inv_path)
    assert context_shown(inv) == "sa (the inventory's cluster.context)"
    with pytest.raises(
        ConfigError, match="leave --context out to use the inventory's context 'sa'"
    ):
        aim_at_context(inv, "other")


def test_an_unknown_context_is_kubectls_error_with_the_valid_ones(inv: Inventory) -> None:
    with pytest.raises(ConfigError) as info:
        aim_at_context(inv, "prod")
    assert str(info.value).endswith(
        "context was not found for specified context: prod; valid: down, fake, other, sa"
    )
    assert info.value.field == "contexts"


def test_a_cluster_that_does_not_answer_is_unchecked_never_trusted(inv: Inventory) -> None:
    with pytest.raises(ContextUnchecked) as info:
        aim_at_context(inv, "down")
    assert isinstance(info.value, TemporaryError)
    assert "context 'down' (--context) reaches http://127.0.0.1:" in str(info.value)
    assert "does not answer" in str(info.value) and "nothing was touched" in str(info.value)


def test_a_cluster_that_refuses_the_node_list_is_refused(
    inv: Inventory, other: FakeApiServer
) -> None:
    other.add("nodes", node("w4"))  # it holds them all, but will not say so
    other.forbidden = {"nodes"}
    with pytest.raises(ConfigError, match=r"which refuses to list its Nodes .*403"):
        aim_at_context(inv, "other")


def test_many_missing_nodes_are_counted_past_ten(tmp_path: Path, api: FakeApiServer) -> None:
    lines = [f"  - {{name: n{i:02}, role: worker, power: {{driver: kind}}}}" for i in range(14)]
    path = tmp_path / "big.yaml"
    kubeconfig(tmp_path / "kc", {"a": api.url})
    path.write_text("cluster: {kubeconfig: kc}\nnodes:\n" + "\n".join(lines) + "\n")
    api.add("nodes", node("n00"))
    with pytest.raises(ConfigError) as info:
        aim_at_context(load_inventory(path), "a")
    assert "no Node named n01, n02, n03, n04, n05, n06, n07, n08, n09, n10 and 3 more (13 of" in (
        str(info.value)
    )


def test_every_client_of_an_aimed_inventory_checks_again(
    inv: Inventory, api: FakeApiServer
) -> None:
    """A client made later (the session's, the steps' fixtures') cannot skip the guard:
    a cluster that lost one of the nodes since is refused then."""
    aimed = aim_at_context(inv, "sa")
    api.remove("nodes", "", "w4")
    with pytest.raises(ConfigError, match="no Node named w4"):
        client_for(aimed)
    with pytest.raises(ConfigError, match="no Node named w4"):
        _ = Session(aimed, dry_run=False).client
    client_for(inv).close()  # without --context: the inventory's cluster, as always


# -- the commands ------------------------------------------------------------------------------


def test_every_command_that_talks_to_the_cluster_offers_context() -> None:
    parser = build_parser()
    offered = []
    for argv in (
        ["run"],
        ["preflight", "-i", "x"],
        ["recover", "-i", "x"],
        ["power", "off", "w1", "-i", "x"],
        ["power", "on", "w1", "-i", "x"],
        ["power", "cycle", "w1", "-i", "x"],
        ["budgets", "model", "-i", "x"],
        ["budgets", "derive", "-i", "x"],
        ["longevity", "-i", "x"],
    ):
        args = parser.parse_args([*argv, "--context", "ctx"])
        offered.append(args.context)
    assert offered == ["ctx"] * 9
    with pytest.raises(SystemExit):  # the BMCs only: no cluster to choose
        parser.parse_args(["power", "status", "w1", "-i", "x", "--context", "ctx"])


def test_power_off_through_another_cluster_touches_no_bmc(
    inv_path: Path,
    other: FakeApiServer,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["power", "off", "w1", "-i", str(inv_path), "--context", "other"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("powercut: error: --context: context 'other' (--context) reaches ")
    assert "no Node named w4" in err
    assert bmcs.calls == [] and writes(other) == []
    assert not journal_path_for(load_inventory(inv_path)).exists()


def test_power_off_and_recover_through_a_context_of_the_same_cluster(
    inv_path: Path, api: FakeApiServer, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["power", "off", "w1", "-i", str(inv_path), "--context", "sa"]) == 0
    assert bmcs.ops("off") == ["w1"]
    lease = [r for r in api.requests if "leases" in r.path and r.method != "GET"]
    assert lease and all(r.path.startswith("/apis/coordination.k8s.io/") for r in lease)
    assert main(["recover", "-i", str(inv_path), "--context", "sa"]) == 0
    assert bmcs.power["w1"] is PowerState.ON


def test_preflight_says_which_context_it_checked(
    inv_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["preflight", "-i", str(inv_path), "--no-permissions", "w1"]
    assert main([*argv, "--context", "sa"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "ok    context: sa (--context): its cluster holds every one of the inventory's 7 nodes"
    )
    assert lines[1].startswith("ok    api: http://127.0.0.1:")
    assert main([*argv, "--context", "other"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "no Node named w4" in err
    assert main([*argv, "--context", "prod"]) == 2
    assert "context was not found for specified context: prod" in capsys.readouterr().err


def owed_power_on(inv_path: Path, bmcs: FakeBmcs) -> Path:
    """A crashed run's journal: w2 powered off, its power-on owed."""
    path = journal_path_for(load_inventory(inv_path))
    with (
        Journal(path) as journal,
        journal.disruption("power_off", "node/w2", undo=UndoSpec.power_on("w2")),
    ):
        pass
    bmcs.power["w2"] = PowerState.OFF
    return path


def test_recover_refuses_another_cluster_and_powers_on_when_it_cannot_be_asked(
    inv_path: Path, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    path = owed_power_on(inv_path, bmcs)
    assert main(["recover", "-i", str(inv_path), "--context", "other"]) == 2
    assert "no Node named w4" in capsys.readouterr().err
    assert bmcs.ops("on") == []
    # a cluster that does not answer cannot be checked: the BMCs power on all the same
    # (they are the inventory's), and the Kubernetes side waits for a cluster it can check
    assert main(["recover", "-i", str(inv_path), "--context", "down"]) == 4
    out = capsys.readouterr().out
    assert out.startswith("not checked yet: context 'down' (--context) reaches ")
    assert bmcs.ops("on") == ["w2"] and bmcs.power["w2"] is PowerState.ON
    assert not [e for e in Journal.read(path) if e.owes_undo]


def test_budgets_and_longevity_refuse_another_cluster_before_anything(
    inv_path: Path, other: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["budgets", "model", "-i", str(inv_path), "--context", "other"]) == 2
    assert "no Node named w4" in capsys.readouterr().err
    out = tmp_path / "night"
    argv = ["longevity", "-i", str(inv_path), "--cycles", "1", "--out", str(out)]
    assert main([*argv, "--context", "other", "--progress", "off", "--no-report"]) == 2
    assert "no Node named w4" in capsys.readouterr().err
    assert not (out / "cycles.jsonl").exists() and writes(other) == []


def test_longevity_keeps_its_context_for_resume(tmp_path: Path) -> None:
    opts = RunOptions(inventory=tmp_path / "inv.yaml", out=tmp_path, context="sa")
    assert opts.to_json()["context"] == "sa"
    (tmp_path / "cycles.jsonl").write_text(
        '{"type": "run", "event": "start", "at": 1, "options": '
        + json.dumps(opts.to_json())
        + "}\n"
    )
    assert options_for_resume(tmp_path, {})[0].context == "sa"
    assert options_for_resume(tmp_path, {"context": "fake"})[0].context == "fake"


# -- powercut run and its pytest child ----------------------------------------------------------

FEATURE = """\
Feature: A throwaway feature
  Scenario: The inventory's context
    Then the context is recorded
"""

STEPS = """\
import os
from pathlib import Path

from pytest_bdd import scenarios, then

scenarios("fake.feature")


@then("the context is recorded")
def recorded(inventory):
    Path(os.environ["FAKE_DIR"], "context").write_text(
        f"{inventory.cluster.context} {inventory.context_from}"
    )
"""


@pytest.fixture
def steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    d = tmp_path / "steps"
    d.mkdir()
    (d / "fake.feature").write_text(FEATURE)
    (d / "test_fake.py").write_text(STEPS)
    return d


def test_run_hands_the_context_to_its_scenarios_and_reports_it(
    inv_path: Path, steps: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["run", "-i", str(inv_path), "--steps", str(steps), "--out", str(out), "--no-html"]
    assert main([*argv, "--context", "sa"]) == 0
    said = capfd.readouterr().out
    assert f"against {inv_path} (context sa (--context)) -> {out}" in said
    assert (tmp_path / "context").read_text() == "sa --context"  # the child aimed it too
    env = read_environment(out / "allure-results" / "environment.properties")
    assert env["Kubernetes context"] == "sa (--context)"


def test_run_refuses_another_cluster_before_pytest_starts(
    inv_path: Path, steps: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["run", "-i", str(inv_path), "--steps", str(steps), "--out", str(out), "--no-html"]
    assert main([*argv, "--context", "other"]) == 2
    assert "no Node named w4" in capfd.readouterr().err
    assert main([*argv, "--context", "other", "--dry-run"]) == 2
    assert not out.exists() and not (tmp_path / "context").exists()
    assert main([*argv, "--context", "sa", "--dry-run"]) == 0
    assert "nodes); context sa (--context); nothing will be touched" in capfd.readouterr().out


def test_the_pytest_plugin_checks_the_context_of_its_inventory(
    inv_path: Path, steps: Path, tmp_path: Path
) -> None:
    """pytest on its own (no `powercut run` in front): the plugin's ``--context``."""
    cmd = [sys.executable, "-m", "pytest", str(steps), "-p", "no:cacheprovider", "-p"]
    cmd += ["no:allure_pytest", "-q", "--inventory", str(inv_path), "--context"]
    refused = subprocess.run(
        [*cmd, "other"], capture_output=True, text=True, check=False, timeout=120
    )
    assert refused.returncode == 1, refused.stdout[-2000:]
    assert "ConfigError" in refused.stdout and "no Node named w4" in refused.stdout
    assert not (tmp_path / "context").exists()
    ok = subprocess.run([*cmd, "sa"], capture_output=True, text=True, check=False, timeout=120)
    assert ok.returncode == 0, ok.stdout[-2000:]
    assert (tmp_path / "context").read_text() == "sa --context"
