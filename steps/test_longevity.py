"""Bind ``features/longevity/longevity.feature`` to the steps of ``steps/longevity_steps.py``.

Run with the rest of the features (``powercut run``), or alone:
``pytest steps/test_longevity.py --inventory INVENTORY.yaml``.
"""

from __future__ import annotations

from pathlib import Path

from pytest_bdd import scenarios

from steps.longevity_steps import *  # noqa: F403 - the step definitions are fixtures

scenarios(
    str(Path(__file__).resolve().parent.parent / "features" / "longevity" / "longevity.feature")
)
