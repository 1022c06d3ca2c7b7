"""Bind the built-in features and the ``--features`` directories to the step vocabulary.

The steps come from :mod:`harness.steps.plugin` (loaded by powercut's pytest plugin). Built-in
feature files that another module binds are left to it (``chaos.feature``:
``test_chaos.py``; ``longevity/``: ``test_longevity.py``). ``powercut run`` runs this
package; by hand::

    pytest --pyargs harness.steps --inventory INVENTORY.yaml [--features DIR] [--no-builtin]
"""

from __future__ import annotations

from pytest_bdd import scenarios

from harness.steps import BUILTIN_FEATURES
from harness.steps.plugin import builtin_enabled, user_feature_dirs

#: Bound elsewhere in this package.
BOUND_ELSEWHERE = frozenset({"chaos.feature"})

_paths = [str(d) for d in user_feature_dirs()]
if builtin_enabled():
    _paths += [
        str(p) for p in sorted(BUILTIN_FEATURES.glob("*.feature")) if p.name not in BOUND_ELSEWHERE
    ]
if _paths:
    scenarios(*_paths)
