"""powercut's Gherkin step definitions (pytest-bdd) and the glue they share.

``conftest.py`` holds the scenario fixtures and every shared step; ``support/`` holds the
typed helpers the steps call (victim selection, lost pods, steady state, reporting).
"""
