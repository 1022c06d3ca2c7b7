"""render_report's handling of config, history, errors and the output (fake `allure` binary).

The real generator is exercised in tests/integration/test_report_render.py; here a small
Python stand-in records what it was given, so these tests need neither Node nor npm.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.report import browser
from harness.report.allure_env import carry_history, history_file, write_categories
from harness.report.html import (
    ALLURE_VERSION,
    INSTALL_COMMAND,
    ReportError,
    ReportToolMissing,
    allure_config,
    cached_allure,
    find_allure,
    remote_loads,
    render_report,
    strip_analytics,
)

# The tail of Allure 3.18's awesome template, verbatim (plugin-awesome/dist/generators.js).
ANALYTICS = """    <script async src="https://www.googletagmanager.com/gtag/js?id=G-LNDJ3J7WT0"></script>
    <script>
        window.dataLayer = window.dataLayer || [];
        function gtag(){dataLayer.push(arguments);}
        gtag('js', new Date());
        gtag('config', 'G-LNDJ3J7WT0', {
          "report": "awesome",
          "allureVersion": "3.18.0",
          "reportUuid": "0c1e",
          "single_file": "true"
        });
    </script>
"""
PAGE = (
    "<!DOCTYPE html>\n<html><head><title>{name}</title>"
    '<script src="data:text/javascript;base64,AAAA"></script></head>\n<body>\n'
    '    <div id="app"></div>\n{analytics}{extra}    <script async>d("x","eyJ9")</script>\n'
    "</body>\n</html>\n"
)

FAKE = r"""#!{python}
import json, os, pathlib, sys
args = sys.argv[1:]
if args == ["--version"]:
    print(os.environ.get("FAKE_ALLURE_VERSION", "3.18.0"))
    sys.exit(0)
assert args[0] == "generate", args
cfg = args[args.index("--config") + 1]
out = pathlib.Path(args[args.index("--output") + 1])
results = args[-1]
config = json.loads(pathlib.Path(cfg).read_text())
pathlib.Path(os.environ["FAKE_ALLURE_LOG"]).write_text(json.dumps({{
    "config": config, "results": results,
    "files": sorted(p.name for p in pathlib.Path(results).iterdir() if p.is_file()),
    "cwd": os.getcwd(),
}}))
rc = int(os.environ.get("FAKE_ALLURE_RC", "0"))
if rc:
    print("boom: the generator broke", file=sys.stderr)
    sys.exit(rc)
hist = pathlib.Path(config["historyPath"])
with hist.open("a") as fh:
    fh.write(json.dumps({{"uuid": str(len(hist.read_text().splitlines()) if hist.exists() else 0),
                          "name": config["name"]}}) + "\n")
out.mkdir(parents=True)
page = os.environ["FAKE_ALLURE_PAGE"].format(
    name=config["name"], analytics=os.environ["FAKE_ALLURE_ANALYTICS"],
    extra=os.environ.get("FAKE_ALLURE_EXTRA", ""))
(out / "index.html").write_text(page)
(out / "summary.json").write_text("{{}}")
"""


@pytest.fixture
def fake_allure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bin" / "allure"
    path.parent.mkdir()
    path.write_text(FAKE.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("POWERCUT_ALLURE", str(path))
    monkeypatch.setenv("FAKE_ALLURE_LOG", str(tmp_path / "fake-allure.json"))
    monkeypatch.setenv("FAKE_ALLURE_PAGE", PAGE)
    monkeypatch.setenv("FAKE_ALLURE_ANALYTICS", ANALYTICS)
    return path


def fake_log(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tmp_path / "fake-allure.json").read_text())
    return data


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "allure-results"
    out.mkdir()
    (out / "0001-result.json").write_text('{"name": "x", "status": "passed"}')
    (out / "0002-attachment.svg").write_text("<svg/>")
    return out


def test_render_writes_one_offline_file(fake_allure: Path, results: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    index = render_report(results, out, title="Release 1.2 <sign-off>")
    assert index == out / "index.html"
    html = index.read_text()
    assert "googletagmanager" not in html
    assert "gtag(" not in html
    assert remote_loads(html) == []
    assert '<div id="app"></div>' in html
    assert sorted(p.name for p in out.iterdir()) == ["history", "index.html"]  # no temp dirs
    log = fake_log(tmp_path)
    config = log["config"]
    assert config["name"] == "Release 1.2 <sign-off>"
    assert config["plugins"] == {
        "awesome": {
            "options": {
                "singleFile": True,
                "reportName": "Release 1.2 <sign-off>",
                "groupBy": ["epic", "feature"],
            }
        }
    }
    assert config["historyPath"] == str(history_file(out))
    assert config["historyLimit"] == 100
    assert config["appendHistory"] is True
    first_rules = [r["name"] for r in config["categories"]["rules"][:2]]
    assert first_rules == ["Stopped by a stop condition", "Harness or infrastructure errors"]
    # rendered from a staged copy of the results (see harness.report.stage)
    assert log["files"] == sorted(p.name for p in results.iterdir())
    assert not Path(log["results"]).exists()  # removed afterwards
    assert Path(log["cwd"]).parent == out  # works in a scratch dir, not in the caller's cwd


def test_categories_come_from_the_results(fake_allure: Path, results: Path, tmp_path: Path) -> None:
    custom = [{"name": "Ours", "matchedStatuses": ["failed"], "messageRegex": "[\\s\\S]*x"}]
    (results / "categories.json").write_text(json.dumps(custom))
    render_report(results, tmp_path / "r", title="t")
    assert fake_log(tmp_path)["config"]["categories"] == {"rules": custom}
    write_categories(results)  # the defaults, as the harness writes them
    render_report(results, tmp_path / "r", title="t", categories=custom)
    assert fake_log(tmp_path)["config"]["categories"] == {"rules": custom}


def test_history_is_continued(fake_allure: Path, results: Path, tmp_path: Path) -> None:
    night1 = tmp_path / "reports" / "night-1"
    render_report(results, night1, title="nightly")
    assert len(history_file(night1).read_text().splitlines()) == 1
    # the next night: history carried into the new results, then rendered elsewhere
    results2 = tmp_path / "results-2"
    results2.mkdir()
    (results2 / "0003-result.json").write_text("{}")
    carry_history(night1, results2)
    night2 = tmp_path / "reports" / "night-2"
    render_report(results2, night2, title="nightly")
    assert len(history_file(night2).read_text().splitlines()) == 2
    # Allure reads only the files at the top of a results directory, so history/ stays out
    assert fake_log(tmp_path)["files"] == ["0003-result.json"]
    # or straight from the previous report
    night3 = tmp_path / "reports" / "night-3"
    render_report(results, night3, title="nightly", previous=night2, history_limit=None)
    assert len(history_file(night3).read_text().splitlines()) == 3
    assert "historyLimit" not in fake_log(tmp_path)["config"]
    # the previous reports are untouched
    assert len(history_file(night1).read_text().splitlines()) == 1


def test_results_path_with_glob_characters(fake_allure: Path, tmp_path: Path) -> None:
    weird = tmp_path / "run [nightly] {a,b} *"
    weird.mkdir()
    (weird / "0001-result.json").write_text("{}")
    (weird / "0001-attachment.txt").write_text("x")
    render_report(weird, tmp_path / "r", title="t")
    log = fake_log(tmp_path)
    assert log["results"] != str(weird)
    assert not any(ch in log["results"] for ch in "[]{}*")
    assert log["files"] == ["0001-attachment.txt", "0001-result.json"]


def test_generator_failure_is_reported(
    fake_allure: Path, results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ALLURE_RC", "3")
    with pytest.raises(ReportError, match="exit status 3") as err:
        render_report(results, tmp_path / "r", title="t")
    assert "boom: the generator broke" in str(err.value)
    assert err.value.command[1] == "generate"
    assert not (tmp_path / "r" / "index.html").exists()


def test_remote_content_is_refused(
    fake_allure: Path, results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ALLURE_EXTRA", '<script src="https://cdn.example.com/x.js"></script>')
    with pytest.raises(ReportError, match="not self-contained"):
        render_report(results, tmp_path / "r", title="t")


def test_allure_2_is_refused(
    fake_allure: Path, results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ALLURE_VERSION", "2.30.0")
    os.utime(fake_allure, ns=(1, 1))  # a different binary as far as the version cache knows
    with pytest.raises(ReportError, match=r"Allure 2\.30\.0; the report needs Allure 3"):
        render_report(results, tmp_path / "r", title="t")


def test_no_results(fake_allure: Path, tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="does not exist"):
        render_report(tmp_path / "missing", tmp_path / "r", title="t")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "environment.properties").write_text("a=b\n")
    with pytest.raises(ReportError, match="no test results"):
        render_report(tmp_path / "empty", tmp_path / "r", title="t")


def test_missing_allure_names_the_install_command(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POWERCUT_ALLURE", raising=False)
    monkeypatch.setenv("POWERCUT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ReportToolMissing) as err:
        render_report(results, tmp_path / "r", title="t")
    assert err.value.install == INSTALL_COMMAND
    assert f"Allure Report {ALLURE_VERSION}" in str(err.value)
    assert INSTALL_COMMAND in str(err.value)
    assert str(cached_allure()) in str(err.value)
    # a half-finished install (no .complete marker) does not count
    binary = cached_allure()
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    with pytest.raises(ReportToolMissing):
        find_allure()
    (binary.parents[2] / ".complete").touch()
    assert find_allure() == binary
    assert binary.relative_to(tmp_path / "cache") == Path(
        "node", f"allure-{ALLURE_VERSION}", "node_modules", ".bin", "allure"
    )


def test_powercut_allure_must_exist(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("POWERCUT_ALLURE", str(tmp_path / "nope"))
    with pytest.raises(ReportToolMissing, match="POWERCUT_ALLURE="):
        find_allure()


def test_node_is_required_for_the_npm_binary(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "allure"
    script.write_text("#!/usr/bin/env node\nconsole.log('3.18.0')\n")
    script.chmod(0o755)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(ReportToolMissing, match=r"Node\.js"):
        render_report(results, tmp_path / "r", title="t", allure=script)


def test_strip_analytics_only_touches_the_snippet() -> None:
    page = PAGE.format(name="n", analytics=ANALYTICS, extra="")
    stripped = strip_analytics(page)
    assert stripped == PAGE.format(name="n", analytics="", extra="")
    assert remote_loads(page) and not remote_loads(stripped)


def test_history_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="history_limit"):
        allure_config(title="t", history_path=Path("h"), history_limit=0, categories=[])


def test_missing_chromium_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERCUT_CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(ReportToolMissing, match="apt-get install chromium"):
        browser.find_chromium()
