"""The demo set's own shortened scenarios (``@demo_only``) run only when the run selects the
demo set (``-m demo``, what ``make demo`` passes); every other run, ``make features``
included, deselects them and runs the full scenarios as before."""

from __future__ import annotations

from typing import Any

import pytest

from harness.steps.plugin import pytest_collection_modifyitems


class Item:
    def __init__(self, name: str, *marks: str) -> None:
        self.name, self.marks = name, set(marks)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


class Config:
    def __init__(self, markexpr: str) -> None:
        self.markexpr = markexpr
        self.deselected: list[Any] = []
        config = self

        class Hook:
            @staticmethod
            def pytest_deselected(items: list[Any]) -> None:
                config.deselected.extend(items)

        self.hook = Hook()

    def getoption(self, name: str) -> str:
        assert name == "markexpr"
        return self.markexpr


def collect(markexpr: str) -> tuple[list[str], list[str]]:
    items: list[Any] = [
        Item("full", "demo"),
        Item("short", "demo", "demo_only"),
        Item("other"),
    ]
    config: Any = Config(markexpr)
    pytest_collection_modifyitems(config, items)
    return [i.name for i in items], [i.name for i in config.deselected]


@pytest.mark.parametrize("markexpr", ["", "not slow", "critical", "demonstration"])
def test_a_run_that_does_not_select_the_demo_set_runs_no_demo_only_scenario(
    markexpr: str,
) -> None:
    assert collect(markexpr) == (["full", "other"], ["short"])


@pytest.mark.parametrize("markexpr", ["demo", "demo and not slow", "(demo)"])
def test_the_demo_set_keeps_its_demo_only_scenarios(markexpr: str) -> None:
    assert collect(markexpr) == (["full", "short", "other"], [])
