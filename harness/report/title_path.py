"""A feature file anywhere gets an Allure title path, whatever pytest's rootdir is.

allure-pytest-bdd (2.15, 2.16) gives each scenario's result a ``titlePath`` (the tree the
report groups results in): the feature file's directories *relative to pytest's rootdir*, then
the feature's name. It computes it with ``Path.relative_to(rootdir)``, which raises
``ValueError`` for a feature file outside the rootdir; the error escapes its
``pytest_bdd_before_scenario`` hook, so every such scenario breaks before its first step. The
rootdir is not the user's choice: pytest derives it from the path-like arguments, the working
directory and the first pytest configuration file above them, so a shared feature directory
next to a project with its own ``pyproject.toml`` (or ``pytest.ini``), or the built-in features
of ``powercut run`` (whose rootdir is the step package), fall outside it.

:func:`install` wraps that function once per process: a feature under the rootdir keeps the
title path allure-pytest-bdd gives it; one outside gets the directories of pytest-bdd's own
relative name for it (``rel_filename``, which Allure's ``fullName`` already uses: the
directory holding the file), then the feature's name. powercut's pytest plugin calls
it, so ``powercut run`` and a user's plain ``pytest`` with ``scenarios(...)`` both get it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

#: Set on the wrapper, so installing twice wraps once.
_MARK = "_powercut_title_path"


def title_path_outside_rootdir(feature: Any) -> list[str]:
    """The title path of ``feature`` (a pytest-bdd ``Feature``) whose file is not under
    pytest's rootdir: the directories of its ``rel_filename`` (pytest-bdd's relative name,
    ``<directory holding the file>/<file>``), then the feature's name (else the file's)."""
    rel = getattr(feature, "rel_filename", None) or PurePath(str(feature.filename)).name
    parts = PurePath(str(rel)).parts
    return [*parts[:-1], str(feature.name or parts[-1])]


def install() -> bool:
    """Wrap allure-pytest-bdd's title path function (idempotent). False when there is no
    allure-pytest-bdd, or it no longer has that function (its own then stands)."""
    try:
        from allure_pytest_bdd import pytest_bdd_listener
    except ImportError:
        return False
    original = getattr(pytest_bdd_listener, "get_title_path", None)
    if original is None:
        return False
    if getattr(original, _MARK, False):
        return True

    @functools.wraps(original)
    def get_title_path(request: Any, feature: Any) -> list[str]:
        try:
            return list(original(request, feature))
        except ValueError:  # the feature file is not under pytest's rootdir
            return title_path_outside_rootdir(feature)

    setattr(get_title_path, _MARK, True)
    wrapper: Callable[[Any, Any], list[str]] = get_title_path
    pytest_bdd_listener.get_title_path = wrapper
    return True
