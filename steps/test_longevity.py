"""Bind the built-in ``features/longevity/longevity.feature`` to the longevity steps
(:mod:`harness.steps.longevity_steps`, loaded by the plugin). Skipped with ``--no-builtin``."""

from __future__ import annotations

from pytest_bdd import scenarios

from harness.steps.plugin import builtin_enabled, builtin_feature

if builtin_enabled():
    scenarios(str(builtin_feature("longevity", "longevity.feature")))
