"""Budgets the features name that the model says cannot hold: refused before anything is
touched, as a misspelt sentence is (docs/budgets.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from harness.budgets import Budgets, canonical_budget_name
from harness.errors import PowercutError
from harness.model.cluster import ClusterModel

__all__ = ["budgets_named", "refusals"]

_NAMED = re.compile(r"\bthe ([a-z][a-z-]*) budget\b")


def budgets_named(features: Sequence[Path]) -> dict[str, str]:
    """Each budget (field name) the feature files name, with where it is first named
    (``file:line``)."""
    out: dict[str, str] = {}
    for path in features:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, 1):
            if line.strip().startswith("#"):
                continue
            for m in _NAMED.finditer(line):
                try:
                    name = canonical_budget_name(m.group(1))
                except PowercutError:
                    continue  # a misspelt budget is the sentence check's to name
                out.setdefault(name, f"{path}:{number}")
    return out


def refusals(model: ClusterModel, budgets: Budgets, features: Sequence[Path]) -> list[str]:
    """Why the features cannot hold on this cluster: one line per impossible budget they
    name, with the first place it is named and the setting that dominates it."""
    named = budgets_named(features)
    found = model.impossible(budgets, list(named))
    order = {name: n for n, name in enumerate(named)}  # as first named, file by file
    return [f"{named[i.budget]}: {i}" for i in sorted(found, key=lambda i: order[i.budget])]
