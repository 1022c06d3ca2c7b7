"""`powercut recover`: power-ons first and without the API; what fails is reported and owed."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import main
from harness.inventory import load_inventory
from harness.journal import EntryState, Journal, UndoSpec
from harness.kube.actions import OUT_OF_SERVICE_KEY
from harness.power.base import PowerState
from harness.session import journal_path_for
from tests.fakes.api import FakeApiServer, node
from tests.fakes.power import FakeBmcs, write_inventory, write_kubeconfig

pytestmark = pytest.mark.filterwarnings("ignore:.cgi. is deprecated:DeprecationWarning")

TAINT = {"key": OUT_OF_SERVICE_KEY, "value": "nodeshutdown", "effect": "NoExecute"}


def dead_server() -> str:
    """The URL of a port nobody listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def inventory_path(tmp_path: Path) -> Path:
    return write_inventory(tmp_path, dead_server())


@pytest.fixture
def journal_path(inventory_path: Path, bmcs: FakeBmcs) -> Iterator[Path]:
    """A crashed run's journal: w1 cordoned, then powered off, then tainted out-of-service;
    w2 powered off. Every undo is owed."""
    path = journal_path_for(load_inventory(inventory_path))
    with Journal(path) as journal:
        for action, node_name, undo in (
            ("cordon", "w1", UndoSpec.uncordon("w1")),
            ("power_off", "w1", UndoSpec.power_on("w1")),
            ("out_of_service", "w1", UndoSpec.remove_taint("w1", OUT_OF_SERVICE_KEY, "NoExecute")),
            ("power_off", "w2", UndoSpec.power_on("w2")),
        ):
            with journal.disruption(action, f"node/{node_name}", undo=undo):
                pass
    bmcs.power["w1"] = bmcs.power["w2"] = PowerState.OFF
    yield path


def owed(path: Path) -> list[str]:
    return [f"{e.action} {e.target}" for e in Journal.read(path) if e.owes_undo]


def test_with_the_api_down_the_nodes_are_powered_on_and_the_rest_is_reported(
    inventory_path: Path,
    journal_path: Path,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["recover", "-i", str(inventory_path)]) == 4
    out, err = capsys.readouterr()
    assert bmcs.power["w1"] is PowerState.ON
    assert bmcs.power["w2"] is PowerState.ON
    lines = [line.strip() for line in out.splitlines()[1:]]
    # Power-ons first (newest first), then the Kubernetes undos (newest first), then the lock.
    assert lines[0].startswith("done (")
    assert lines[0].endswith("power_on(node='w2') (undoes power_off node/w2)")
    assert lines[1].endswith("power_on(node='w1') (undoes power_off node/w1)")
    assert lines[2].startswith("FAILED (")
    assert "remove_taint(node='w1'" in lines[2]
    assert "Unreachable" in lines[2] and "unreachable" in lines[2]
    assert "uncordon(node='w1')" in lines[3]
    assert "not tried: the API server did not answer earlier" in lines[3]
    assert lines[4].startswith("FAILED: release the cluster lock of a crashed run: not tried")
    assert len(lines) == 5
    assert (
        "2 undo(s) failed and the cluster lock could not be checked; "
        "fix the cause and run recover again"
    ) in err
    # What failed stays owed; the power-ons are done.
    assert owed(journal_path) == ["cordon node/w1", "out_of_service node/w1"]
    entries = {e.undo.action: e for e in Journal.read(journal_path) if e.owes_undo}
    assert entries["uncordon"].undo_attempts == 1


def test_recover_again_once_the_api_is_back_finishes_the_job(
    inventory_path: Path,
    journal_path: Path,
    bmcs: FakeBmcs,
    api: FakeApiServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["recover", "-i", str(inventory_path)]) == 4
    api.add("nodes", node("w1", taints=[TAINT]))
    api.update("nodes", "", "w1", lambda n: n["spec"].update(unschedulable=True))
    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    capsys.readouterr()

    assert main(["recover", "-i", str(inventory_path)]) == 0
    out, err = capsys.readouterr()
    assert "recovering 2 disruption(s)" in out
    assert err == ""
    w1 = api.get("nodes", "", "w1")
    assert w1 is not None
    assert not w1["spec"].get("unschedulable")
    assert w1["spec"]["taints"] == []
    assert owed(journal_path) == []
    assert all(e.state is EntryState.UNDONE for e in Journal.read(journal_path))
    assert bmcs.ops("on") == ["w2", "w1"]  # only the first run had anything to power on

    assert main(["recover", "-i", str(inventory_path)]) == 0
    assert "nothing to recover: every disruption" in capsys.readouterr().out


def test_without_a_readable_kubeconfig_the_power_is_still_restored(
    inventory_path: Path,
    journal_path: Path,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (inventory_path.parent / "kubeconfig").unlink()
    assert main(["recover", "-i", str(inventory_path)]) == 4
    out, _ = capsys.readouterr()
    assert bmcs.power["w1"] is PowerState.ON and bmcs.power["w2"] is PowerState.ON
    assert "no API client: " in out and "cannot read kubeconfig" in out
    assert owed(journal_path) == ["cordon node/w1", "out_of_service node/w1"]


def test_a_power_on_that_fails_is_reported_and_the_others_still_run(
    inventory_path: Path,
    journal_path: Path,
    bmcs: FakeBmcs,
    api: FakeApiServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from harness.errors import PermanentError

    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    api.add("nodes", node("w1", taints=[TAINT]))
    bmcs.fail[("w2", "on")] = PermanentError("w2: IPMI refused the credentials")
    assert main(["recover", "-i", str(inventory_path)]) == 4
    out, _ = capsys.readouterr()
    assert "FAILED (" in out and "w2: IPMI refused the credentials" in out
    assert bmcs.power["w1"] is PowerState.ON
    assert owed(journal_path) == ["power_off node/w2"]


def test_the_stale_lock_of_a_dead_run_is_released(
    inventory_path: Path,
    api: FakeApiServer,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    path = journal_path_for(load_inventory(inventory_path))
    Journal(path).close()  # a journal that owes nothing
    holder = f"{socket.gethostname()}/pid-4194999/abcd"  # above pid_max: not running
    api.add(
        "leases",
        {
            "metadata": {"name": "powercut-lock", "namespace": "kube-system"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60},
        },
    )
    assert main(["recover", "-i", str(inventory_path)]) == 0
    out, _ = capsys.readouterr()
    assert f"released the cluster lock of a run that is gone ({holder})" in out
    assert api.get("leases", "kube-system", "powercut-lock") is None


def _lease(api: FakeApiServer, holder: str, renewed: str) -> None:
    api.add(
        "leases",
        {
            "metadata": {"name": "powercut-lock", "namespace": "kube-system", "uid": "u-1"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60, "renewTime": renewed},
        },
    )


def test_with_lock_a_run_alive_elsewhere_keeps_its_disruptions(
    inventory_path: Path,
    journal_path: Path,
    api: FakeApiServer,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A second runner's init container (another pod: it cannot judge the first's process)
    while the first runs and renews its lease: nothing is undone, exit 5."""
    import datetime as dt

    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    _lease(api, "runner-pod-1/pid-7/abcd", now)
    assert main(["recover", "-i", str(inventory_path), "--lock", "1s"]) == 5
    _, err = capsys.readouterr()
    assert "not recovering: another powercut run holds the cluster lock" in err
    assert "runner-pod-1/pid-7/abcd" in err
    assert bmcs.power["w1"] is PowerState.OFF and bmcs.power["w2"] is PowerState.OFF
    assert len(owed(journal_path)) == 4


def test_with_lock_an_expired_lease_is_taken_and_released(
    inventory_path: Path,
    journal_path: Path,
    api: FakeApiServer,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A killed runner's lease, no longer renewed: the next Job's recover takes the lock,
    undoes everything, and leaves the lock free for its runner."""
    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    w1 = node("w1", taints=[TAINT])
    w1["spec"]["unschedulable"] = True
    api.add("nodes", w1)
    api.add("nodes", node("w2"))
    _lease(api, "runner-pod-1/pid-7/abcd", "2020-01-01T00:00:00.000000Z")
    assert main(["recover", "-i", str(inventory_path), "--lock"]) == 0
    out, _ = capsys.readouterr()
    assert "holding the cluster lock while recovering" in out
    assert bmcs.power["w1"] is PowerState.ON and bmcs.power["w2"] is PowerState.ON
    assert owed(journal_path) == []
    assert api.get("leases", "kube-system", "powercut-lock") is None


def test_with_lock_and_the_api_down_power_is_recovered(
    inventory_path: Path, journal_path: Path, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["recover", "-i", str(inventory_path), "--lock", "0"]) == 4
    out, _ = capsys.readouterr()
    assert "does not answer" in out and "recovering without the lock" in out
    assert bmcs.power["w1"] is PowerState.ON and bmcs.power["w2"] is PowerState.ON


def test_with_lock_refused_by_the_role_nothing_is_undone(
    inventory_path: Path,
    journal_path: Path,
    api: FakeApiServer,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Credentials without the Lease permissions: that is no outage of the API server, and
    the lock is what tells a dead run's disruptions from a live one's: nothing is undone."""
    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    api.forbidden.add("leases")
    assert main(["recover", "-i", str(inventory_path), "--lock", "0"]) == 2
    _, err = capsys.readouterr()
    assert "not recovering: the cluster lock cannot be taken" in err
    assert "403 Forbidden" in err and "'leases'" in err
    assert bmcs.power["w1"] is PowerState.OFF and bmcs.power["w2"] is PowerState.OFF
    assert len(owed(journal_path)) == 4


def test_with_lock_and_a_kubeconfig_without_its_context_nothing_is_undone(
    inventory_path: Path, journal_path: Path, bmcs: FakeBmcs, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = inventory_path.parent / "kubeconfig"
    kubeconfig.write_text(
        kubeconfig.read_text().replace("current-context: fake", "current-context: gone")
    )
    assert main(["recover", "-i", str(inventory_path), "--lock", "0"]) == 2
    _, err = capsys.readouterr()
    assert "not recovering: the cluster lock cannot be taken" in err
    assert "context was not found for specified context: gone" in err, err
    assert bmcs.power["w1"] is PowerState.OFF and bmcs.power["w2"] is PowerState.OFF
    assert len(owed(journal_path)) == 4


def test_the_journal_is_found_through_a_configmap_mounts_links(tmp_path: Path) -> None:
    """A ConfigMap mount: inventory.yaml -> ..data/inventory.yaml, ..data -> a directory each
    pod's kubelet names after its own moment. The runner's pod and the next Job's pod see
    different targets; both must name the same journal."""
    from harness.inventory import Inventory

    mount = tmp_path / "mount"
    mount.mkdir()
    inv_src = write_inventory(tmp_path, "http://127.0.0.1:1")
    paths = []
    for stamp in ("..2026_11_26_22_00_00.1", "..2026_11_27_22_00_00.2"):
        (mount / stamp).mkdir()
        (mount / stamp / "inventory.yaml").write_text(inv_src.read_text())
        data = mount / "..data"
        if data.is_symlink():
            data.unlink()
        data.symlink_to(stamp)
        link = mount / "inventory.yaml"
        if not link.is_symlink():
            link.symlink_to("..data/inventory.yaml")
        inv: Inventory = load_inventory(link)
        paths.append(journal_path_for(inv))
    assert paths[0] == paths[1]


def test_when_owed_with_nothing_owed_the_lock_is_not_touched(
    inventory_path: Path,
    api: FakeApiServer,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The chart's recover CronJob every few minutes: with nothing owed it takes no lock
    (a runner starting at that moment must not find it held)."""
    import datetime as dt

    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    Journal(journal_path_for(load_inventory(inventory_path))).close()
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    _lease(api, "runner-pod-1/pid-7/abcd", now)
    assert main(["recover", "-i", str(inventory_path), "--lock", "--when-owed"]) == 0
    out, _ = capsys.readouterr()
    assert "nothing owed" in out
    lease = api.get("leases", "kube-system", "powercut-lock")
    assert lease is not None and lease["spec"]["holderIdentity"] == "runner-pod-1/pid-7/abcd"


def test_when_owed_a_live_holder_keeps_its_disruptions_and_the_job_succeeds(
    inventory_path: Path,
    journal_path: Path,
    api: FakeApiServer,
    bmcs: FakeBmcs,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import datetime as dt

    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    _lease(api, "runner-pod-1/pid-7/abcd", now)
    assert main(["recover", "-i", str(inventory_path), "--lock", "--when-owed"]) == 0
    out, _ = capsys.readouterr()
    assert "not now: the lock is held" in out
    assert bmcs.power["w1"] is PowerState.OFF and bmcs.power["w2"] is PowerState.OFF
    assert len(owed(journal_path)) == 4


def test_when_owed_a_dead_holders_work_is_undone(
    inventory_path: Path,
    journal_path: Path,
    api: FakeApiServer,
    bmcs: FakeBmcs,
) -> None:
    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    w1 = node("w1", taints=[TAINT])
    w1["spec"]["unschedulable"] = True
    api.add("nodes", w1)
    api.add("nodes", node("w2"))
    _lease(api, "runner-pod-1/pid-7/abcd", "2020-01-01T00:00:00.000000Z")
    assert main(["recover", "-i", str(inventory_path), "--lock", "--when-owed"]) == 0
    assert bmcs.power["w1"] is PowerState.ON and bmcs.power["w2"] is PowerState.ON
    assert owed(journal_path) == []


def _status(path: Path) -> dict[str, object]:
    import json

    doc: dict[str, object] = json.loads(path.read_text())
    return doc


def test_the_status_of_a_check_that_recovered_a_dead_runner_reads_the_lock_free(
    inventory_path: Path, journal_path: Path, api: FakeApiServer, bmcs: FakeBmcs, tmp_path: Path
) -> None:
    """The recover CronJob's record (the page's /metrics): the lock and the undos as the
    check left them (taken over from the dead runner, then released: free; nothing owed),
    what it found before acting, and when it found the dead holder. A later check that
    finds nothing keeps that time (the alert on a killed night waits for a later run)."""
    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    for name in ("w1", "w2"):
        api.add("nodes", node(name))
    _lease(api, "runner-pod-1/pid-7/abcd", "2020-01-01T00:00:00.000000Z")
    status = tmp_path / "store" / "lab" / "recover.json"
    args = ["recover", "-i", str(inventory_path), "--lock", "--when-owed", "--status", str(status)]
    assert main(args) == 0
    doc = _status(status)
    assert doc["exit_code"] == 0 and doc["owed"] == 0
    assert doc["lock"] == {"held": False, "holder": "", "holder_alive": False, "expires_in_s": 0.0}
    found = doc["found"]
    assert isinstance(found, dict) and found["owed"] == 4
    assert found["lock"]["held"] is True and found["lock"]["holder_alive"] is False
    assert doc["dead_holder"] == {"holder": "runner-pod-1/pid-7/abcd", "seen": doc["checked"]}
    assert bmcs.power["w1"] is PowerState.ON and owed(journal_path) == []
    assert main(args) == 0  # the next check: nothing owed, nothing held
    again = _status(status)
    assert again["checked"] != doc["checked"] and again["found"] == {"owed": 0, "lock": doc["lock"]}
    assert again["dead_holder"] == doc["dead_holder"]


def test_the_status_of_a_check_that_left_a_live_runner_alone(
    inventory_path: Path, journal_path: Path, api: FakeApiServer, bmcs: FakeBmcs, tmp_path: Path
) -> None:
    import datetime as dt

    write_kubeconfig(inventory_path.parent / "kubeconfig", api.url)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    _lease(api, "runner-pod-1/pid-7/abcd", now)
    status = tmp_path / "recover.json"
    args = ["recover", "-i", str(inventory_path), "--lock", "--when-owed", "--status", str(status)]
    assert main(args) == 0
    doc = _status(status)
    lock = doc["lock"]
    assert isinstance(lock, dict) and lock["held"] is True and lock["holder_alive"] is True
    assert doc["owed"] == 4 and "dead_holder" not in doc
