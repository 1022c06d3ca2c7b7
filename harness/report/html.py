"""Turn an allure-results directory into one self-contained, offline HTML file.

The generator is Allure Report 3 (npm package ``allure``, pinned to :data:`ALLURE_VERSION`),
installed by ``scripts/install-report-tools.sh`` into
``$POWERCUT_CACHE/node/allure-<version>/node_modules`` (``POWERCUT_CACHE`` defaults to
``~/.cache/powercut``), or any Allure 3 binary named by ``POWERCUT_ALLURE``.

:func:`render_report` writes an ``allurerc.json`` (Allure 3's JSON config: ``name``,
``historyPath``, ``historyLimit``, ``categories``, and the awesome plugin with
``singleFile: true``), runs ``allure generate`` and moves the single ``index.html`` into the
output directory. It also keeps the report's history: ``<out_dir>/history/history.jsonl``,
seeded from the previous report (see :func:`harness.report.allure_env.carry_history`) and
appended to by Allure, one line per report.

Allure 3.18's awesome template always includes a Google Analytics ``<script src=...>``
(no option turns it off). A signed, offline report must not phone home, so it is removed,
and the result is checked to load nothing from the network.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.errors import PermanentError
from harness.report.allure_env import (
    CATEGORIES_FILE,
    categories_json,
    history_file,
    load_categories,
)
from harness.report.stage import SIGNOFF_ATTACHMENT, find_signoff, stage_results
from harness.settings import ALLURE, Settings, or_environment

#: Keep in step with ALLURE_VERSION in scripts/install-report-tools.sh.
ALLURE_VERSION = "3.18.0"
INSTALL_COMMAND = "bash scripts/install-report-tools.sh"
#: How many reports the history keeps (one JSONL line each); None keeps everything.
DEFAULT_HISTORY_LIMIT = 100

_GLOB_SPECIAL = re.compile(r"[*?\[\]{}()!+@\\]")
_ANALYTICS = re.compile(
    r"[ \t]*<script async src=\"https://www\.googletagmanager\.com/gtag/js\?id=[^\"]*\">"
    r"</script>\s*<script>\s*window\.dataLayer[\s\S]*?</script>\n?"
)
_REMOTE_LOAD = re.compile(
    r"<(?:script|img|iframe|link|source|embed)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//",
    re.IGNORECASE,
)


class ReportToolMissing(PermanentError):
    """A tool the report needs is not installed: which one, and how to install it."""

    def __init__(self, tool: str, install: str, looked: str = "") -> None:
        self.tool = tool
        self.install = install
        self.looked = looked
        where = f" (looked for {looked})" if looked else ""
        super().__init__(f"{tool} is not installed{where}; install it with: {install}")


class ReportError(PermanentError):
    """Generating the report failed: the command, its exit status and its last output."""

    def __init__(self, message: str, *, command: Sequence[str] = (), output: str = "") -> None:
        self.command = list(command)
        self.output = output
        tail = "\n".join(output.strip().splitlines()[-20:])
        super().__init__(message + (f"\n{tail}" if tail else ""))


# -- locating Allure -----------------------------------------------------------------------


def cache_root(settings: Settings | None = None) -> Path:
    """``$POWERCUT_CACHE`` or ``~/.cache/powercut`` (the install script uses the same)."""
    return or_environment(settings).cache_dir


def cached_allure(version: str = ALLURE_VERSION, settings: Settings | None = None) -> Path:
    """Where the install script puts the ``allure`` binary of ``version``."""
    return cache_root(settings) / "node" / f"allure-{version}" / "node_modules" / ".bin" / "allure"


def find_allure(settings: Settings | None = None) -> Path:
    """The Allure 3 binary: ``$POWERCUT_ALLURE`` (docs/settings.md), else the cached pinned
    version.

    Raises:
        ReportToolMissing: neither exists, naming the install command.
    """
    settings = or_environment(settings)
    if settings.allure is not None:
        path = settings.allure
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ReportToolMissing(
                "Allure Report 3", INSTALL_COMMAND, f"{ALLURE.name}={path}: not an executable"
            )
        return path
    path = cached_allure(settings=settings)
    complete = path.parents[2] / ".complete"
    if not (path.is_file() and complete.is_file()):
        raise ReportToolMissing(
            f"Allure Report {ALLURE_VERSION} (npm allure)", INSTALL_COMMAND, str(path)
        )
    return path


def _require_node(binary: Path) -> None:
    with binary.open("rb") as fh:
        first = fh.readline(200)
    if b"node" in first and shutil.which("node") is None:
        raise ReportToolMissing(
            "Node.js >= 20 (`node`, needed by Allure Report 3)", "apt-get install nodejs npm"
        )


@lru_cache(maxsize=8)
def _allure_version(binary: str, mtime_ns: int) -> str:
    proc = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        raise ReportError(
            f"{binary} --version failed ({proc.returncode})",
            command=[binary, "--version"],
            output=proc.stdout + proc.stderr,
        )
    return proc.stdout.strip()


def allure_version(binary: Path) -> str:
    """What ``allure --version`` says (cached per binary and modification time)."""
    _require_node(binary)
    return _allure_version(str(binary), binary.stat().st_mtime_ns)


# -- config --------------------------------------------------------------------------------


#: How the report's tree groups scenarios: by their epic and feature labels
#: (harness.steps' labels), not by the Python package path of the test modules.
GROUP_BY: tuple[str, ...] = ("epic", "feature")


def allure_config(
    *,
    title: str,
    history_path: Path,
    history_limit: int | None,
    categories: Sequence[Mapping[str, Any]],
    group_by: Sequence[str] = GROUP_BY,
) -> dict[str, Any]:
    """The ``allurerc.json`` content (Allure 3 config) for one single-file report."""
    awesome: dict[str, Any] = {"singleFile": True, "reportName": title}
    if group_by:
        awesome["groupBy"] = list(group_by)
    config: dict[str, Any] = {
        "name": title,
        "historyPath": str(history_path),
        "appendHistory": True,
        "plugins": {"awesome": {"options": awesome}},
        "categories": {"rules": [dict(rule) for rule in categories]},
    }
    if history_limit is not None:
        if history_limit < 1:
            raise ValueError(f"history_limit must be >= 1 or None, got {history_limit}")
        config["historyLimit"] = history_limit
    return config


#: Opens the report on its sign-off page: the Global Attachments tab (when the address names
#: no other place) with the sign-off attachment expanded, once, at the first load. Allure
#: shows an HTML attachment in a sandboxed frame of a fixed height, where no link can lead
#: out (and whose document a file:// page may not reach), so the script shows the same page
#: in place of that frame (its style rules all lie under its own wrapper, ``.pcso``), where a
#: scenario's link (``href="#<test result id>"``) opens the scenario. The page is read from
#: the report's own data (``allureReportData``: the global attachment named
#: :data:`~harness.report.stage.SIGNOFF_ATTACHMENT`), not embedded twice.
OPEN_SIGNOFF_SCRIPT = """<script>/* powercut: the sign-off page opens first */
(function () {
  var first = !location.hash || location.hash === "#";
  if (first) {
    history.replaceState(null, "", location.pathname + location.search + "#globalAttachments");
  }
  var opened = !first;
  var page = null;
  function text(b64) {
    var bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new TextDecoder("utf-8").decode(bytes);
  }
  function load() {
    var data = window.allureReportData || {};
    if (!data["widgets/globals.json"]) return null;
    var globals = JSON.parse(text(data["widgets/globals.json"]));
    var atts = globals.attachments || [];
    for (var i = 0; i < atts.length; i++) {
      if (atts[i].name === "__NAME__") {
        var key = "data/attachments/" + atts[i].id + (atts[i].ext || "");
        return data[key] ? text(data[key]) : null;
      }
    }
    return null;
  }
  setInterval(function () {
    if (location.hash.indexOf("#globalAttachments") !== 0) return;
    if (page === null) page = load();
    if (page === null) return;
    if (!opened) {
      var head = document.querySelector('[data-testid="test-result-attachment-header"] button');
      if (head) { opened = true; head.click(); }
    }
    var frames = document.querySelectorAll('iframe[title="HTML attachment"]');
    for (var i = 0; i < frames.length; i++) {
      var frame = frames[i];
      var row = frame.closest('[data-testid="test-result-attachment"]');
      var name = row ? row.textContent : "";
      if (name.indexOf("__NAME__") < 0 || frame.getAttribute("data-powercut")) continue;
      frame.setAttribute("data-powercut", "replaced");
      frame.style.display = "none";
      var host = document.createElement("div");
      host.id = "powercut-signoff";
      host.innerHTML = page;
      frame.parentNode.insertBefore(host, frame.nextSibling);
    }
  }, 100);
})();
</script>
""".replace("__NAME__", SIGNOFF_ATTACHMENT)


def open_signoff_first(html: str) -> str:
    """Insert :data:`OPEN_SIGNOFF_SCRIPT` at the start of the page's ``<head>``, before the
    report's own scripts read the address."""
    head = re.search(r"<head[^>]*>", html, re.IGNORECASE)
    if head is None:
        raise ReportError("the generated report has no <head> (did the Allure template change?)")
    return html[: head.end()] + "\n" + OPEN_SIGNOFF_SCRIPT + html[head.end() :]


def strip_analytics(html: str) -> str:
    """Remove the Google Analytics snippet Allure's template always adds."""
    return _ANALYTICS.sub("", html)


def remote_loads(html: str) -> list[str]:
    """Tags that would load something from the network (should be empty)."""
    return [m.group(0)[:120] for m in _REMOTE_LOAD.finditer(html)]


# -- rendering -----------------------------------------------------------------------------


def _has_results(results_dir: Path) -> bool:
    return any(
        p.is_file() and (p.name.endswith("-result.json") or p.suffix == ".xml")
        for p in results_dir.iterdir()
    )


def _plain_dir(*candidates: Path) -> Path:
    """The first directory whose path has no glob specials: Allure treats result
    directories as glob patterns."""
    for c in candidates:
        if not _GLOB_SPECIAL.search(str(c)):
            return c
    raise ReportError(f"no directory without glob characters for the staged results: {candidates}")


#: The Node.js driver that generates the report and fills its Quality Gates tab.
DRIVER = Path(__file__).with_name("allure_generate.mjs")


def allure_core(binary: Path) -> Path | None:
    """``@allurereport/core``'s entry point beside an npm-installed ``allure`` binary
    (``node_modules/.bin/allure`` -> ``node_modules/allure/cli.js``), or None."""
    try:
        cli = binary.resolve()
    except OSError:
        return None
    for modules in (cli.parent.parent, cli.parent.parent.parent):
        core = modules / "@allurereport" / "core" / "dist" / "index.js"
        if core.is_file():
            return core
    return None


def _seed_history(target: Path, previous: Path | None, results_dir: Path) -> None:
    """Start ``target`` from the previous report's history, if there is one."""
    if previous is None:
        source = history_file(results_dir)
    else:
        source = previous if previous.is_file() else history_file(previous)
    if not source.is_file():
        return
    if target.exists() and source.resolve() == target.resolve():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def render_report(
    results_dir: Path,
    out_dir: Path,
    *,
    title: str,
    previous: Path | None = None,
    history_limit: int | None = DEFAULT_HISTORY_LIMIT,
    categories: Sequence[Mapping[str, Any]] | None = None,
    allure: Path | None = None,
    timeout_s: float = 900.0,
    history_path: Path | None = None,
    gates: Sequence[Mapping[str, Any]] | None = None,
    signoff_html: str | None = None,
) -> Path:
    """Render ``results_dir`` into ``out_dir/index.html``, one offline HTML file; return it.

    Args:
        results_dir: an allure-results directory (allure-pytest-bdd output; JUnit XML files
            are read too).
        out_dir: created if missing. Gets ``index.html`` and ``history/history.jsonl``.
        title: the report's name (page title and header).
        previous: a previous report directory (or its history JSONL) to continue the trend
            from. Default: ``results_dir/history/history.jsonl`` if
            :func:`~harness.report.allure_env.carry_history` put one there, else whatever
            history ``out_dir`` already has (re-rendering into the same directory adds one
            more point).
        history_limit: reports kept in the history (None: all).
        categories: category rules (``categories.json`` form). Default: the results'
            ``categories.json`` if present, else :data:`~harness.report.allure_env.CATEGORIES`.
        allure: the Allure 3 binary. Default: :func:`find_allure`.
        timeout_s: how long ``allure generate`` may take.
        history_path: Allure's history file to continue and append to (a results store's
            ``allure-history.jsonl``), instead of ``out_dir/history/history.jsonl``.
        gates: the sign-off gates' results (:meth:`harness.report.gates.GateResult.to_allure`),
            shown in the Quality Gates tab. They need ``@allurereport/core`` beside the
            binary (the npm install has it): the report is then generated by
            ``allure_generate.mjs``; without it, by ``allure generate`` with no gates.
        signoff_html: the sign-off page, a global attachment of the report that opens first.
            Default: the one the results carry (a longevity run's, see
            :func:`harness.report.stage.add_signoff`), if any.

    Raises:
        ReportToolMissing: Allure (or Node.js) is not installed.
        ReportError: no results, the wrong Allure version, or the generator failed.
    """
    results_dir = Path(results_dir).resolve()
    out_dir = Path(out_dir).resolve()
    if not results_dir.is_dir():
        raise ReportError(f"results directory {results_dir} does not exist")
    if not _has_results(results_dir):
        raise ReportError(f"no test results (*-result.json or *.xml) in {results_dir}")
    binary = _allure3(allure)
    if categories is None:
        cat_file = results_dir / CATEGORIES_FILE
        categories = load_categories(cat_file) if cat_file.is_file() else categories_json()

    out_dir.mkdir(parents=True, exist_ok=True)
    history = Path(history_path).resolve() if history_path is not None else history_file(out_dir)
    _seed_history(history, previous, results_dir)
    history.parent.mkdir(parents=True, exist_ok=True)
    config = allure_config(
        title=title, history_path=history, history_limit=history_limit, categories=categories
    )
    with (
        tempfile.TemporaryDirectory(prefix=".allure-", dir=out_dir) as tmp,
        tempfile.TemporaryDirectory(prefix="powercut-results-") as staging,
    ):
        work = Path(tmp)
        rc = work / "allurerc.json"
        rc.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        generated = work / "report"
        staged_results = stage_results(
            results_dir, _plain_dir(Path(staging), work) / "results", signoff_html=signoff_html
        )
        cmd = _generate_command(binary, work, rc, generated, staged_results, gates)
        output = _generate(cmd, work, timeout_s)
        signoff_first = signoff_html is not None or find_signoff(results_dir) is not None
        html = _self_contained(generated, cmd, output, signoff_first=signoff_first)
        target = out_dir / "index.html"
        staged = work / "index.html"
        staged.write_text(html, encoding="utf-8")
        os.replace(staged, target)
    return target


# -- the generator: Allure 3, with the gates where its core is beside it ---------------------


def _allure3(allure: Path | None) -> Path:
    """The Allure 3 binary (``allure``, else :func:`find_allure`), its version checked."""
    binary = allure or find_allure()
    version = allure_version(binary)
    if not version.startswith("3."):
        raise ReportError(
            f"{binary} is Allure {version or '(unknown version)'}; the report needs Allure 3 "
            f"(install with: {INSTALL_COMMAND})"
        )
    return binary


def _generate_command(
    binary: Path,
    work: Path,
    rc: Path,
    generated: Path,
    staged_results: Path,
    gates: Sequence[Mapping[str, Any]] | None,
) -> list[str]:
    """``allure_generate.mjs`` with the gates where ``@allurereport/core`` is beside the
    binary (and Node.js is here), else ``allure generate`` with no gates."""
    core = allure_core(binary)
    if core is not None and shutil.which("node"):
        gates_file = work / "gates.json"
        gates_file.write_text(json.dumps(list(gates or [])), encoding="utf-8")
        return [
            str(shutil.which("node")),
            str(DRIVER),
            str(core),
            str(rc),
            str(generated),
            str(gates_file),
            str(staged_results),
        ]
    return [
        str(binary),
        "generate",
        "--config",
        str(rc),
        "--output",
        str(generated),
        str(staged_results),
    ]


def _generate(cmd: list[str], work: Path, timeout_s: float) -> str:
    """Run the generator in ``work``; its output (stdout and stderr)."""
    env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0", "ALLURE_NO_ANALYTICS": "true"}
    try:
        proc = subprocess.run(
            cmd,
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        text = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
        raise ReportError(
            f"allure generate did not finish within {timeout_s:g}s", command=cmd, output=text
        ) from None
    if proc.returncode != 0:
        raise ReportError(
            f"allure generate failed with exit status {proc.returncode}",
            command=cmd,
            output=proc.stdout + proc.stderr,
        )
    return proc.stdout + proc.stderr


def _self_contained(generated: Path, cmd: list[str], output: str, *, signoff_first: bool) -> str:
    """The generated page, its analytics stripped, opening on the sign-off page if
    ``signoff_first``; an error if it would load anything from the network."""
    index = next(
        (
            p
            for p in (generated / "index.html", generated / "awesome" / "index.html")
            if p.is_file()
        ),
        None,
    )
    if index is None:
        raise ReportError(
            f"allure generate wrote no index.html into {generated}", command=cmd, output=output
        )
    html = strip_analytics(index.read_text(encoding="utf-8"))
    if signoff_first:
        html = open_signoff_first(html)
    remote = remote_loads(html)
    if remote:
        raise ReportError(
            "the generated report would load content from the network, so it is not "
            f"self-contained (did the Allure template change?): {remote[:3]}"
        )
    return html
