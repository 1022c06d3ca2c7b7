"""The inventory's prometheus, slos, alerts and stop_conditions sections."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.inventory import load_inventory
from harness.inventory.slo import AlertSpec, SloSpec, slo_by_name
from harness.slo.client import Series
from harness.slo.evaluate import breaches, worst_value
from tests.unit.test_inventory import MINIMAL, load_error, write

SLO_SECTIONS = """\
prometheus:
  url: http://127.0.0.1:9090/
  bearer_token_file: token
slos:
  - name: web-up
    expr: min(powercut_service_up{service="web"})
    comparison: ">="
    threshold: 1
    step: 2s
    for: 10s
  - name: api-errors
    expr: sum(rate(apiserver_request_total{code=~"5.."}[1m]))
    comparison: "<"
    threshold: 0.5
alerts:
  - name: LabServiceDown
  - matcher: '{severity="critical", team=~"db.*"}'
stop_conditions:
  - slo: web-up
  - alert: LabServiceDown
"""


def test_the_sections_load(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, MINIMAL + SLO_SECTIONS))
    assert inv.prometheus is not None
    assert inv.prometheus.url == "http://127.0.0.1:9090"
    assert inv.prometheus.bearer_token_file == tmp_path / "token"
    assert inv.prometheus.verify_tls is True and inv.prometheus.timeout == 10.0
    web, api = inv.slos
    assert (web.step, web.for_, web.comparison, web.threshold) == (2.0, 10.0, ">=", 1.0)
    assert (api.step, api.for_) == (5.0, None)
    assert inv.alerts[1].matcher == 'severity="critical", team=~"db.*"'
    assert inv.alerts[1].selector == 'alertstate="firing",severity="critical", team=~"db.*"'
    assert [c.label for c in inv.stop_conditions] == ["SLO web-up", "alert LabServiceDown"]
    assert slo_by_name(inv.slos, "api-errors") is api


def test_no_sections_is_fine(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, MINIMAL))
    assert inv.prometheus is None and inv.slos == [] and inv.stop_conditions == []


@pytest.mark.parametrize(
    ("replace", "by", "field", "needle"),
    [
        (
            'comparison: ">="',
            'comparison: "=>"',
            "slos[0].comparison",
            "must be one of: <, <=, >, >=, ==, !=",
        ),
        ("step: 2s", "step: soon", "slos[0].step", "'soon' is not a valid duration"),
        ("for: 10s", "for: -1", "slos[0].for", "not a valid duration"),
        ("threshold: 1\n", "threshold: one\n", "slos[0].threshold", "'one' is not valid"),
        ("- name: web-up", "- name: 'web up'", "slos[0].name", "not a valid SLO name"),
        (
            "  - slo: web-up",
            "  - slo: web-upp",
            "stop_conditions[0].slo",
            "unknown SLO 'web-upp'; must be one of: web-up, api-errors",
        ),
        (
            "  - alert: LabServiceDown",
            "  - alert: Nope",
            "stop_conditions[1].alert",
            "unknown alert 'Nope'",
        ),
        (
            "- name: api-errors",
            "- name: web-up",
            "slos[1].name",
            "duplicate SLO 'web-up' (also slos[0])",
        ),
        ("- name: LabServiceDown", "- name: Lab-Down", "alerts[0].name", "not a valid alert name"),
        (
            'severity="critical", team',
            "severity=critical, team",
            "alerts[1].matcher",
            "not a list of label matchers",
        ),
        (
            "url: http://127.0.0.1:9090/",
            "url: 127.0.0.1:9090",
            "prometheus.url",
            "expected 'http(s)://host:port'",
        ),
        (
            "url: http://127.0.0.1:9090/",
            "url: http://u:p@127.0.0.1:9090",
            "prometheus.url",
            "must not contain credentials",
        ),
        (
            "  bearer_token_file: token",
            "  bearer_token_file: token\n  username: bob\n  password_env: P",
            "prometheus",
            "not both",
        ),
        (
            "  bearer_token_file: token",
            "  username: bob",
            "prometheus",
            "needs password_env or password_file",
        ),
        (
            "  bearer_token_file: token",
            "  verify_tls: missing-ca.pem",
            "prometheus.verify_tls",
            "does not exist",
        ),
        (
            "  bearer_token_file: token",
            "  bearer_token_env: 1BAD",
            "prometheus.bearer_token_env",
            "not a valid environment variable name",
        ),
        (
            "    step: 2s",
            "    step: 2s\n    objective: 1",
            "slos[0].objective",
            "unknown key 'objective'",
        ),
        (
            "stop_conditions:\n  - slo: web-up\n",
            "stop_conditions:\n  - slo: web-up\n    alert: LabServiceDown\n",
            "stop_conditions[0]",
            "exactly one of slo",
        ),
    ],
)
def test_bad_input_names_file_field_and_valid_values(
    tmp_path: Path, replace: str, by: str, field: str, needle: str
) -> None:
    text = MINIMAL + SLO_SECTIONS
    assert replace in text
    error = load_error(tmp_path, text.replace(replace, by, 1))
    assert error.field == field, str(error)
    assert needle in str(error)


def test_slos_need_a_prometheus(tmp_path: Path) -> None:
    text = MINIMAL + "slos:" + SLO_SECTIONS.split("slos:")[1]
    error = load_error(tmp_path, text)
    assert error.field == "slos" and "needs a prometheus section" in str(error)


def test_a_token_never_shows_in_errors(tmp_path: Path) -> None:
    text = MINIMAL + SLO_SECTIONS.replace("bearer_token_file: token", "bearer_token: hunter2-Zq9!")
    error = load_error(tmp_path, text)
    assert "hunter2" not in str(error)
    assert "unknown key 'bearer_token'" in str(error)


# -- evaluation over points (no Prometheus) ----------------------------------------------


def spec(**kw: object) -> SloSpec:
    base: dict[str, object] = {"name": "s", "expr": "x", "comparison": ">=", "threshold": 1}
    base.update(kw)
    return SloSpec.model_validate(base)


def series(*values: float, step: float = 1.0, name: str = "a") -> Series:
    return Series({"n": name}, tuple((100.0 + i * step, v) for i, v in enumerate(values)))


def test_breaches_are_stretches_of_missed_points() -> None:
    s = spec()
    found = breaches(s, [series(1, 0, 0, 1, 1, 0.5, 1)], 1.0)
    assert [(b.start, b.end, b.worst) for b in found] == [(101.0, 102.0, 0.0), (105.0, 105.0, 0.5)]
    assert found[0].series == '{n="a"}'


def test_for_forgives_short_breaches() -> None:
    s = spec(**{"for": 2})
    found = breaches(s, [series(1, 0, 0, 1, 0, 0, 0, 1)], 1.0)
    assert [(b.start, b.end) for b in found] == [(104.0, 106.0)]


def test_a_gap_in_the_points_ends_a_stretch() -> None:
    s = spec(**{"for": 2})
    points = Series({}, ((100.0, 0.0), (101.0, 0.0), (105.0, 0.0), (106.0, 0.0)))
    assert breaches(s, [points], 1.0) == []


def test_nan_misses_every_objective() -> None:
    s = spec(comparison="<", threshold=5)
    assert not s.holds(math.nan)
    assert [b.start for b in breaches(s, [series(1, math.nan, 1)], 1.0)] == [101.0]
    assert math.isnan(worst_value(s, [math.nan]) or 0)
    assert worst_value(s, [1, 7, math.nan]) == 7


@pytest.mark.parametrize(
    ("comparison", "values", "worst"),
    [
        ("<", [1, 3, 2], 3),
        ("<=", [1], 1),
        (">", [4, 2, 3], 2),
        (">=", [5], 5),
        ("==", [1, 2], 2),
        ("!=", [2, 1], 1),
    ],
)
def test_worst_value_is_the_furthest_on_the_wrong_side(
    comparison: str, values: list[float], worst: float
) -> None:
    assert worst_value(spec(comparison=comparison, threshold=1), values) == worst


def test_alert_selectors() -> None:
    assert AlertSpec(name="X").selector == 'alertstate="firing",alertname="X"'
    assert AlertSpec(name="X").label == "X"
    assert AlertSpec(matcher='a="b"').label == '{a="b"}'
