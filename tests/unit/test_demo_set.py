"""The demo set (`make demo`: the built-in scenarios tagged @demo) keeps its promise: a few
scenarios, together every failure kind, every way of choosing targets the lab shows (a count,
a seeded range, a rack, a fraction, one chosen for a reason) and every kind of figure the
report draws (timelines, phases against budgets, SLO charts, volume moves, longevity plots)."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_bdd.parser import FeatureParser

FEATURES = Path(__file__).resolve().parents[2] / "features"
ROOT = FEATURES.parent


def demo_scenarios() -> dict[str, str]:
    """Each @demo scenario (one per Examples row of an outline) -> its steps' text."""
    out: dict[str, str] = {}
    for path in sorted(FEATURES.rglob("*.feature")):
        if any(p.startswith("kind") for p in path.relative_to(FEATURES).parts[:-1]):
            continue  # real kubelets only: not run on the lab
        feature = FeatureParser(str(path.parent), path.name).parse()
        for template in feature.scenarios.values():
            tagged = "demo" in feature.tags or "demo" in template.tags
            if not template.examples:
                if tagged:
                    out[template.name] = "\n".join(s.name for s in template.steps)
                continue
            for examples in template.examples:
                if not (tagged or "demo" in examples.tags):
                    continue
                for context in examples.as_contexts():
                    scenario = template.render(context)
                    name = f"{template.name} {sorted(context.values())}"
                    out[name] = "\n".join(s.name for s in scenario.steps)
    return out


def test_the_demo_set_is_a_few_scenarios() -> None:
    assert 6 <= len(demo_scenarios()) <= 10, sorted(demo_scenarios())


def test_the_demo_set_has_every_failure_kind() -> None:
    text = "\n".join(demo_scenarios().values())
    kinds = {
        "power loss": r"lose power|loses power|with power failure",
        "graceful shutdown": r"shut down gracefully|with graceful failure",
        "reboot": r"reboot",
        "partition": r"partition",
        "kubelet stop": r"kubelet",
    }
    missing = [k for k, pattern in kinds.items() if not re.search(pattern, text)]
    assert not missing, missing


def test_the_demo_set_chooses_targets_every_way() -> None:
    text = "\n".join(demo_scenarios().values())
    ways = {
        "a seeded range": r"\b\d+-\d+ worker nodes",
        "a count": r"\b(one|two) worker nodes",
        "a rack": r"every node of the rack",
        "a fraction": r"one third of the workers",
        "chosen for a reason": r"a worker node running",
    }
    missing = [w for w, pattern in ways.items() if not re.search(pattern, text)]
    assert not missing, missing


def test_the_demo_set_shows_every_kind_of_figure() -> None:
    """Every scenario draws its timeline and its phases against their budgets; beyond those,
    the SLO charts, a volume moving (VolumeAttachments and a Multi-Attach error on the
    timeline) and the longevity statistics' plots."""
    text = "\n".join(demo_scenarios().values())
    figures = {
        "phases against budgets": r"within the [a-z-]+ budget",
        "SLO charts": r"SLO",
        "a volume moving": r"volume is attached to",
        "longevity plots": r"statistics and plots",
    }
    missing = [f for f, pattern in figures.items() if not re.search(pattern, text)]
    assert not missing, missing


def test_make_demo_runs_the_demo_set_and_says_so() -> None:
    """scripts/demo.sh selects the @demo scenarios and titles the report as the demo set."""
    script = (ROOT / "scripts" / "demo.sh").read_text()
    assert "-m demo" in script
    assert '--title "The demo set' in script
    assert "make features" in script  # and says how to run everything


def test_every_demo_only_scenario_is_in_the_demo_set() -> None:
    """A scenario tagged @demo_only runs only with -m demo: without @demo it would never run."""
    stray = []
    for path in sorted(FEATURES.rglob("*.feature")):
        feature = FeatureParser(str(path.parent), path.name).parse()
        for template in feature.scenarios.values():
            tags = feature.tags | template.tags
            blocks = [tags | ex.tags for ex in template.examples] or [tags]
            stray += [template.name for t in blocks if "demo_only" in t and "demo" not in t]
    assert not stray, stray
