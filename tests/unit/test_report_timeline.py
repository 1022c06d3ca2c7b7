"""Swimlane pictures of a scenario timeline (harness.report.timeline_svg)."""

from __future__ import annotations

import copy
import random
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any

import pytest

from harness.report.timeline_svg import (
    build_swimlanes,
    nice_step,
    render_timeline_html,
    render_timeline_svg,
    state_colour,
)

NS = {"svg": "http://www.w3.org/2000/svg"}


def rec(
    mono: float, kind: str, name: str, transition: str, ns: str = "", **detail: Any
) -> dict[str, Any]:
    return {
        "mono": mono,
        "wall": 1_700_000_000.0 + mono,
        "kind": kind,
        "namespace": ns,
        "name": name,
        "transition": transition,
        "detail": detail,
    }


def power_loss() -> list[dict[str, Any]]:
    """Worker w1 loses power: its pod goes NotReady, Terminating and is deleted."""
    return [
        rec(100.0, "Node", "w1", "observed", ready="True", zone="a"),
        rec(100.0, "Node", "w2", "observed", ready="True", zone="b"),
        rec(
            100.0,
            "Pod",
            "web-1",
            "observed",
            "app",
            node="w1",
            phase="Running",
            ready=True,
            terminating=False,
        ),
        rec(
            100.0,
            "Pod",
            "web-2",
            "observed",
            "app",
            node="w2",
            phase="Running",
            ready=True,
            terminating=False,
        ),
        rec(100.0, "Observer", "nodes", "synced", objects=2),
        rec(101.0, "Action", "w1", "power-off sent", driver="redfish"),
        rec(101.25, "Action", "w1", "power-off acknowledged"),
        rec(141.0, "Node", "w1", "not-ready", status="Unknown", previous="True"),
        rec(141.2, "Node", "w1", "taint-added", taint="node.kubernetes.io/unreachable:NoExecute"),
        rec(141.5, "Pod", "web-1", "not-ready", "app", node="w1"),
        rec(401.0, "Pod", "web-1", "terminating", "app", node="w1", grace_s=30),
        rec(402.0, "Pod", "web-3", "created", "app", node="w2", phase="Pending", ready=False),
        rec(404.0, "Pod", "web-3", "phase", "app", node="w2", phase="Running"),
        rec(405.0, "Pod", "web-3", "ready", "app", node="w2"),
        rec(420.0, "Action", "w1", "delete-node sent"),
        rec(460.0, "Pod", "web-1", "deleted", "app", node="w1"),
        rec(500.0, "Action", "w1", "power-on sent"),
        rec(530.0, "Node", "w1", "ready", status="True", previous="Unknown"),
    ]


def parse_svg(svg: str) -> ET.Element:
    """Parse our own output (well-formedness is what is tested)."""
    return ET.fromstring(svg)  # noqa: S314


def lanes_of(svg: str) -> dict[str, ET.Element]:
    root = parse_svg(svg)
    return {g.get("data-lane", ""): g for g in root.iterfind(".//svg:g[@class='lane']", NS)}


def test_svg_is_well_formed_with_lanes_and_markers() -> None:
    svg = render_timeline_svg(power_loss(), title="w1 power loss")
    root = parse_svg(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.findtext("svg:title", namespaces=NS) == "w1 power loss"
    lanes = lanes_of(svg)
    # every node, and the pods something happened to (web-2 was only observed)
    assert list(lanes) == ["node/w1", "node/w2", "pod/app/web-1", "pod/app/web-3"]
    markers = root.findall(".//svg:g[@class='marker']", NS)
    assert [m.get("data-label") for m in markers] == [
        "w1: power-off sent",
        "w1: power-off acknowledged",
        "w1: delete-node sent",
        "w1: power-on sent",
    ]
    for m in markers:
        assert m.find("svg:line", NS) is not None
    # time axis in seconds from the first event
    ticks = [t.text for t in root.iterfind(".//svg:g[@class='axis-ticks']/svg:text", NS)]
    assert ticks[0] == "0s"
    assert ticks[-1] == "450s"


def test_phases_follow_the_transitions() -> None:
    sl = build_swimlanes(power_loss())
    by_key = {lane.key: lane for lane in sl.lanes}
    w1 = by_key["node/w1"]
    assert [(p.state, p.start, p.end) for p in w1.phases] == [
        ("Ready", 0.0, 41.0),
        ("NotReady (Unknown)", 41.0, 430.0),
        ("Ready", 430.0, 430.0),
    ]
    assert w1.phases[-1].open
    assert [p.label for p in w1.points] == ["taint-added node.kubernetes.io/unreachable:NoExecute"]
    web1 = by_key["pod/app/web-1"]
    assert [(p.state, p.start, p.end) for p in web1.phases] == [
        ("Running", 0.0, 41.5),
        ("NotReady", 41.5, 301.0),
        ("Terminating", 301.0, 360.0),
    ]
    assert not web1.phases[-1].open
    assert [p.label for p in web1.points] == ["deleted"]
    web3 = by_key["pod/app/web-3"]
    assert [p.state for p in web3.phases] == ["Pending", "NotReady", "Running"]
    assert web3.label == "app/web-3 @w2"
    assert sl.span == 430.0
    assert [round(m.t, 2) for m in sl.markers] == [1.0, 1.25, 320.0, 400.0]


def test_phase_bars_are_drawn_with_tooltips() -> None:
    lanes = lanes_of(render_timeline_svg(power_loss()))
    bars = lanes["pod/app/web-1"].findall("svg:rect[@class='phase']", NS)
    assert [b.get("data-state") for b in bars] == ["Running", "NotReady", "Terminating"]
    tips = [b.findtext("svg:title", namespaces=NS) for b in bars]
    assert tips[2] == "app/web-1 @w1: Terminating from +301.0s to +360.0s (59.0s)"
    assert bars[2].get("fill") == state_colour("Terminating")
    points = lanes["node/w1"].findall("svg:circle", NS)
    assert len(points) == 1


def test_all_pods_option_draws_unaffected_pods() -> None:
    lanes = lanes_of(render_timeline_svg(power_loss(), all_pods=True))
    assert "pod/app/web-2" in lanes


def test_other_kinds_get_a_lane_when_affected() -> None:
    records = [
        *power_loss(),
        rec(100.0, "Service", "web", "observed", "app", ready=2, total=2),
        rec(142.0, "Service", "web", "endpoints", "app", ready=1, total=2),
        rec(100.0, "VolumeAttachment", "va-1", "observed", node="w1", pv="pv-1", attached=True),
        rec(100.0, "VolumeAttachment", "va-2", "observed", node="w2", pv="pv-2", attached=True),
        rec(410.0, "Pod", "db-0", "multi-attach", "app", volume="pv-1", count=3),
    ]
    sl = build_swimlanes(records)
    keys = [lane.key for lane in sl.lanes]
    assert "service/app/web" in keys
    assert "volumeattachment/va-1" not in keys  # only observed
    assert "pod/app/db-0" in keys  # an event makes it affected
    svc = next(lane for lane in sl.lanes if lane.key == "service/app/web")
    assert [p.state for p in svc.phases] == ["2/2 ready", "1/2 ready"]
    assert state_colour("1/2 ready") != state_colour("2/2 ready")
    assert state_colour("0/2 ready") == state_colour("NotReady")


def test_text_is_escaped() -> None:
    nasty = 'evil<script>alert("x")</script>&\'\x07'
    records = [
        rec(0.0, "Node", nasty, "observed", ready="True"),
        rec(1.0, "Action", nasty, "power-off sent", note="<b>&amp;</b>"),
        rec(2.0, "Node", nasty, "not-ready", status="False"),
    ]
    svg = render_timeline_svg(records, title='<title> & "quotes"')
    assert "<script>" not in svg
    assert "<b>" not in svg
    assert "\x07" not in svg
    root = parse_svg(svg)  # well-formed despite everything
    assert root.findtext("svg:title", namespaces=NS) == '<title> & "quotes"'
    (marker,) = root.findall(".//svg:g[@class='marker']", NS)
    label = marker.findtext("svg:text", namespaces=NS) or ""
    assert label.startswith('evil<script>alert("x")</script>&\'')
    assert "note=<b>&amp;</b>" in (marker.findtext("svg:title", namespaces=NS) or "")
    html = render_timeline_html(records, title="<t>")
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


def test_output_is_deterministic() -> None:
    records = power_loss()
    assert render_timeline_svg(records) == render_timeline_svg(copy.deepcopy(records))
    # input order does not matter (records with equal timestamps keep their input order)
    distinct = [dict(r, mono=r["mono"] + i * 1e-3) for i, r in enumerate(records)]
    shuffled = distinct[:]
    random.Random(7).shuffle(shuffled)
    assert render_timeline_svg(shuffled) == render_timeline_svg(distinct)


def test_relative_times_and_origin() -> None:
    rel = [
        {
            "t": 0.0,
            "kind": "node",
            "name": "w1",
            "transition": "observed",
            "detail": {"ready": "True"},
        },
        {"t": 12.5, "kind": "action", "name": "w1", "transition": "drain sent"},
        {"t": 20.0, "kind": "node", "name": "w1", "transition": "not-ready", "detail": {}},
    ]
    sl = build_swimlanes(rel)
    assert [(p.state, p.start) for p in sl.lanes[0].phases] == [("Ready", 0.0), ("NotReady", 20.0)]
    shifted = build_swimlanes(power_loss(), origin=90.0)
    assert shifted.markers[0].t == pytest.approx(11.0)


def test_bad_records_are_rejected() -> None:
    with pytest.raises(ValueError, match="#1"):
        build_swimlanes([rec(0.0, "Node", "w1", "observed"), {"kind": "Node", "name": "w2"}])
    with pytest.raises(TypeError, match="mapping"):
        build_swimlanes([["not", "a", "mapping"]])  # type: ignore[list-item]


def test_empty_timeline_renders_a_placeholder() -> None:
    svg = render_timeline_svg([])
    assert "no transitions recorded" in svg
    parse_svg(svg)


def test_html_page_has_the_picture_and_a_row_per_record() -> None:
    html = render_timeline_html(power_loss(), title="w1")

    class Counter(HTMLParser):
        rows = 0
        svgs = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "tr":
                self.rows += 1
            if tag == "svg":
                self.svgs += 1

    parser = Counter()
    parser.feed(html)
    assert parser.svgs == 1
    assert parser.rows == len(power_loss()) + 1  # header


@pytest.mark.parametrize(
    ("span", "step"), [(0.0, 1.0), (0.9, 0.1), (9.0, 1.0), (430.0, 50.0), (3600.0, 500.0)]
)
def test_nice_step(span: float, step: float) -> None:
    assert nice_step(span) == pytest.approx(step)
