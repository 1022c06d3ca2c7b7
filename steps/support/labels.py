"""Allure labels from Gherkin tags: severity, epic and story.

allure-pytest-bdd labels a scenario with its ``feature`` only. The report's Behaviors view
groups by epic, then feature, then story, so each scenario also gets:

* **epic** from the feature's (or scenario's) tag ``@epic:<slug>``: ``@epic:node-failure``
  is "Node failure" (:data:`EPICS`; another slug is shown as its words, capitalised);
* **story** from a tag ``@story:<slug>`` when there is one, else the scenario's name (an
  outline's name as written, so all its examples are one story);
* **severity** from ``@blocker`` ... ``@trivial``, which also stay (registered) markers.

:mod:`harness.steps.fixtures` exposes the two hooks below (through the plugin, to every test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import allure
import pytest
from pytest_bdd.scenario import scenario_wrapper_template_registry

#: Allure severities; a feature tag ``@critical`` becomes the marker and the Allure label.
SEVERITIES = ("blocker", "critical", "normal", "minor", "trivial")
EPIC_TAG = "epic:"
STORY_TAG = "story:"
#: The epics of powercut's feature library, by tag slug.
EPICS = {
    "node-failure": "Node failure",
    "rack-failure": "Rack failure",
    "control-plane": "Control plane",
    "planned-maintenance": "Planned maintenance",
    "longevity": "Longevity",
    "interoperability": "Interoperability",
}


def _words(slug: str) -> str:
    text = slug.replace("-", " ").replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def epic_of(tags: Iterable[str]) -> str | None:
    """The epic named by an ``epic:<slug>`` tag (the first in name order), else None."""
    slugs = sorted(t[len(EPIC_TAG) :] for t in tags if t.startswith(EPIC_TAG))
    if not slugs:
        return None
    return EPICS.get(slugs[0]) or _words(slugs[0])


def story_of(tags: Iterable[str], scenario_name: str) -> str:
    """The story named by a ``story:<slug>`` tag, else the scenario's name."""
    slugs = sorted(t[len(STORY_TAG) :] for t in tags if t.startswith(STORY_TAG))
    return _words(slugs[0]) if slugs else scenario_name


@pytest.hookimpl(tryfirst=True)  # before pytest-bdd's default, whichever plugin loads first
def pytest_bdd_apply_tag(tag: str, function: object) -> bool | None:
    """Severity tags become their (registered) marker and the Allure severity label; epic and
    story tags are labels only (see :func:`pytest_bdd_before_scenario`), not markers."""
    if tag.startswith((EPIC_TAG, STORY_TAG)):
        return True
    if tag not in SEVERITIES:
        return None  # pytest-bdd's default: the tag becomes a marker
    getattr(pytest.mark, tag)(function)
    severity = cast(Callable[[object], Callable[[object], object]], allure.severity)
    severity(allure.severity_level(tag))(function)
    return True


@pytest.hookimpl(trylast=True)  # after allure-pytest-bdd has started the test result
def pytest_bdd_before_scenario(request: pytest.FixtureRequest, feature: Any, scenario: Any) -> None:
    """Label the running scenario with its epic and story."""
    rule = getattr(scenario, "rule", None)
    tags = set(scenario.tags) | set(feature.tags) | (set(rule.tags) if rule else set())
    function = getattr(request.node, "function", None)
    template = scenario_wrapper_template_registry.get(function) if function else None
    label = cast(Callable[[str], None], allure.dynamic.epic)
    epic = epic_of(tags)
    if epic:
        label(epic)
    label = cast(Callable[[str], None], allure.dynamic.story)
    label(story_of(tags, template.name if template else scenario.name))
