"""Kubernetes' own model of a cluster's timings: each phase's least and most time, read
from the cluster's settings, with the setting that dominates it (docs/budgets.md).

Layers: ``cluster`` (the model, its file, impossible budgets) and ``derive`` / ``judge``
over it; ``read`` (the cluster's settings, read-only) and ``bounds`` over ``facts`` and
``settings``.
"""

from harness.model.bounds import Bound
from harness.model.cluster import MODEL_FILE, ClusterModel, ImpossibleBudget, load_model, read_model
from harness.model.facts import WorkloadModel
from harness.model.settings import Setting

__all__ = [
    "MODEL_FILE",
    "Bound",
    "ClusterModel",
    "ImpossibleBudget",
    "Setting",
    "WorkloadModel",
    "load_model",
    "read_model",
]
