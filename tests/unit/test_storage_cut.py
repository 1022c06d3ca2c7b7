"""The storage-network cut's mechanism: the inventory's endpoints, the firewall command the
SSH driver sends (heal armed first, only the storage endpoints dropped, both ways), the
lab's reading of it, and the journal's undo."""

from __future__ import annotations

import ipaddress
import textwrap
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.failures import FailureKind, bring_back, inflict, unsupported
from harness.inventory import Inventory, load_inventory
from harness.inventory.models import StorageNetworkSpec
from harness.inventory.storage import StorageEndpoint, parse_endpoint
from harness.journal import UndoSpec
from harness.kube.names import Act, Stage, downs
from harness.kube.timeline import ACTION
from harness.power import storage_cut
from harness.power.base import PowerState
from harness.power.kind import KindDriver
from harness.power.ssh import SshDriver
from harness.power.storage_cut import SupportsStorageCut, cut_command, parse_cut_command
from harness.session import Session
from tests.fakes.api import FakeApiServer


@pytest.mark.parametrize(
    ("text", "network", "port"),
    [
        ("10.0.20.5", "10.0.20.5/32", None),
        (" 10.0.20.0/24 ", "10.0.20.0/24", None),
        ("10.0.20.5:3260", "10.0.20.5/32", 3260),
        ("10.0.20.7/24:2049", "10.0.20.0/24", 2049),
    ],
)
def test_an_endpoint_is_an_ipv4_address_or_network_with_an_optional_port(
    text: str, network: str, port: int | None
) -> None:
    ep = parse_endpoint(text)
    assert ep.network == ipaddress.IPv4Network(network)
    assert ep.port == port


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("array.example.com", "not host names"),
        ("fd00::5", "expected an IPv4 address"),
        ("10.0.20.300", "is not a storage endpoint"),
        ("127.0.0.1", "loopback"),
        ("0.0.0.0/0", "every"),
        ("10.0.20.5:70000", "not in 1-65535"),
        ("10.0.20.5:0", "not in 1-65535"),
    ],
)
def test_a_bad_endpoint_says_what_is_valid(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_endpoint(text)


def test_an_endpoint_reads_back_as_written() -> None:
    assert [str(parse_endpoint(t)) for t in ("10.0.20.5", "10.0.20.0/24:3260")] == [
        "10.0.20.5",
        "10.0.20.0/24:3260",
    ]


INVENTORY = """\
cluster:
  kubeconfig: kube.conf
nodes:
  - name: w1
    role: worker
    power: {driver: kind}
storage_network:
  endpoints: [ENDPOINTS]
"""


def test_the_inventory_names_the_storage_endpoints(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY.replace("ENDPOINTS", "'10.0.20.5:3260', 10.0.21.0/24"))
    inv = load_inventory(path)
    assert inv.storage_network is not None
    assert [str(e) for e in inv.storage_network.parsed()] == ["10.0.20.5:3260", "10.0.21.0/24"]


def test_a_bad_storage_endpoint_names_the_file_line_field_and_valid_forms(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY.replace("ENDPOINTS", "10.0.20.5, array.example.com"))
    with pytest.raises(ConfigError) as info:
        load_inventory(path)
    message = str(info.value)
    assert str(path) in message
    assert "storage_network.endpoints" in message
    assert "line 8" in message
    assert "'array.example.com' is not a storage endpoint" in message
    assert "'10.0.20.5:3260'" in message  # what is valid


def test_an_empty_storage_network_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(textwrap.dedent(INVENTORY.replace("[ENDPOINTS]", "[]")))
    with pytest.raises(ConfigError, match=r"storage_network\.endpoints"):
        load_inventory(path)


EPS = [parse_endpoint("10.0.20.5:3260"), parse_endpoint("10.0.21.0/24")]


def test_the_cut_arms_its_heal_before_it_drops_anything() -> None:
    command = cut_command(EPS, 90)
    steps = command.split(" && ")
    assert steps[0].startswith(
        f"systemd-run --collect --unit={storage_cut.HEAL_UNIT} --on-active=90 /bin/sh -c '"
    )
    # the armed heal removes exactly the chain the cut adds, from every hook
    for hook in storage_cut.HOOKS:
        assert f"iptables -w -D {hook} -j {storage_cut.CHAIN}" in steps[0]
        assert f"iptables -w -I {hook} 1 -j {storage_cut.CHAIN}" in steps
    assert steps[1] == f"iptables -w -N {storage_cut.CHAIN}"
    # the chain is hooked in last, once it is complete
    assert all(s.startswith("iptables -w -I") for s in steps[-3:])


def test_the_cut_drops_only_the_storage_endpoints_both_ways() -> None:
    rules = [s for s in cut_command(EPS, 90).split(" && ") if " -A " in s]
    chain = storage_cut.CHAIN
    assert rules == [
        f"iptables -w -A {chain} -d 10.0.20.5/32 -p tcp --dport 3260 -j DROP",
        f"iptables -w -A {chain} -s 10.0.20.5/32 -p tcp --sport 3260 -j DROP",
        f"iptables -w -A {chain} -d 10.0.21.0/24 -j DROP",
        f"iptables -w -A {chain} -s 10.0.21.0/24 -j DROP",
    ]


def test_a_cut_needs_endpoints_and_a_heal_ahead() -> None:
    with pytest.raises(ValueError, match="at least one endpoint"):
        cut_command([], 90)
    with pytest.raises(ValueError, match="at least 1 s ahead"):
        cut_command(EPS, 0)


def test_the_lab_reads_the_cut_back_and_nothing_else() -> None:
    command = cut_command(EPS, 42)
    assert parse_cut_command(command) == (42, EPS)
    assert parse_cut_command(command.replace("-j DROP", "-j ACCEPT")) is None
    assert parse_cut_command(command + " && reboot") is None
    assert parse_cut_command(storage_cut.COMMAND_HEAL) is None
    assert parse_cut_command("true") is None


class _Recording(SshDriver):
    def __init__(self) -> None:
        super().__init__("w1", "10.0.1.3", 22, "core", "/nonexistent", known_hosts=None)
        self.sent: list[str] = []

    def _power_command(self, command: str, deadline: object) -> None:
        self.sent.append(command)


def test_the_ssh_driver_sends_the_cut_rounding_the_heal_up_and_heals() -> None:
    driver = _Recording()
    assert isinstance(driver, SupportsStorageCut)
    driver.cut_storage("w1", EPS, heal_after_s=12.2)
    driver.heal_storage("w1")
    assert driver.sent == [cut_command(EPS, 13), storage_cut.COMMAND_HEAL]


def test_the_ssh_driver_refuses_another_node_and_a_heal_not_ahead() -> None:
    driver = _Recording()
    with pytest.raises(Exception, match="acts on w1, not w2"):
        driver.cut_storage("w2", EPS, heal_after_s=10)
    with pytest.raises(Exception, match="> 0 s ahead"):
        driver.cut_storage("w1", EPS, heal_after_s=0)
    assert driver.sent == []


def test_the_kind_driver_can_cut_storage_too() -> None:
    assert isinstance(KindDriver("w1"), SupportsStorageCut)
    assert KindDriver("w1").supports("storage")


def test_the_journal_heals_a_storage_cut_through_the_driver_that_cut_it() -> None:
    spec = UndoSpec.heal_storage("w1", "ssh")
    assert (spec.action, dict(spec.args)) == ("heal_storage", {"node": "w1", "protocol": "ssh"})

    class Executor:
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []

        def heal_storage(self, node: str, protocol: str) -> None:
            self.calls.append((node, protocol))

    ex = Executor()
    spec.run(ex)  # type: ignore[arg-type]
    assert ex.calls == [("w1", "ssh")]


def test_an_endpoint_value_object_is_hashable_and_compares_by_value() -> None:
    a = StorageEndpoint(ipaddress.IPv4Network("10.0.20.5/32"), 3260)
    assert a == parse_endpoint("10.0.20.5:3260")
    assert len({a, parse_endpoint("10.0.20.5:3260")}) == 1


# -- the failure kind (harness/failures/storage_network.py) over a real Session ---------------


class _StorageDriver:
    """A driver that can only cut its node's storage (and read power): what it was asked."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.calls: list[tuple[object, ...]] = []

    def state(self) -> PowerState:
        return PowerState.ON

    def off(self, *, graceful: bool = False) -> None: ...

    def on(self) -> None: ...

    def cycle(self) -> None: ...

    def close(self) -> None: ...

    def cut_storage(
        self, node: str, endpoints: list[StorageEndpoint], *, heal_after_s: float
    ) -> None:
        self.calls.append(("cut", node, tuple(endpoints), heal_after_s))

    def heal_storage(self, node: str) -> None:
        self.calls.append(("heal", node))


def _with_storage(inventory: Inventory) -> Inventory:
    spec = StorageNetworkSpec(endpoints=["10.0.20.5:3260"])
    return inventory.model_copy(update={"storage_network": spec})


def test_the_storage_kind_cuts_with_the_inventorys_endpoints_journaled_and_heals(
    inventory: Inventory, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _StorageDriver("w1")
    inv = _with_storage(inventory)
    # the session's undos at its end (idempotent: a second heal) go through the executor
    monkeypatch.setattr("harness.session.executor.driver_for", lambda spec, protocol=None: fake)
    with Session(inv, client=api.client(), lock=False) as session:
        monkeypatch.setattr(session, "driver", lambda node, protocol=None: fake)
        done = inflict(session, ["w1"], FailureKind.STORAGE_CUT, undo_after_s=60)
        assert fake.calls == [("cut", "w1", (parse_endpoint("10.0.20.5:3260"),), 60)]
        assert done.acks["w1"].transition == Act.STORAGE_CUT.at(Stage.ACKNOWLEDGED)
        assert done.sent["w1"].detail["protocol"] == inv.node("w1").power.driver
        assert session.journal is not None
        (entry,) = session.journal.pending_undos()
        assert (entry.action, entry.undo.action) == ("storage", "heal_storage")
        assert session.down == set(), "running and Ready: not down to the blast radius"
        back = bring_back(session, ["w1"], FailureKind.STORAGE_CUT)
        assert fake.calls[-1] == ("heal", "w1")
        assert back.acks["w1"].transition == Act.STORAGE_HEAL.at(Stage.ACKNOWLEDGED)
        assert session.journal.pending_undos() == []
        # where the node counts as down and back: the cut's and the heal's acknowledgements
        spans = downs((t.name, t.transition, t) for t in session.timeline if t.kind == ACTION)
        assert [(d.node, d.since.transition, d.back and d.back.transition) for d in spans] == [
            ("w1", Act.STORAGE_CUT.at(Stage.ACKNOWLEDGED), Act.STORAGE_HEAL.at(Stage.ACKNOWLEDGED))
        ]
    assert fake.calls[-1] == ("heal", "w1"), "the session's end heals again (idempotent)"


def test_without_storage_endpoints_nothing_is_cut_and_the_error_names_the_field(
    inventory: Inventory, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _StorageDriver("w1")
    with Session(inventory, client=api.client(), lock=False) as session:
        monkeypatch.setattr(session, "driver", lambda node, protocol=None: fake)
        with pytest.raises(ConfigError, match="storage_network"):
            unsupported(session, ["w1"], FailureKind.STORAGE_CUT)
        with pytest.raises(ConfigError, match="storage_network"):
            inflict(session, ["w1"], FailureKind.STORAGE_CUT, undo_after_s=60)
        assert fake.calls == []
        assert session.journal is not None and session.journal.pending_undos() == []


def test_a_node_without_a_driver_that_can_cut_its_storage_is_unsupported(
    inventory: Inventory, api: FakeApiServer
) -> None:
    # the fake BMCs (ipmi, redfish) cannot: the scenario skips, naming the node
    with Session(_with_storage(inventory), client=api.client(), lock=False) as session:
        why = unsupported(session, ["w1"], FailureKind.STORAGE_CUT)
    assert why is not None and why.startswith("w1: ") and "storage" in why


def test_a_node_cut_off_its_storage_can_still_be_fenced(
    inventory: Inventory, api: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The remedy: powering the cut node off is not refused as "already down"."""
    fake = _StorageDriver("w1")
    monkeypatch.setattr("harness.session.executor.driver_for", lambda spec, protocol=None: fake)
    with Session(_with_storage(inventory), client=api.client(), lock=False) as session:
        monkeypatch.setattr(session, "driver", lambda node, protocol=None: fake)
        inflict(session, ["w1"], FailureKind.STORAGE_CUT, undo_after_s=60)
        session.power_off(["w1"])
        assert session.down == {"w1"}
        assert session.journal is not None
        owed = sorted(e.undo.action for e in session.journal.pending_undos())
        assert owed == ["heal_storage", "power_on"]
