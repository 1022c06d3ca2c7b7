"""`powercut preflight` and `powercut power off|on|cycle` end to end, against a fake API
server and fake BMCs: pre-flight first, one line per node as it is acknowledged, the
journal and the blast radius across invocations."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.inventory import load_inventory
from harness.journal import EntryState, Journal
from harness.kube.lock import LEASE_NAME, LEASE_NAMESPACE
from harness.power.base import PowerState
from harness.session import journal_path_for
from tests.fakes.api import FakeApiServer, set_ready
from tests.fakes.power import FakeBmcs, add_nodes, serve_version, write_inventory

pytestmark = pytest.mark.filterwarnings("ignore:.cgi. is deprecated:DeprecationWarning")


@pytest.fixture
def cluster(api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> FakeApiServer:
    serve_version(monkeypatch)
    add_nodes(api)
    return api


@pytest.fixture
def inv(tmp_path: Path, cluster: FakeApiServer, bmcs: FakeBmcs) -> str:
    return str(write_inventory(tmp_path, cluster.url))


def journal(inv: str) -> list[tuple[str, str, EntryState]]:
    path = journal_path_for(load_inventory(inv))
    return [(e.action, e.target, e.state) for e in Journal.read(path)] if path.exists() else []


def not_ready(api: FakeApiServer, name: str) -> None:
    def change(n: dict[str, Any]) -> None:
        set_ready(n, "Unknown")
        n["status"]["conditions"][0]["reason"] = "NodeStatusUnknown"

    api.update("nodes", "", name, change)


# -- powercut preflight ----------------------------------------------------------------------


def test_preflight_prints_one_line_per_check_and_exits_0(
    inv: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["preflight", "-i", inv, "w1", "w2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "ok    api",
        "ok    permissions",
        "ok    node w1",
        "ok    ready w1",
        "ok    bmc w1",
        "ok    node w2",
        "ok    ready w2",
        "ok    bmc w2",
    ]


def test_preflight_without_nodes_checks_every_node_and_exits_2_on_a_failure(
    inv: str, cluster: FakeApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    not_ready(cluster, "w4")
    assert main(["preflight", "-i", inv]) == 2
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 2 + 3 * 7
    assert [line for line in lines if line.startswith("FAIL")] == [
        "FAIL  ready w4: Ready is Unknown (NodeStatusUnknown)"
    ]
    assert "pre-flight failed: 1 of 23 checks" in err


# -- powercut power off ----------------------------------------------------------------------


def test_power_off_checks_first_then_tells_each_node_and_the_journal(
    inv: str, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["power", "off", "w1", "w2", "-i", inv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "pre-flight:"
    assert all(line.startswith("  ok    ") for line in lines[1:8])
    acks = lines[8:10]
    assert sorted(line.split(":")[0] for line in acks) == ["w1", "w2"]
    assert all(
        re.fullmatch(r"w\d: power-off acknowledged after \d+\.\d s, state OFF", line)
        for line in acks
    )
    assert lines[10].startswith("powered off w1, w2 (forced); ack skew ")
    assert lines[11].startswith("journal: ") and "powercut recover -i" in lines[11]
    assert bmcs.power["w1"] is PowerState.OFF and bmcs.power["w2"] is PowerState.OFF
    assert sorted(journal(inv)) == [
        ("power_off", "node/w1", EntryState.DONE),
        ("power_off", "node/w2", EntryState.DONE),
    ]


def test_power_off_stops_when_the_preflight_fails(
    inv: str, cluster: FakeApiServer, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    not_ready(cluster, "w1")
    assert main(["power", "off", "w1", "-i", inv]) == 2
    out, err = capsys.readouterr()
    assert "  FAIL  ready w1: Ready is Unknown (NodeStatusUnknown)" in out
    assert (
        "powercut: error: pre-flight: 1 of 4 checks failed: "
        "ready w1: Ready is Unknown (NodeStatusUnknown)" in err
    )
    assert bmcs.ops("off") == []
    assert journal(inv) == []


def test_skip_preflight_is_said_and_skips_it(
    inv: str, cluster: FakeApiServer, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    not_ready(cluster, "w1")
    assert main(["power", "off", "w1", "-i", inv, "--skip-preflight"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "pre-flight checks skipped (--skip-preflight)"
    assert "pre-flight:" not in out
    assert bmcs.ops("off") == ["w1"]
    assert not any(path.startswith("/version") for path in (r.path for r in cluster.requests))


def test_a_dry_run_shows_a_failing_preflight_and_the_plan(
    inv: str, cluster: FakeApiServer, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    not_ready(cluster, "w1")
    assert main(["power", "off", "w1", "-i", inv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "  FAIL  ready w1: Ready is Unknown (NodeStatusUnknown)" in lines
    assert lines[5] == "  a real run would stop here"
    assert "dry run: nothing was changed. The plan:" in out
    assert "  verdict: allowed" in out
    assert bmcs.ops("off") == []
    assert journal(inv) == []


def test_separate_invocations_share_one_blast_radius(
    inv: str, cluster: FakeApiServer, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["power", "off", "w1", "-i", inv]) == 0
    not_ready(cluster, "w1")  # what the cluster shows once w1 is gone
    capsys.readouterr()
    assert main(["power", "off", "w2", "w3", "-i", inv]) == 2
    out, err = capsys.readouterr()
    assert "still owes a power-on for w1: counted as down" in out
    assert "safety.max_nodes_down: 3 nodes would be down at once" in err
    assert "journal: " in err and "owes a power-on for w1" in err
    assert bmcs.ops("off") == ["w1"]

    assert main(["power", "on", "w1", "-i", inv]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^w1: power-on acknowledged after \d+\.\d s, state ON$", out, re.M)
    assert journal(inv) == [("power_off", "node/w1", EntryState.UNDONE)]
    cluster.update("nodes", "", "w1", lambda n: set_ready(n, "True"))
    assert main(["power", "off", "w2", "w3", "-i", inv]) == 0


# -- powercut power cycle --------------------------------------------------------------------


def test_power_cycle_is_checked_journaled_and_settled(
    inv: str, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["power", "cycle", "w1", "-i", inv]) == 0
    out = capsys.readouterr().out
    assert "  ok    bmc w1: ipmi answers, power on" in out
    assert re.search(r"^w1: power cycle acknowledged after \d+\.\d s, state ON$", out, re.M)
    assert bmcs.ops("cycle") == ["w1"]
    assert journal(inv) == [("power_cycle", "node/w1", EntryState.UNDONE)]


def test_a_power_cycle_refused_by_safety_touches_nothing(
    inv: str, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["power", "cycle", "cp1", "cp2", "-i", inv]) == 2
    assert "safety.allow_control_plane_majority" in capsys.readouterr().err
    assert bmcs.ops("cycle") == []
    assert journal(inv) == []


def test_a_power_cycle_that_fails_midway_is_owed_and_recover_powers_the_node_on(
    inv: str, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.errors import PermanentError

    def stuck_off() -> None:
        bmcs.power["w1"] = PowerState.OFF

    bmcs.during[("w1", "cycle")] = stuck_off
    bmcs.fail[("w1", "cycle")] = PermanentError("w1: no power-on read-back")
    assert main(["power", "cycle", "w1", "-i", inv]) == 2
    out, err = capsys.readouterr()
    assert re.search(r"^w1: power cycle FAILED after \d+\.\d s: ", out, re.M)
    assert "owes a power-on for w1 (undo with: powercut recover -i" in err
    assert journal(inv) == [("power_cycle", "node/w1", EntryState.FAILED)]
    assert main(["recover", "-i", inv]) == 0
    assert bmcs.power["w1"] is PowerState.ON
    assert journal(inv) == [("power_cycle", "node/w1", EntryState.UNDONE)]


def test_another_runs_lock_is_the_reason_given_not_the_outage_it_caused(
    inv: str, cluster: FakeApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lock is taken before the pre-flight: while another run holds it, its outage is
    what a pre-flight would see, and the lock is what the user must hear about."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    cluster.add(
        "leases",
        {
            "metadata": {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE},
            "spec": {
                "holderIdentity": "another-run@elsewhere",
                "leaseDurationSeconds": 60,
                "acquireTime": now,
                "renewTime": now,
            },
        },
    )
    not_ready(cluster, "w1")  # what the other run's power-off did
    assert main(["power", "off", "-i", inv, "w1"]) == 2
    err = capsys.readouterr().err
    assert "cluster lock" in err and "another-run@elsewhere" in err, err
    assert journal(inv) == []


def feature(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"Feature: {name}\n  Scenario: s\n{body}")
    return path


def test_preflight_names_each_missing_verb(
    inv: str, cluster: FakeApiServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    drain = feature(tmp_path, "drain.feature", "    When the node is drained within 1 minute\n")
    cluster.denied.add(("pods/eviction", "create"))
    assert main(["preflight", "-i", inv, "w1", "--features", str(drain)]) == 2
    out = capsys.readouterr().out.splitlines()
    failed = [line for line in out if line.startswith("FAIL")]
    assert failed == [
        "FAIL  permission: 'fake-user' (groups: system:authenticated) lacks create on "
        "'pods/eviction' in the core API group \"\" cluster-wide (tier evict) "
        "(docs/rbac.md, powercut rbac)"
    ]
    asked = {(r["spec"].get("resourceAttributes") or {}).get("resource") for r in cluster.reviews}
    assert {"nodes", "pods", "leases"} <= asked
