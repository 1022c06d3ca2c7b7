"""Bind every feature file in ``features/`` to the step vocabulary of ``steps/conftest.py``.

Feature files that another step module binds itself are left to it (``chaos.feature`` is
bound by ``steps/chaos_steps.py``). Run from the repository root::

    pytest steps --inventory INVENTORY.yaml --alluredir reports/allure-results
"""

from __future__ import annotations

from pathlib import Path

from pytest_bdd import scenarios

FEATURES = Path(__file__).resolve().parent.parent / "features"
#: Bound elsewhere, with their own steps.
BOUND_ELSEWHERE = frozenset({"chaos.feature"})

scenarios(*(str(p) for p in sorted(FEATURES.glob("*.feature")) if p.name not in BOUND_ELSEWHERE))
