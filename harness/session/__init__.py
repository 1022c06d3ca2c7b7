"""A disruption session: what every scenario, the CLI and the chaos extension act through.

A session holds the cluster lock (a Lease), journals every disruption with its undo
*before* acting (so ``powercut recover`` can finish the job after a crash), runs the undos
when the scenario ends, fails or is interrupted (Ctrl-C, SIGTERM), checks each disruption
against the inventory's blast-radius limits, and records its own actions in the timeline.
With ``dry_run`` it only describes what it would do.

One concern a module, top to bottom (the import-linter contract "session" keeps it so):

- ``power.py``, ``cuts.py``, ``kubernetes.py``, ``fencing.py``: the disruptions, each a
  part of :class:`Session` (power off, on and cycle, synchronized; a partition or a stopped
  kubelet; cordon, drain, delete a Node, re-run a Job; fencing and what needs it);
- ``core.py``: what they share: the lifecycle (enter, ``finish``, exit), the journal's
  bookkeeping, the blast-radius check, the power drivers;
- ``stop.py`` the stop conditions, ``parallel.py`` acting on many nodes at once,
  ``executor.py`` what carries out the journal's undos;
- ``restore.py`` reading a node's power and switching it back on, ``paths.py`` where the
  state and the journals are.
"""

from __future__ import annotations

from harness.session.core import Say, SessionCore
from harness.session.cuts import Cuts
from harness.session.executor import ClusterExecutor
from harness.session.fencing import Fencing
from harness.session.kubernetes import KubernetesActions, node_manifest
from harness.session.parallel import PowerResult
from harness.session.paths import journal_path_for, state_dir
from harness.session.power import PowerActions
from harness.session.restore import (
    power_protocol_for_restore,
    read_power,
    recent_power_actions,
    restore_power,
)
from harness.session.stop import STOP_SIGNAL, StoppedByCondition, Watcher


class Session(PowerActions, Cuts, KubernetesActions, Fencing, SessionCore):
    """A disruption session (see the module's docstring): use it as a context manager, or
    enter it and end it with :meth:`~SessionCore.finish`, which returns what its undos did."""


__all__ = [
    "STOP_SIGNAL",
    "ClusterExecutor",
    "PowerResult",
    "Say",
    "Session",
    "StoppedByCondition",
    "Watcher",
    "journal_path_for",
    "node_manifest",
    "power_protocol_for_restore",
    "read_power",
    "recent_power_actions",
    "restore_power",
    "state_dir",
]
