"""The SLO chart: series, threshold, breaches and the disruption's phases, as SVG."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness.report.slo_chart import slo_chart_svg

NS = "{http://www.w3.org/2000/svg}"


def doc(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "web-available",
        "expr": 'min(powercut_service_up{service="web"})',
        "comparison": ">=",
        "threshold": 1.0,
        "for_s": None,
        "start": 1000.0,
        "end": 1060.0,
        "held": False,
        "worst": 0.0,
        "breaches": [{"series": "{}", "start": 1020.0, "end": 1030.0, "worst": 0.0}],
        "series": [
            {
                "labels": {"service": "web"},
                "points": [[1000.0 + i, 0.0 if 20 <= i <= 30 else 1.0] for i in range(61)],
            },
            {"labels": {"service": "<b>&"}, "points": [[1000.0, "nan"], [1001.0, 1.0]]},
        ],
        "actions": [
            {"wall": 1010.0, "name": "w-a1", "transition": "power-off sent"},
            {"wall": 1011.0, "name": "w-a1", "transition": "power-off acknowledged"},
            {"wall": 1040.0, "name": "w-a1", "transition": "power-on acknowledged"},
        ],
    }
    base.update(kw)
    return base


def test_the_chart_is_valid_svg_with_threshold_breach_and_phase() -> None:
    svg = slo_chart_svg(doc())
    root = ET.fromstring(svg)  # noqa: S314 - our own output
    assert root.tag == f"{NS}svg"
    titles = [t.text or "" for t in root.iter(f"{NS}title")]
    assert "threshold 1" in titles
    assert any(t.startswith("breach of") for t in titles)
    assert "w-a1 down" in titles
    assert any("power-off sent at +10.0 s" in t for t in titles)
    texts = [t.text or "" for t in root.iter(f"{NS}text")]
    assert texts[0] == "SLO web-available: BREACHED"
    assert texts[1] == 'min(powercut_service_up{service="web"}) >= 1'
    assert '{service="<b>&"}' in texts  # escaped in the markup, intact once parsed
    assert len(list(root.iter(f"{NS}polyline"))) == 1  # the NaN point splits nothing else
    assert slo_chart_svg(doc()) == svg  # deterministic


def test_a_held_slo_and_a_node_still_down_at_the_end() -> None:
    svg = slo_chart_svg(
        doc(
            held=True,
            breaches=[],
            actions=[{"wall": 1050.0, "name": "w-b2", "transition": "power-off acknowledged"}],
        )
    )
    root = ET.fromstring(svg)  # noqa: S314 - our own output
    texts = [t.text or "" for t in root.iter(f"{NS}text")]
    assert texts[0] == "SLO web-available: held"
    assert "w-b2 down" in [t.text for t in root.iter(f"{NS}title")]
