"""powercut's Gherkin step grammar (pytest-bdd) and the built-in features, shipped in the wheel.

- :mod:`harness.steps.plugin` is loaded by powercut's pytest plugin (entry point ``pytest11``),
  so every pytest run where powercut is installed knows the whole vocabulary: the
  scenario fixtures and hooks of :mod:`harness.steps.fixtures`, the scenario grammar by
  subject (:mod:`harness.steps.target_steps`, ``power_steps``, ``operator_steps``,
  ``node_steps``, ``pod_steps``, ``volume_steps``, ``service_steps``: the list is
  :data:`harness.steps.plugin.SCENARIO_STEP_MODULES`), the chaostoolkit steps of
  :mod:`harness.steps.chaos_steps` and the longevity steps of :mod:`harness.steps.longevity_steps`.
- ``features/`` holds the built-in failure cases; ``test_features.py`` (and
  ``test_chaos.py``, ``test_longevity.py``) bind them, and the user's own feature directories
  given with ``--features DIR``, to that vocabulary. ``powercut run`` runs this package's
  directory with pytest; a user's repository that runs plain ``pytest`` needs one test module::

      from pytest_bdd import scenarios

      scenarios("features")

- ``support/`` holds what the step modules share: the typed fields (``limits``), the
  sentence and subject phrases (``phrases``), tags and labels, the platforms' differences.
"""

from __future__ import annotations

from pathlib import Path

#: The package's directory: what ``powercut run`` hands to pytest. Not resolved: in a checkout
#: ``harness/steps`` is a link to the top-level ``steps/``, and pytest must see this module as
#: ``harness.steps`` (the wheel holds a real directory at the same place).
PACKAGE_DIR = Path(__file__).parent
#: The built-in feature files (``harness/features``: the top-level ``features/`` of a checkout).
BUILTIN_FEATURES = PACKAGE_DIR.parent / "features"
