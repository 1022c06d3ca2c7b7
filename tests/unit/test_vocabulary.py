"""One vocabulary: every action name a consumer matches is one the real producers record.

The producers run for real (the session over fake BMCs that can also cut a node off and stop
its kubelet, :mod:`harness.kube.actions` against the fake API server) and their timeline is
collected; the names consumers match are read from the library's source (every
``Act.X.at(Stage.Y)``) and from the sets they match against (the SLO chart's bands,
longevity's power moments). A consumer waiting for a name nothing records (the SLO chart
once closed a partition's band on ``"partition healed"``, which nothing emits) fails here,
and so does a library module spelling an action's name as a string of its own, or a
taint key, label or annotation that names.py declares (the lab and kindlab included).
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import failures
from harness.failures import FailureKind
from harness.inventory import Inventory, NodeSpec
from harness.inventory.models import StorageNetworkSpec
from harness.inventory.storage import StorageEndpoint
from harness.kube import actions
from harness.kube import names as well_known
from harness.kube.actions import Fence
from harness.kube.client import KubeClient
from harness.kube.names import BACK_AT, DOWN_FROM, Act, Change, Event, Kind, Stage
from harness.kube.timeline import ACTION, Timeline
from harness.longevity import measure
from harness.report import slo_chart
from harness.session import Session
from tests.fakes.api import FakeApiServer, pod
from tests.fakes.power import FakeBmcs, FakeDriver

ROOT = Path(__file__).resolve().parents[2]
#: The library: every Python module of harness/ and steps/ but names.py itself.
EVERY_MODULE = [
    p
    for d in ("harness", "steps")
    for p in sorted((ROOT / d).rglob("*.py"))
    if p.relative_to(ROOT) != Path("harness/kube/names.py")
]
#: What the action-name check reads: the library less the lab (whose BMC simulators and
#: supervisor speak of power and of kubelets in their own words).
LIBRARY = [p for p in EVERY_MODULE if "/lab/" not in str(p)]
#: Every well-known name names.py declares: its upper-case string constants holding a "/"
#: (taint keys, labels, annotations, powercut's own, and the ``key:effect`` taints).
DECLARED = {
    value
    for key, value in vars(well_known).items()
    if key.isupper() and isinstance(value, str) and "/" in value
}
#: Strings that look like the vocabulary and are something else: the schema of the fields
#: the observer decodes (a TypedDict's keys must be literals), what systemd says a kubelet
#: is, a budget's description (harness.budgets sits below harness.kube in the layers, so it
#: cannot import names.py; its text names the taint for the reader).
NOT_VOCABULARY = {
    ("harness/kube/fields.py", "kubernetes.io/service-name"),
    ("harness/kube/fields.py", "kubernetes.io/config.mirror"),
    ("harness/kube/fields.py", "topology.kubernetes.io/zone"),
    ("harness/power/kind.py", "kubelet stopped"),
    ("harness/power/kind.py", "kubelet active"),
    ("harness/budgets.py", "node.kubernetes.io/unreachable"),
}


class CuttingDriver(FakeDriver):
    """A fake driver that can also cut the node off and stop its kubelet."""

    def partition(self, node: str, *, heal_after_s: float) -> None:
        self.bmcs.act(node, "partition")

    def heal(self, node: str) -> None:
        self.bmcs.act(node, "heal")

    def stop_kubelet(self, node: str, *, restart_after_s: float) -> None:
        self.bmcs.act(node, "stop_kubelet")

    def start_kubelet(self, node: str) -> None:
        self.bmcs.act(node, "start_kubelet")

    def cut_storage(
        self, node: str, endpoints: list[StorageEndpoint], *, heal_after_s: float
    ) -> None:
        self.bmcs.act(node, "cut_storage")

    def heal_storage(self, node: str) -> None:
        self.bmcs.act(node, "heal_storage")


class CuttingBmcs(FakeBmcs):
    def driver_for(
        self, node: NodeSpec, protocol: str | None = None, **options: object
    ) -> FakeDriver:
        return CuttingDriver(self, node.name, protocol)


@pytest.fixture
def bmcs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBmcs:
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "state"))
    return CuttingBmcs().install(monkeypatch)


@pytest.fixture
def client(api: FakeApiServer) -> Iterator[KubeClient]:
    c = api.client()
    yield c
    c.close()


def produce_session(inventory: Inventory, client: KubeClient) -> Timeline:
    """Every session action a scenario, longevity or the chaos extension takes."""
    tl = Timeline()
    inventory = inventory.model_copy(
        update={"storage_network": StorageNetworkSpec(endpoints=["10.0.20.5:3260"])}
    )
    with Session(inventory, client=client, timeline=tl, lock=False) as s:
        for nodes in (["w1"], ["w1", "w2"]):
            s.power_off(nodes)
            s.power_on(nodes)
            s.power_off(nodes, graceful=True)
            s.power_on(nodes)
            s.power_cycle(nodes)
            for kind in (FailureKind.PARTITION, FailureKind.KUBELET_STOP, FailureKind.STORAGE_CUT):
                failures.inflict(s, nodes, kind, undo_after_s=60.0)
                failures.bring_back(s, nodes, kind)
        s.power_off(["w3"])
        s.fence("w3")
        s.power_on(["w3"])
    return tl


def produce_api(api: FakeApiServer, client: KubeClient) -> Timeline:
    """Every API action, each through :mod:`harness.kube.actions`."""
    tl = Timeline()
    deadline = time.monotonic() + 10
    api.live_nodes = {"w1", "w2"}
    actions.cordon(client, "w1", timeline=tl)
    actions.uncordon(client, "w1", timeline=tl)
    fence = Fence("w1", override="a test")
    actions.add_out_of_service_taint(client, "w1", fence=fence, timeline=tl)
    actions.remove_out_of_service_taint(client, "w1", timeline=tl)
    api.add("pods", pod("web-a", node_name="w1", labels={"app": "web"}))
    actions.drain(client, "w1", deadline=deadline, timeline=tl)
    api.add("pods", pod("web-b", node_name="w2", labels={"app": "web"}))
    actions.restart_pods(client, "default", "app=web", timeline=tl)
    api.add("pods", pod("db-0", node_name="w2"))
    actions.force_delete_pods(client, "w2", fence=Fence("w2", override="a test"), timeline=tl)
    actions.delete_node(client, "w4", deadline=deadline, timeline=tl)
    client.create(
        "/apis/batch/v1/namespaces/ns/jobs",
        {
            "metadata": {"name": "load"},
            "spec": {"template": {"metadata": {"labels": {"app": "load"}}, "spec": {}}},
        },
    )
    actions.rerun_job(client, "ns", "load", deadline=deadline, timeline=tl)
    return tl


def _staged_in_source() -> dict[str, set[str]]:
    """Every ``Act.X.at(Stage.Y)`` written in the library: name -> where."""
    out: dict[str, set[str]] = {}
    for path in LIBRARY:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "at"
                and isinstance(node.func.value, ast.Attribute)
                and isinstance(node.func.value.value, ast.Name)
                and node.func.value.value.id == "Act"
                and len(node.args) == 1
                and isinstance(node.args[0], ast.Attribute)
                and isinstance(node.args[0].value, ast.Name)
                and node.args[0].value.id == "Stage"
            ):
                continue
            name = Act[node.func.value.attr].at(Stage[node.args[0].attr])
            out.setdefault(name, set()).add(f"{path.relative_to(ROOT)}:{node.lineno}")
    return out


def test_every_action_a_consumer_matches_is_recorded_by_a_producer(
    inventory: Inventory, api: FakeApiServer, client: KubeClient
) -> None:
    produced = {
        t.transition
        for tl in (produce_session(inventory, client), produce_api(api, client))
        for t in tl.snapshot()
        if t.kind == ACTION
    }
    consumed: dict[str, set[str]] = _staged_in_source()
    for where, names in {
        "harness/report/slo_chart.py PHASE_STARTS": slo_chart.PHASE_STARTS,
        "harness/report/slo_chart.py PHASE_ENDS": slo_chart.PHASE_ENDS,
        "harness/longevity/measure.py FAILED_SENT": measure.FAILED_SENT,
    }.items():
        for name in names:
            consumed.setdefault(name, set()).add(where)
    missing = {name: sorted(where) for name, where in consumed.items() if name not in produced}
    assert not missing, f"matched but never recorded: {missing}"
    # and the session's one-off events
    assert {Event.POWER_OFF_SKEW, Event.POWER_CYCLE_SKEW, Event.FENCED} <= produced


def test_a_band_name_nothing_records_would_fail_the_check() -> None:
    """The check above is not vacuous: the name the SLO chart once waited for is not among
    the names the producers can record."""
    recordable = {a.at(s) for a in Act for s in Stage} | set(Event)
    assert "partition healed" not in recordable
    assert set(DOWN_FROM) <= recordable and set(BACK_AT) <= recordable


def test_every_down_kind_has_its_way_back() -> None:
    """Each failure that starts a band has the action that ends it, per failure verb."""
    down = {name.rsplit(" ", 1)[0] for name in DOWN_FROM}
    back = {name.rsplit(" ", 1)[0] for name in BACK_AT}
    assert down == {
        Act.POWER_OFF,
        Act.PARTITION,
        Act.KUBELET_STOP,
        Act.STORAGE_CUT,
        Act.POWER_CYCLE_OFF,
        Act.POWER_CYCLE,
    }
    assert back == {
        Act.POWER_ON,
        Act.HEAL,
        Act.KUBELET_START,
        Act.STORAGE_HEAL,
        Act.POWER_CYCLE,
    }


def _literals(path: Path) -> Iterator[tuple[int, str]]:
    """The plain string constants of a module (f-strings' pieces and docstrings aside)."""
    tree = ast.parse(path.read_text(), str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def test_no_library_module_spells_an_action_itself() -> None:
    verbs = sorted((a.value for a in Act), key=len, reverse=True)
    found = []
    for path in LIBRARY:
        for line, text in _literals(path):
            if (str(path.relative_to(ROOT)), text) in NOT_VOCABULARY:
                continue
            verb = next((v for v in verbs if text.startswith(v + " ")), None)
            rest = text[len(verb) + 1 :] if verb else ""
            staged = bool(verb and rest and " " not in rest and rest.islower())
            if staged:
                found.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not found, "spelt outside harness/kube/names.py:\n" + "\n".join(found)


def _spelt(text: str) -> list[str]:
    """The declared names ``text`` spells: the whole string, or a name standing in it."""
    return sorted(
        n
        for n in DECLARED
        if text == n or re.search(rf"(?<![\w./-]){re.escape(n)}(?![\w.-])", text)
    )


def test_no_library_module_spells_a_well_known_name_names_py_declares() -> None:
    """A taint key, label or annotation declared in names.py is imported wherever it is used,
    in the lab and kindlab too (docstrings aside): a literal of it anywhere else fails here,
    naming the file, the line and the constant to import."""
    constants = {v: k for k, v in vars(well_known).items() if k.isupper() and isinstance(v, str)}
    found = []
    for path in EVERY_MODULE:
        rel = str(path.relative_to(ROOT))
        for line, text in _literals(path):
            for name in _spelt(text):
                if (rel, name) not in NOT_VOCABULARY and (rel, text) not in NOT_VOCABULARY:
                    found.append(f"{rel}:{line}: {text!r} (names.{constants[name]})")
    assert not found, "spelt outside harness/kube/names.py:\n" + "\n".join(found)


def test_the_name_check_finds_a_literal_and_a_name_in_a_sentence() -> None:
    assert _spelt("topology.kubernetes.io/zone") == ["topology.kubernetes.io/zone"]
    assert _spelt("the node annotation powercut.io/bmc (ipmi://...)") == ["powercut.io/bmc"]
    assert _spelt("powercut.io/bmc-username") == ["powercut.io/bmc-username"]
    assert _spelt("example.com/zone") == []
    assert {
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
        "node-role.kubernetes.io/control-plane",
        "node-role.kubernetes.io/worker",
        "powercut.io/lab",
        "lab.powercut.io/resync",
        "lab.powercut.io/volumes",
        "node.kubernetes.io/out-of-service",
    } <= DECLARED


def test_every_observed_change_a_consumer_matches_is_written_by_the_observer() -> None:
    """The observer and the probers are the producers of :class:`Change`; each member a
    module matches appears in one of them."""
    producers = [
        *sorted((ROOT / "harness/kube/observer").glob("*.py")),
        ROOT / "harness/checks/service.py",
    ]
    produced = {
        node.attr
        for path in producers
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Change"
    }
    used = {
        (node.attr, f"{path.relative_to(ROOT)}:{node.lineno}")
        for path in LIBRARY
        if path not in producers
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Change"
    }
    missing = sorted(where for attr, where in used if attr not in produced)
    assert not missing, f"matched, never observed: {missing}"
    assert {Kind.NODE, Kind.POD} <= set(Kind) and Change.OK in set(Change)


@pytest.mark.parametrize(
    ("kind", "back"),
    [(FailureKind.PARTITION, Act.HEAL), (FailureKind.KUBELET_STOP, Act.KUBELET_START)],
)
def test_the_slo_chart_closes_the_band_of_a_partition_and_of_a_kubelet_stop(
    inventory: Inventory, client: KubeClient, kind: FailureKind, back: Act
) -> None:
    """The band of a cut node runs from the cut's acknowledgement to the undo's, read from
    what the session really records (it once never closed: it waited for "partition
    healed")."""
    tl = Timeline()
    inventory = inventory.model_copy(
        update={"storage_network": StorageNetworkSpec(endpoints=["10.0.20.5:3260"])}
    )
    with Session(inventory, client=client, timeline=tl, lock=False) as s:
        failures.inflict(s, ["w1", "w2"], kind, undo_after_s=60.0)
        failures.bring_back(s, ["w1", "w2"], kind)
    done = [t for t in tl.snapshot() if t.kind == ACTION]
    recorded = [{"wall": t.wall, "name": t.name, "transition": t.transition} for t in done]
    end = max(t.wall for t in done) + 100.0
    bands = {name: (since, until) for name, since, until in slo_chart._phases(recorded, end)}
    assert set(bands) == {"w1", "w2"}
    for node, (since, until) in bands.items():
        down = tl.first(ACTION, node, VERB_OF[kind].at(Stage.ACKNOWLEDGED))
        up = tl.first(ACTION, node, back.at(Stage.ACKNOWLEDGED))
        assert down is not None and up is not None
        assert (since, until) == (down.wall, up.wall)  # closed at the undo, not at the end


VERB_OF = {FailureKind.PARTITION: Act.PARTITION, FailureKind.KUBELET_STOP: Act.KUBELET_STOP}
