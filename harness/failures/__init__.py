"""The failure kinds: one module per way the harness fails a node, each a strategy
(:class:`~harness.failures.base.Failure`) saying how the failure is inflicted and undone,
what the journal holds, when the node counts as down and as back, and whether it comes back
by itself.

- ``base.py``: what a kind is, and how it finds a node's driver that can do it;
- ``power_loss.py``, ``graceful.py``, ``reboot.py``, ``partition.py``, ``kubelet_stop.py``,
  ``storage_network.py``: the kinds (``running.py``: what the kinds that leave the node on share);
- ``registry.py``: :class:`FailureKind` and each kind's strategy;
- ``dispatch.py``: :func:`inflict`, :func:`restore`, :func:`bring_back`, what the steps,
  longevity and the chaostoolkit extension call.

Adding a kind: docs/DESIGN.md, "Adding a failure kind".
"""

from __future__ import annotations

from harness.failures.base import Failure, supported_kinds, supports
from harness.failures.dispatch import Inflicted, Restored, bring_back, inflict, restore, unsupported
from harness.failures.registry import REGISTRY, FailureKind, strategy

__all__ = [
    "REGISTRY",
    "Failure",
    "FailureKind",
    "Inflicted",
    "Restored",
    "bring_back",
    "inflict",
    "restore",
    "strategy",
    "supported_kinds",
    "supports",
    "unsupported",
]
