"""What the chaostoolkit actions and probes share: the inventory, sessions, budgets, nodes.

The inventory comes from the experiment's configuration (key ``powercut_inventory``) or,
when the experiment has none, from the ``POWERCUT_INVENTORY`` environment variable. The
journal is the inventory's (``harness.session.journal_path_for``), under
``POWERCUT_STATE_DIR``, so ``powercut recover`` finds whatever an experiment left.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from harness.budgets import canonical_budget_name, parse_duration
from harness.errors import ConfigError
from harness.inventory import Inventory, NodeRole, load_inventory
from harness.journal import Journal, JournalEntry
from harness.kube.client import KubeClient
from harness.kube.observer import Observer, workload_of
from harness.kube.target import client_for
from harness.session import Session, journal_path_for
from harness.settings import INVENTORY, Settings, or_environment

#: The configuration key of an experiment that names the inventory file.
CONFIG_KEY: Final = "powercut_inventory"
#: The environment variable read when the configuration does not name one.
ENV_VAR: Final = INVENTORY.name

#: Messages go to chaostoolkit's own logger, so they reach its console and log file.
log = logging.getLogger("chaostoolkit.powercut")

Configuration = Mapping[str, Any] | None
#: A budget name (``"pod-eviction"``), a duration (``"90s"``, ``"6m"``) or seconds.
Within = str | float | None


def inventory_path(configuration: Configuration, settings: Settings | None = None) -> Path:
    """The configuration's inventory, else POWERCUT_INVENTORY (``settings``, or the
    environment as it is now: chaostoolkit calls each activity afresh)."""
    value = (configuration or {}).get(CONFIG_KEY) or or_environment(settings).inventory
    if not value:
        raise ConfigError(
            f"no inventory: set the experiment's configuration key {CONFIG_KEY!r} "
            f'(for example {{"type": "env", "key": "{ENV_VAR}"}}) or the environment '
            f"variable {ENV_VAR}"
        )
    return Path(str(value)).expanduser()


def load(configuration: Configuration) -> Inventory:
    """The inventory named by the configuration or ``POWERCUT_INVENTORY``."""
    return load_inventory(inventory_path(configuration))


def kube_client(inventory: Inventory) -> KubeClient:
    return client_for(inventory)


@contextlib.contextmanager
def session(inventory: Inventory) -> Iterator[Session]:
    """A :class:`Session` for one chaostoolkit activity.

    It takes the cluster lock and journals each disruption with its undo before acting,
    like any powercut run, but does not undo on exit: the disruption must outlive the
    activity (the experiment's rollbacks, or ``powercut recover``, undo it).
    """
    client = kube_client(inventory)
    try:
        with Session(
            inventory, client=client, undo_on_exit=False, say=lambda m: log.info("%s", m)
        ) as s:
            yield s
    finally:
        client.close()


@contextlib.contextmanager
def observe(
    inventory: Inventory, resources: Iterable[str], namespaces: Sequence[str] | None = None
) -> Iterator[Observer]:
    """An observer of ``resources``, started (listed once) and stopped around the block."""
    client = kube_client(inventory)
    try:
        with Observer(client, namespaces, resources=tuple(resources)) as observer:
            yield observer
    finally:
        client.close()


# -- budgets ---------------------------------------------------------------------------------


def seconds(inventory: Inventory, within: Within, default: Sequence[str] = ()) -> float:
    """How long to wait: ``within`` as a budget name, a duration or seconds; when None, the
    sum of the ``default`` budgets of the inventory's profile (0 when there are none)."""
    budgets = inventory.timing_budgets()
    if within is None or within == "":
        return sum(budgets.get(name) for name in default)
    if isinstance(within, str):
        try:
            return parse_duration(within, field="within")
        except ConfigError:
            pass
        try:
            return budgets.get(canonical_budget_name(within, field="within"))
        except ConfigError as exc:
            raise ConfigError(
                f"within: {within!r} is neither a duration ('90s', '6m') nor a budget; {exc}",
                field="within",
            ) from None
    return parse_duration(within, field="within")


def deadline(inventory: Inventory, within: Within, default: Sequence[str] = ()) -> float:
    """A ``time.monotonic()`` deadline ``seconds(...)`` from now."""
    return time.monotonic() + seconds(inventory, within, default)


# -- nodes -----------------------------------------------------------------------------------


def names(value: str | Sequence[str] | None) -> list[str]:
    """Node names from ``"w1"``, ``"w1,w2"``, ``["w1", "w2"]`` or nothing."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"node names must be strings, got {item!r}", field="nodes")
        name = item.strip()
        if name and name not in out:
            out.append(name)
    return out


def candidates(inventory: Inventory, role: str | None, rack: str | None) -> list[str]:
    """Nodes of ``role`` (``worker``, ``control-plane``, or any when empty) in ``rack``."""
    nodes = inventory.nodes_by_role(NodeRole(role)) if role else list(inventory.nodes)
    if rack:
        in_rack = {n.name for n in inventory.nodes_in_rack(rack)}
        nodes = [n for n in nodes if n.name in in_rack]
    return [n.name for n in nodes]


def busiest(client: KubeClient, nodes: Sequence[str], count: int) -> list[str]:
    """The ``count`` nodes running the most pods a failure would displace (no DaemonSet
    or mirror pods, none Terminating); ties keep the inventory order."""
    load: dict[str, int] = dict.fromkeys(nodes, 0)
    items, _ = client.list("/api/v1/pods")
    for pod in items:
        meta = pod.get("metadata") or {}
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if node not in load or meta.get("deletionTimestamp"):
            continue
        owner = workload_of(meta, node)
        if owner.startswith(("DaemonSet/", "Node/")):
            continue
        load[node] += 1
    ranked = sorted(nodes, key=lambda n: -load[n])
    return ranked[:count]


# -- the journal -----------------------------------------------------------------------------


def owed(inventory: Inventory, actions: Iterable[str] | None = None) -> list[JournalEntry]:
    """Entries of the inventory's journal that still owe their undo (of these actions, or
    all), oldest first; read without taking the journal's lock."""
    path = journal_path_for(inventory)
    if not path.exists():
        return []
    wanted = None if actions is None else set(actions)
    return [e for e in Journal.read(path) if e.owes_undo and (wanted is None or e.action in wanted)]


def node_of(entry: JournalEntry) -> str:
    return entry.target.removeprefix("node/")


def owed_in(s: Session, actions: Iterable[str]) -> list[JournalEntry]:
    """Like :func:`owed`, from the journal the session holds open."""
    assert s.journal is not None
    wanted = set(actions)
    return [e for e in s.journal.entries() if e.owes_undo and e.action in wanted]


def nodes_of(entries: Iterable[JournalEntry]) -> list[str]:
    out: list[str] = []
    for entry in entries:
        node = node_of(entry)
        if node not in out:
            out.append(node)
    return out


def mark_undone(s: Session, actions: Iterable[str], nodes: Iterable[str]) -> list[str]:
    """Mark the session journal's owed entries of ``actions`` on ``nodes`` undone (their
    undo has just been carried out); returns the entry ids."""
    assert s.journal is not None
    wanted, targets = set(actions), {f"node/{n}" for n in nodes}
    done: list[str] = []
    for entry in s.journal.entries():
        if entry.owes_undo and entry.action in wanted and entry.target in targets:
            s.journal.mark_undone(entry.id)
            done.append(entry.id)
    return done
