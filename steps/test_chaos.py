"""Bind the built-in ``features/chaos.feature`` to the chaostoolkit steps
(:mod:`harness.steps.chaos_steps`, loaded by the plugin). Skipped with ``--no-builtin``."""

from __future__ import annotations

from pytest_bdd import scenarios

from harness.steps.plugin import builtin_enabled, builtin_feature

if builtin_enabled():
    scenarios(str(builtin_feature("chaos.feature")))
