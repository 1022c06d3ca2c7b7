"""environment.properties, categories.json and history hand-over (harness.report.allure_env)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import allure
import pytest

from harness.inventory import load_inventory
from harness.report import allure_env
from harness.report.allure_env import (
    BUDGET_OVERRUNS,
    CATEGORIES,
    HARNESS_ERRORS,
    PRODUCT_FAILURES,
    Category,
    carry_history,
    categories_json,
    classify,
    environment_properties,
    history_file,
    inventory_environment,
    load_categories,
    prepare_results,
    read_environment,
    write_categories,
    write_environment,
)

ENV = {
    "Kubernetes version": "v1.36.1",
    "Nodes": 6,
    "Inventory": "lab",
    "Timing profile": "fast",
    "powercut": "0.1.0",
}


def parse_properties(text: str) -> dict[str, str]:
    """A small reader for what environment_properties writes (escapes it uses only)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, value, i, cur = "", "", 0, "key"
        buf: list[str] = []
        while i < len(line):
            ch = line[i]
            if ch == "\\":
                nxt = line[i + 1]
                if nxt == "u":
                    buf.append(chr(int(line[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                buf.append({"n": "\n", "r": "\r", "t": "\t", "f": "\f"}.get(nxt, nxt))
                i += 2
                continue
            if ch == "=" and cur == "key":
                key, buf, cur = "".join(buf), [], "value"
            else:
                buf.append(ch)
            i += 1
        value = "".join(buf)
        # surrogate pairs written as two \u escapes
        out[key] = value.encode("utf-16", "surrogatepass").decode("utf-16")
    return out


def test_environment_properties_round_trip_with_awkward_text() -> None:
    env = {
        "Kubernetes version": "v1.36.1",
        "key=with:specials#!": " leading space, = and : inside",
        "multi\nline": "a\tb\\c",
        "unicode": "Zürich \u2603 \U0001f680",
        "empty": None,
        "number": 3,
    }
    text = environment_properties(env)
    assert text.isascii()
    assert "Kubernetes\\ version=v1.36.1\n" in text
    assert text.count("\n") == len(env)
    assert parse_properties(text) == {k: "" if v is None else str(v) for k, v in env.items()}


def test_environment_keys_must_be_strings() -> None:
    with pytest.raises(ValueError, match="keys"):
        environment_properties({"": "x"})


def test_write_environment_creates_the_directory(tmp_path: Path) -> None:
    results = tmp_path / "allure-results"
    path = write_environment(results, ENV)
    assert path == results / "environment.properties"
    assert parse_properties(path.read_text(encoding="ascii"))["Nodes"] == "6"
    assert not list(results.glob("*.tmp"))


def test_read_environment_reads_what_write_environment_wrote(tmp_path: Path) -> None:
    env = {
        "Kubernetes version": "v1.36.1",
        "key=with:specials#!": " leading space, = and : inside",
        "multi\nline": "a\tb\\c",
        "unicode": "Zürich \u2603 \U0001f680",
        "empty": None,
        "number": 3,
    }
    path = write_environment(tmp_path, env)
    assert read_environment(path) == {k: "" if v is None else str(v) for k, v in env.items()}
    assert list(read_environment(path)) == list(env)
    assert read_environment(tmp_path / "missing.properties") == {}


def test_read_environment_reads_other_properties_syntax(tmp_path: Path) -> None:
    path = tmp_path / "environment.properties"
    path.write_text(
        "# a comment\n! another\n\n  spaced = value one\ncolon:two\nblank three\n"
        "long = first \\\n       second\nends\\\\=backslash\\\\\n",
        encoding="latin-1",
    )
    assert read_environment(path) == {
        "spaced": "value one",
        "colon": "two",
        "blank": "three",
        "long": "first second",
        "ends\\": "backslash\\",
    }


def test_write_environment_merges_into_an_existing_file(tmp_path: Path) -> None:
    """The features' fixture writes the Kubernetes version while they run; `powercut run`
    writes its own values afterwards: the Kubernetes version must survive."""
    write_environment(tmp_path, {"Kubernetes version": "v1.36.1", "Nodes": 6, "Python": "3.11"})
    prepare_results(tmp_path, environment={"Nodes": 7, "powercut": "0.1.0"})
    assert read_environment(tmp_path / "environment.properties") == {
        "Kubernetes version": "v1.36.1",
        "Nodes": "7",
        "Python": "3.11",
        "powercut": "0.1.0",
    }
    write_environment(tmp_path, {"only": "this"}, merge=False)
    assert read_environment(tmp_path / "environment.properties") == {"only": "this"}


def test_the_run_and_the_features_write_the_same_inventory_keys(tmp_path: Path) -> None:
    """What `powercut run` writes (inventory_environment) is what the features' fixture
    writes besides the Kubernetes version and tool versions: no duplicate keys in another
    spelling, and the run's values agree with the fixture's."""
    from harness.report.allure_env import scenario_environment as environment

    inv_file = tmp_path / "inv.yaml"
    inv_file.write_text(
        "name: lab\ncluster: {kubeconfig: kube.conf}\nracks: [{name: r1}]\nnodes:\n"
        "  - {name: cp1, role: control-plane, rack: r1, power: {driver: kind}}\n"
        "  - {name: w1, role: worker, rack: r1, power: {driver: kind}}\n"
    )
    inv = load_inventory(inv_file)

    class Client:
        def get(self, path: str) -> dict[str, Any]:
            assert path == "/version"
            return {"gitVersion": "v1.36.1"}

    results = tmp_path / "allure-results"
    fixture = environment(Client(), inv)  # type: ignore[arg-type]
    prepare_results(results, environment=fixture)
    prepare_results(results, environment=inventory_environment(inv))
    written = read_environment(results / "environment.properties")
    assert written == {k: str(v) for k, v in fixture.items()}
    assert written["Kubernetes version"] == "v1.36.1"
    assert written["Nodes"] == "2" and written["Workers"] == "1" and written["Inventory"] == "lab"


def test_categories_json_is_allure2_form_in_rule_order(tmp_path: Path) -> None:
    path = write_categories(tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data == categories_json()
    assert [r["name"] for r in data] == [c.name for c in CATEGORIES]
    for rule in data:
        assert set(rule) <= {"name", "description", "matchedStatuses", "messageRegex"}
        assert rule["matchedStatuses"]
    assert load_categories(path) == data
    # same-named rules are adjacent: Allure 3 merges them at the first one's position
    names = [r["name"] for r in data]
    for name in set(names):
        idx = [i for i, n in enumerate(names) if n == name]
        assert idx == list(range(idx[0], idx[-1] + 1))


def test_load_categories_rejects_garbage(tmp_path: Path) -> None:
    bad = tmp_path / "categories.json"
    bad.write_text('{"name": "x"}')
    with pytest.raises(ValueError, match="list"):
        load_categories(bad)


def test_category_validation() -> None:
    with pytest.raises(ValueError, match="statuses"):
        Category("x", ("red",))
    with pytest.raises(re.error):
        Category("x", ("failed",), "(")


CASES: list[tuple[str, str | None, str | None]] = [
    # product: a check on the cluster failed
    (
        "failed",
        "harness.checks.base.CheckFailed: pods-evicted: expected pod app/web-1 Ready on a node "
        "other than w1 within 90s of power-off acknowledged of w1; seen still Terminating "
        "(observed for 90.0s)",
        PRODUCT_FAILURES,
    ),
    ("failed", "AssertionError: assert 2 == 3", PRODUCT_FAILURES),
    ("failed", "harness.checks.base.CheckFailed: expected x\nsecond line", PRODUCT_FAILURES),
    (
        "broken",
        "harness.errors.WaitTimeout: timed out after 60.0s waiting for node w1 NotReady; "
        "last seen: Ready",
        PRODUCT_FAILURES,
    ),
    ("broken", "WaitTimeout: timed out after 1.0s waiting for x; last seen: y", PRODUCT_FAILURES),
    (
        "broken",
        "harness.kube.timeline.WaitFailed: gave up after 3.0s waiting for pod Ready: Failed",
        PRODUCT_FAILURES,
    ),
    # budget overruns: a CheckFailed(late=True), "<check>: over budget: expected ..."
    (
        "failed",
        "harness.checks.base.CheckFailed: evacuation: over budget: expected evacuation within "
        "90s; seen 95.2s (observed for 95.2s)",
        BUDGET_OVERRUNS,
    ),
    ("failed", "CheckFailed: over budget: expected x; seen y\nsecond line", BUDGET_OVERRUNS),
    (
        "failed",
        "harness.longevity.verdict.CyclesMissed: longevity: over budget: x",
        BUDGET_OVERRUNS,
    ),
    # merely mentioning a budget is not an overrun: the thing did not happen in time
    (
        "failed",
        "harness.checks.base.CheckFailed: evacuation: expected within budget 90s; seen 95.2s",
        PRODUCT_FAILURES,
    ),
    ("failed", "AssertionError: evacuation took 95.2s, over its Budget of 90s", PRODUCT_FAILURES),
    ("broken", "harness.errors.WaitTimeout: timed out (budget 60s) waiting", PRODUCT_FAILURES),
    ("failed", "CheckFailed: x: expected y; seen over budget: z", PRODUCT_FAILURES),
    # harness / infrastructure
    (
        "broken",
        "harness.errors.ConfigError: inventories/lab.yaml:budgets: unknown budget 'evac'",
        HARNESS_ERRORS,
    ),
    ("broken", "harness.kube.client.Unreachable: GET /api/v1/nodes: refused", HARNESS_ERRORS),
    ("broken", "pyipmi.errors.IpmiConnectionError: no session", HARNESS_ERRORS),
    ("broken", "sushy.exceptions.ConnectionError: Unable to connect", HARNESS_ERRORS),
    ("broken", "paramiko.ssh_exception.SSHException: no banner", HARNESS_ERRORS),
    ("broken", "harness.errors.PermanentError: w1: Redfish URL must be https", HARNESS_ERRORS),
    ("broken", "harness.safety.SafetyViolation: 4 of 6 workers", HARNESS_ERRORS),
    ("broken", "ConnectionRefusedError: [Errno 111] Connection refused", HARNESS_ERRORS),
    ("broken", "TypeError: 'NoneType' object is not subscriptable", HARNESS_ERRORS),
    ("broken", "fixture 'cluster' not found", HARNESS_ERRORS),
    ("broken", "", HARNESS_ERRORS),
    ("broken", None, HARNESS_ERRORS),
    # a product check whose text mentions a connection is still a product failure
    (
        "failed",
        "harness.checks.base.CheckFailed: service app/web: expected 200; seen ConnectionError",
        PRODUCT_FAILURES,
    ),
    # not categorised
    ("passed", None, None),
    ("skipped", "budget", None),
]


@pytest.mark.parametrize(("status", "message", "expected"), CASES)
def test_classify(status: str, message: str | None, expected: str | None) -> None:
    assert classify(status, message) == expected


@pytest.mark.parametrize(("status", "message", "expected"), CASES)
def test_java_full_match_agrees_with_javascript_search(
    status: str, message: str | None, expected: str | None
) -> None:
    """Allure 2 applies messageRegex with Java's full match, Allure 3 with a search: every rule
    must give the same answer both ways, so both generators categorise alike."""
    text = message or ""
    for rule in CATEGORIES:
        if rule.message_regex is None:
            continue
        search = re.search(rule.message_regex, text) is not None
        full = re.fullmatch(rule.message_regex, text) is not None
        assert search == full, (rule.name, rule.message_regex, text)


def test_history_is_carried_from_a_previous_report(tmp_path: Path) -> None:
    previous = tmp_path / "reports" / "night-1"
    hist = history_file(previous)
    hist.parent.mkdir(parents=True)
    hist.write_text('{"uuid": "a"}\n{"uuid": "b"}\n')
    results = tmp_path / "night-2-results"
    copied = carry_history(previous, results)
    assert copied == results / "history" / "history.jsonl"
    assert copied.read_text() == hist.read_text()
    # also from the JSONL file itself
    other = tmp_path / "other-results"
    other_copy = carry_history(hist, other)
    assert other_copy is not None
    assert other_copy.read_text() == hist.read_text()


def test_no_previous_history_is_not_an_error(tmp_path: Path) -> None:
    assert carry_history(tmp_path / "nothing-here", tmp_path / "results") is None
    assert not (tmp_path / "results").exists()


def test_prepare_results_writes_everything(tmp_path: Path) -> None:
    previous = tmp_path / "prev"
    history_file(previous).parent.mkdir(parents=True)
    history_file(previous).write_text("{}\n")
    results = tmp_path / "allure-results"
    prepare_results(results, environment=ENV, previous_report=previous)
    assert sorted(p.name for p in results.iterdir()) == [
        "categories.json",
        "environment.properties",
        "history",
    ]
    assert history_file(results).read_text() == "{}\n"


def test_attach_timeline_attaches_svg(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    def fake_attach(body: str, name: str, attachment_type: Any) -> None:
        calls.append((body, name, attachment_type))

    monkeypatch.setattr(allure, "attach", fake_attach)
    allure_env.attach_timeline(
        [{"mono": 1.0, "kind": "Node", "name": "w1", "transition": "observed", "detail": {}}],
        name="timeline w1",
    )
    ((body, name, kind),) = calls
    assert name == "timeline w1"
    assert body.startswith("<svg ")
    assert kind == allure.attachment_type.SVG
