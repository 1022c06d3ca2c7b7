"""A measured phase whose window overlaps an observation gap says so (never a silent loss)."""

from __future__ import annotations

from harness.checks import Measurement
from harness.kube.observer import OBSERVER
from harness.kube.timeline import FakeClock, Timeline
from harness.scenario.report import Measurements


def _timeline_with_gap(since: float, until: float) -> Timeline:
    tl = Timeline(FakeClock(start=1000.0))
    tl.record(
        OBSERVER,
        "nodes",
        "relisted",
        detail={
            "reason": "410 Gone: too old resource version",
            "changes": 0,
            "uncertain_s": until - since,
            "resource": "nodes",
            "since_mono": since,
        },
        mono=until,
    )
    return tl


def test_a_phase_overlapping_a_gap_carries_it_and_one_beside_it_does_not() -> None:
    tl = _timeline_with_gap(1010.0, 1014.0)
    ms = Measurements(timeline=tl)
    ms.check("w1 NotReady", Measurement("node-not-ready", 1005.0, 6.0, 20.0))
    ms.check("w2 NotReady", Measurement("node-not-ready", 1015.0, 3.0, 20.0))
    inside, beside = ms.items
    assert inside["detail"]["gaps"] == [
        {
            "resource": "nodes",
            "from_s": 10.0,
            "to_s": 14.0,
            "seconds": 4.0,
            "reason": "410 Gone: too old resource version",
        }
    ]
    assert "gaps" not in beside["detail"]


def test_a_gap_announced_after_the_phase_was_recorded_is_marked_at_the_end() -> None:
    tl = Timeline(FakeClock(start=1000.0))
    ms = Measurements(timeline=tl)
    ms.check("w1 NotReady", Measurement("node-not-ready", 1005.0, 6.0, 20.0))
    assert "gaps" not in ms.items[0]["detail"]
    tl.record(
        OBSERVER,
        "nodes",
        "relisted",
        detail={"reason": "410 Gone", "resource": "nodes", "since_mono": 1008.0},
        mono=1030.0,
    )
    assert ms.mark_gaps() == 1
    assert ms.items[0]["detail"]["gaps"][0]["seconds"] == 22.0


def test_a_phase_recorded_from_bare_figures_still_carries_the_gap_it_overlaps() -> None:
    """Phases computed from two transitions (a Node deleted after its delete request) were
    recorded without their start, so a gap inside them went unflagged; each now has one."""
    from harness.kube.names import Act, Change, Kind, Stage
    from harness.scenario.expectations import phases

    tl = _timeline_with_gap(1010.0, 1014.0)
    sent = tl.record(Kind.ACTION, "w1", Act.DELETE_NODE.at(Stage.SENT), mono=1008.0)
    tl.record(Kind.NODE, "w1", Change.DELETED, mono=1016.0)
    ms = Measurements(timeline=tl)
    phases.node_gone(tl, "w1", sent, 30.0, ms)
    (item,) = ms.items
    assert item["phase"] == "w1 Node object deleted" and item["seconds"] == 8.0
    assert item["started_mono"] == 1008.0
    assert [g["seconds"] for g in item["detail"]["gaps"]] == [4.0]
