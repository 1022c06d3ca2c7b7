"""What the journal holds: entry states, undo specs (undos are data, carried out by an injected
:class:`UndoExecutor`), entries and notes, and the results and errors of undos.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import socket
from collections.abc import Mapping
from typing import Any, Final, Protocol, runtime_checkable

from harness.errors import PermanentError


class EntryState(enum.StrEnum):
    PENDING = "pending"  # undo registered, action started
    DONE = "done"  # action completed; undo owed
    FAILED = "failed"  # action raised; it may have half-happened; undo owed
    NOT_DONE = "not-done"  # action raised before it changed anything; nothing owed
    UNDONE = "undone"  # undo completed, or the target already read restored
    FORGOTTEN = "forgotten"  # an operator fixed it by hand (`powercut journal forget`)


#: The states in which an entry still owes its undo.
OWED_STATES: Final[frozenset[EntryState]] = frozenset(
    (EntryState.PENDING, EntryState.DONE, EntryState.FAILED)
)


@runtime_checkable
class UndoExecutor(Protocol):
    """What :func:`recover` needs to put the cluster back. Every method must be idempotent.

    A method may return a note saying the target already read restored (``"already on,
    read through ipmi"``): the entry is then settled with that note instead of "undone".
    """

    def power_on(self, node: str) -> str | None: ...

    def uncordon(self, node: str) -> str | None: ...

    def remove_taint(self, node: str, key: str, effect: str) -> str | None: ...

    def restore_node(self, node: str, manifest: dict[str, Any]) -> str | None: ...

    # Optional, for the failure kinds beyond power (an executor without them reports the
    # undo as failed, naming it): ``heal(node, protocol)`` reconnects a partitioned node,
    # ``start_kubelet(node, protocol)`` starts a stopped kubelet, through that driver;
    # ``heal_storage(node, protocol)`` gives a node its storage network back;
    # ``restore_job(namespace, name, manifest)`` creates a re-run Job again from the manifest
    # stored before it was deleted, unless it exists.


UNDO_ACTIONS: Final[frozenset[str]] = frozenset(
    (
        "power_on",
        "uncordon",
        "remove_taint",
        "restore_node",
        "heal",
        "start_kubelet",
        "heal_storage",
        "restore_job",
    )
)


@dataclasses.dataclass(frozen=True, slots=True)
class UndoSpec:
    """An undo as data: the :class:`UndoExecutor` method to call and its keyword arguments."""

    action: str
    args: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.action not in UNDO_ACTIONS:
            raise PermanentError(
                f"unknown undo action {self.action!r}; must be one of: "
                f"{', '.join(sorted(UNDO_ACTIONS))}"
            )
        try:
            json.dumps(dict(self.args))
        except (TypeError, ValueError) as exc:
            raise PermanentError(
                f"undo {self.action} arguments are not JSON-serialisable: {exc}"
            ) from None

    @classmethod
    def power_on(cls, node: str) -> UndoSpec:
        return cls("power_on", {"node": node})

    @classmethod
    def uncordon(cls, node: str) -> UndoSpec:
        return cls("uncordon", {"node": node})

    @classmethod
    def remove_taint(cls, node: str, key: str, effect: str) -> UndoSpec:
        return cls("remove_taint", {"node": node, "key": key, "effect": effect})

    @classmethod
    def restore_node(cls, node: str, manifest: Mapping[str, Any]) -> UndoSpec:
        return cls("restore_node", {"node": node, "manifest": dict(manifest)})

    @classmethod
    def heal(cls, node: str, protocol: str) -> UndoSpec:
        """Reconnect a partitioned node through the driver that cut it."""
        return cls("heal", {"node": node, "protocol": protocol})

    @classmethod
    def start_kubelet(cls, node: str, protocol: str) -> UndoSpec:
        """Start a stopped kubelet through the driver that stopped it."""
        return cls("start_kubelet", {"node": node, "protocol": protocol})

    @classmethod
    def heal_storage(cls, node: str, protocol: str) -> UndoSpec:
        """Give a node its storage network back through the driver that cut it."""
        return cls("heal_storage", {"node": node, "protocol": protocol})

    def run(self, executor: UndoExecutor) -> str | None:
        """Carry the undo out; returns the executor's note when the target already read
        restored (nothing had to be done), else None."""
        method = getattr(executor, self.action, None)
        if not callable(method):
            raise PermanentError(f"the undo executor cannot {self.action}")
        note = method(**self.args)
        return note if isinstance(note, str) else None

    @classmethod
    def restore_job(cls, namespace: str, name: str, manifest: Mapping[str, Any]) -> UndoSpec:
        """Create a Job again from its manifest (a re-run that deleted it and did not get to
        create it again)."""
        return cls(
            "restore_job", {"namespace": namespace, "name": name, "manifest": dict(manifest)}
        )

    def __str__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.args.items() if k != "manifest")
        return f"{self.action}({shown})"


@dataclasses.dataclass(slots=True)
class JournalEntry:
    """One disruption as the journal knows it."""

    id: str
    action: str
    target: str
    undo: UndoSpec
    state: EntryState
    started_at: float  # wall clock, seconds since the epoch
    ended_at: float | None = None  # when the action returned or raised
    undone_at: float | None = None
    error: str | None = None  # why the action failed
    undo_error: str | None = None  # why the last undo attempt failed
    undo_attempts: int = 0
    by: str | None = None  # host/pid-N of the process that began it (None: older journals)
    note: str | None = None  # how it was settled: "already on ...", an operator's reason
    proc: str | None = None  # boot id and start time of ``by`` (tells a reused pid apart)

    @property
    def owes_undo(self) -> bool:
        return self.state in OWED_STATES

    @property
    def pid(self) -> int | None:
        """The process id of ``by`` when it ran on this host, else None."""
        if self.by is None:
            return None
        host, _, rest = self.by.partition("/pid-")
        text = rest.split("/", 1)[0]
        return int(text) if host == socket.gethostname() and text.isdigit() else None

    @property
    def duration_s(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.started_at

    def __str__(self) -> str:
        return f"{self.action} {self.target} [{self.state}] (undo: {self.undo})"


@dataclasses.dataclass(frozen=True, slots=True)
class JournalNote:
    """Something the journal keeps that owes nothing, such as a fencing override: an
    operator's explicit permission to act as if a node were off when no BMC confirmed it."""

    action: str
    target: str
    detail: str
    at: float  # wall clock, seconds since the epoch
    by: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class UndoResult:
    """What one undo did (``seconds``: how long it took, when measured)."""

    description: str
    ok: bool
    error: str | None = None
    entry_id: str | None = None
    seconds: float | None = None
    note: str | None = None  # the target already read restored: nothing had to be done


class UndoFailed(PermanentError):
    """Some undos failed: the cluster is not fully back. ``results`` says which."""

    def __init__(self, results: list[UndoResult]) -> None:
        self.results = results
        failed = [r for r in results if not r.ok]
        lines = "; ".join(f"{r.description}: {r.error}" for r in failed)
        super().__init__(
            f"{len(failed)} of {len(results)} undos failed, the cluster is not fully restored "
            f"(run `powercut recover`): {lines}"
        )


def describe_exception(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
