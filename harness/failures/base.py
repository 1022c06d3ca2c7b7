"""What a failure kind is: the :class:`Failure` strategy every kind's module implements, the
kinds registered (by :mod:`harness.failures.registry`), and how a kind finds the driver of
a node that can do it.

A strategy says how its kind is inflicted and undone (through the plain primitives of the
:class:`~harness.session.Session`, which return the transitions they recorded), what the
journal holds for it (the session journals each node before acting), when the node counts
as down and as back (the timeline transitions :func:`harness.kube.names.downs` reads:
:data:`~harness.kube.names.DOWN_FROM`, :data:`~harness.kube.names.BACK_AT`), and whether
the node comes back by itself.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from harness.errors import PowercutError
from harness.kube.names import Act, Stage
from harness.kube.timeline import Transition
from harness.power.base import PowerDriver, ResetType, SupportsFailureKinds, UnsupportedFailure
from harness.preflight import DeepRow, judge_driver, judge_resets
from harness.session import PowerResult, Session

__all__ = [
    "Failure",
    "Infliction",
    "driver_for",
    "register",
    "registered",
    "supported_kinds",
    "supports",
]


@dataclass(frozen=True, slots=True)
class Infliction:
    """How nodes are failed, whichever the kind: each kind reads the fields that are its own
    (the dispatch, :func:`harness.failures.inflict`, builds it once for all of them)."""

    #: A kind that leaves the node on (a partition, a kubelet stop, a storage cut): undone
    #: by itself after this long (armed on the node first, in case this process dies). The
    #: power kinds ignore it: the journal holds their undo.
    undo_after_s: float = 0.0
    #: The power kinds: one of each node's power endpoints (None: its primary).
    protocol: str | None = None
    #: A reboot: the power stays off this long within its one power cycle.
    off_s: float = 0.0


class Failure(abc.ABC):
    """One failure kind: how it fails nodes and brings them back (see the module)."""

    #: The kind's name: its ``FailureKind`` value, what ``--failure`` and the Gherkin
    #: ``<failure>`` column accept, and what the drivers' ``supports`` is asked.
    name: ClassVar[str]
    #: What fails the node (``<verb> sent`` / ``acknowledged`` on the timeline) and what
    #: brings it back.
    verb: ClassVar[Act]
    undo_verb: ClassVar[Act]
    #: The transitions the node counts as down from and as back at (each in
    #: :data:`~harness.kube.names.DOWN_FROM` / :data:`~harness.kube.names.BACK_AT`). A kind
    #: that does not say them is down at its verb's acknowledgement and back at its undo
    #: verb's (:meth:`__init_subclass__`); a reboot says its own.
    down_at: ClassVar[tuple[str, ...]]
    back_at: ClassVar[tuple[str, ...]]
    #: The journal's action for each node (its undo: :attr:`undo_text`).
    journaled: ClassVar[str]
    undo_text: ClassVar[str]
    #: The node comes back with nothing done (a reboot): no undo to call.
    back_by_itself: ClassVar[bool] = False
    #: The node stays on; its undo is armed on the node itself before the failure (back by
    #: itself after ``undo_after_s``), the journal holds it too.
    undone_on_node: ClassVar[bool] = False
    #: The OS shuts down in order (a graceful shutdown).
    graceful: ClassVar[bool] = False
    #: What the step reference (docs/steps.md) says of it: what it is, what brings the
    #: node back, the steps that inflict it, and in words where the node is down from and
    #: back from (:attr:`down_at`, the return's request).
    what: ClassVar[str]
    comes_back_by: ClassVar[str]
    steps: ClassVar[str]
    down_text: ClassVar[str]
    back_text: ClassVar[str]

    def __init_subclass__(cls, **kwargs: object) -> None:
        """The down and back transitions a kind leaves unsaid: its verbs' acknowledgements."""
        super().__init_subclass__(**kwargs)
        if "verb" in cls.__dict__ and "down_at" not in cls.__dict__:
            cls.down_at = (cls.verb.at(Stage.ACKNOWLEDGED),)
        if "undo_verb" in cls.__dict__ and "back_at" not in cls.__dict__:
            cls.back_at = (cls.undo_verb.at(Stage.ACKNOWLEDGED),)

    #: What this kind needs of the node's primary power driver, as reset types: options
    #: in order, each a set the BMC must all allow (``preflight --deep`` says which one the
    #: BMC will use). Empty: the kind is done by any of the node's drivers that can.
    resets: ClassVar[tuple[tuple[ResetType, ...], ...]] = ()

    @abc.abstractmethod
    def capable(self, driver: object) -> bool:
        """Whether ``driver`` can do this kind (when it does not say so itself)."""

    def served_by(self, rows: Sequence[DeepRow]) -> tuple[bool, str]:
        """What this kind will use on a node, judged from the read-only probes of its
        drivers (``powercut preflight --deep``): (True, what) or (False, why not)."""
        if self.resets:
            return judge_resets(rows, self.resets)
        return judge_driver(rows, lambda driver: supports(driver, self))

    def unsupported(self, session: Session, nodes: Sequence[str]) -> str | None:
        """Why one of ``nodes`` cannot be failed so (None: each can)."""
        del session, nodes
        return None

    @abc.abstractmethod
    def inflict(self, session: Session, nodes: list[str], how: Infliction) -> PowerResult:
        """Fail ``nodes`` together, as ``how`` says (each kind reads what is its own); the
        result holds the transitions recorded."""

    @abc.abstractmethod
    def bring_back(
        self, session: Session, nodes: list[str], *, protocol: str | None
    ) -> PowerResult:
        """Undo the failure on ``nodes`` now (failed by this process or an earlier one);
        the result holds the transitions recorded (none when nothing is owed)."""

    def returned(
        self, result: PowerResult, sent: Mapping[str, Transition]
    ) -> tuple[dict[str, Transition], dict[str, Transition]]:
        """For a kind that comes back by itself: per node where its return was requested
        and acknowledged within ``result`` (the failure's own); ``sent``: its requests."""
        del result, sent
        return {}, {}


_REGISTERED: dict[str, Failure] = {}


def register(failure: Failure) -> Failure:
    """Make ``failure`` known by its name (:mod:`harness.failures.registry` does it)."""
    _REGISTERED[failure.name] = failure
    return failure


def registered() -> Mapping[str, Failure]:
    """Every failure kind, by name, in registration order."""
    return dict(_REGISTERED)


def supports(driver: object, failure: Failure) -> bool:
    """Whether ``driver`` can fail its node with ``failure``: a driver with a
    ``supports(name)`` method answers for itself, else the kind judges
    (:meth:`Failure.capable`)."""
    if isinstance(driver, SupportsFailureKinds):
        return driver.supports(failure.name)
    return failure.capable(driver)


def supported_kinds(driver: object) -> list[str]:
    """The names of the failure kinds ``driver`` can do, in registration order."""
    return [name for name, f in _REGISTERED.items() if supports(driver, f)]


def driver_for(session: Session, node: str, failure: Failure) -> tuple[PowerDriver, str]:
    """The node's first driver (primary, then alternatives, SSH last) that can do
    ``failure``, and its protocol; :class:`UnsupportedFailure` when none can."""
    spec = session.inventory.node(node)
    protocols = [spec.power.driver, *(p.driver for p in spec.power_alternatives)]
    if spec.ssh is not None and "ssh" not in protocols:
        protocols.append("ssh")
    first: PowerDriver | None = None
    for protocol in dict.fromkeys(protocols):
        try:
            driver = session.driver(node, protocol)
        except PowercutError:
            continue
        first = first or driver
        if supports(driver, failure):
            return driver, protocol
    which: object = first if first is not None else object()
    raise UnsupportedFailure(
        node, failure.name, driver=type(which).__name__, supported=supported_kinds(which)
    )
