"""What goes into an allure-results directory besides the test results themselves.

Used while (or right after) tests run, before the HTML report is rendered:

* :func:`write_environment` writes ``environment.properties`` (Kubernetes version, node count,
  inventory, timing profile, harness version, ... as given), shown in the report's
  Environment widget; it merges into an existing file, so the values the features write
  while they run and those ``powercut run`` writes afterwards all stay.
* :func:`write_categories` writes ``categories.json``: rules that sort failures into
  *harness or infrastructure errors*, *budget overruns* and *product failures*.
  Allure 2 reads this file from the results; Allure 3's awesome report takes categories from
  its config instead, so :func:`harness.report.html.render_report` copies the rules from this
  file into the config it generates (one source of truth, both generators agree).
* :func:`carry_history` copies the history of a previous report into the new results so the
  next report shows a trend. Allure 3 keeps history as one JSONL file (one line per report,
  config ``historyPath``), not as Allure 2's ``history/*.json``; see ``docs/reports.md``.
* :func:`attach_timeline` attaches a rendered scenario timeline to the running Allure test;
  :func:`attach_scenario_timeline` a scenario's :class:`~harness.kube.timeline.Timeline`
  (its JSON and that picture); :func:`scenario_environment` the features' Environment
  values (the cluster's version, the inventory's, the test tools').

The category regexes are written to mean the same under the three engines that evaluate
them: JavaScript ``RegExp.test`` (Allure 3, a search), Java ``Pattern.matches`` (Allure 2, a
full match) and Python ``re.search`` (:func:`classify`, used by the text summary). Hence
``[\\s\\S]*`` instead of ``.*`` with flags, and explicit ``^`` anchors.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import allure

from harness import __version__
from harness.checks.base import OVER_BUDGET
from harness.errors import PowercutError
from harness.report.timeline_svg import render_timeline_svg

if TYPE_CHECKING:
    from harness.inventory import Inventory
    from harness.kube.client import KubeClient
    from harness.kube.timeline import Timeline

ENVIRONMENT_FILE = "environment.properties"
CATEGORIES_FILE = "categories.json"
#: Where a report (and a results directory being prepared) keeps its Allure 3 history.
HISTORY_DIR = "history"
HISTORY_FILE = "history.jsonl"

HARNESS_ERRORS = "Harness or infrastructure errors"
BUDGET_OVERRUNS = "Budget overruns"
PRODUCT_FAILURES = "Product failures"
STOPPED = "Stopped by a stop condition"

#: Exception class names (as they start an Allure status message: ``module.Class: text``)
#: that mean the harness, its configuration, a BMC or the network failed, not the product.
INFRA_EXCEPTIONS: tuple[str, ...] = (
    # harness.errors and the harness's own permanent/temporary errors
    "ConfigError",
    "PermanentError",
    "TemporaryError",
    "SafetyViolation",
    "UndoFailed",
    "ReportToolMissing",
    "ReportError",
    # the API client (harness.kube.client)
    "Unreachable",
    "ApiError",
    "NotFound",
    "Conflict",
    "Gone",
    "ServerError",
    "TooManyRequests",
    # BMC drivers: pyipmi, paramiko, sushy
    "IpmiConnectionError",
    "IpmiTimeoutError",
    "AuthenticationError",
    "CompletionCodeError",
    "SSHException",
    "AuthenticationException",
    "BadHostKeyException",
    "NoValidConnectionsError",
    "SushyError",
    "AccessError",
    "BadRequestError",
    "HTTPError",
    "ServerSideError",
    "ResourceNotFoundError",
    "MissingAttributeError",
    # sockets, TLS, urllib3
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "ConnectionAbortedError",
    "BrokenPipeError",
    "TimeoutError",
    "OSError",
    "SSLError",
    "MaxRetryError",
    "NewConnectionError",
    "ProtocolError",
)
#: Non-assertion exceptions that still report what the cluster did (a wait on the cluster ran
#: out, or ended on a terminal state): product failures although Allure marks them broken.
PRODUCT_WAIT_EXCEPTIONS: tuple[str, ...] = ("WaitTimeout", "WaitFailed")

_QUALIFIED = r"^(?:[\w.]+\.)?"
_INFRA_RE = _QUALIFIED + "(?:" + "|".join(INFRA_EXCEPTIONS) + r")\b[\s\S]*"
_WAIT_HEAD = _QUALIFIED + "(?:" + "|".join(PRODUCT_WAIT_EXCEPTIONS) + r")\b"
_WAIT_RE = _WAIT_HEAD + r"[\s\S]*"
# A CheckFailed(late=True) (or a subclass): ``Class: [check: ]over budget: expected ...``.
# Only this marker, at this place, makes a budget overrun: a check whose expectation merely
# mentions a budget, or a wait that ran out, saw the thing not happen at all.
_BUDGET_HEAD = _QUALIFIED + r"\w+: (?:[\w.-]+: )?" + OVER_BUDGET + ": "  # plain words
_BUDGET_RE = _BUDGET_HEAD + r"[\s\S]*"
# broken, and neither a product wait nor a budget overrun: a broken test or harness bug
_OTHER_BROKEN_RE = r"^(?!" + _WAIT_HEAD[1:] + r")(?!" + _BUDGET_HEAD[1:] + r")[\s\S]*"

STATUSES = ("failed", "broken", "passed", "skipped", "unknown")


@dataclass(frozen=True)
class Category:
    """One Allure category rule (Allure 2 ``categories.json`` entry).

    Several rules with the same ``name`` form one category; keep them adjacent, because
    Allure 3 merges them at the position of the first (first matching category wins).
    """

    name: str
    statuses: tuple[str, ...]
    message_regex: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        bad = [s for s in self.statuses if s not in STATUSES]
        if bad or not self.statuses:
            raise ValueError(f"category {self.name!r}: statuses must be among {STATUSES}: {bad}")
        if self.message_regex is not None:
            re.compile(self.message_regex)

    def matches(self, status: str, message: str | None) -> bool:
        """Allure 3's matching (a regex *search*) for this rule."""
        if status not in self.statuses:
            return False
        if self.message_regex is None:
            return True
        return re.search(self.message_regex, message or "") is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.description:
            out["description"] = self.description
        out["matchedStatuses"] = list(self.statuses)
        if self.message_regex is not None:
            out["messageRegex"] = self.message_regex
        return out


# harness.session.StoppedByCondition: the inventory's stop condition breached and the
# scenario was stopped (and restored); neither a product failure nor a harness error.
_STOPPED_RE = _QUALIFIED + r"StoppedByCondition\b[\s\S]*"

#: The rules, in evaluation order: the first matching rule decides.
CATEGORIES: tuple[Category, ...] = (
    Category(
        STOPPED,
        ("failed", "broken"),
        _STOPPED_RE,
        "A stop condition of the inventory (an SLO or an alert) breached: the scenario was "
        "stopped at once and its disruptions undone, and the run ended there.",
    ),
    Category(
        HARNESS_ERRORS,
        ("failed", "broken"),
        _INFRA_RE,
        "The harness, its configuration, a BMC or the network failed: "
        "this run says nothing about the product.",
    ),
    Category(
        HARNESS_ERRORS,
        ("broken",),
        _OTHER_BROKEN_RE,
        "A broken test (an unexpected exception in the harness or a step).",
    ),
    Category(
        BUDGET_OVERRUNS,
        ("failed", "broken"),
        _BUDGET_RE,
        "What was expected happened, but later than its timing budget "
        "(a CheckFailed marked 'over budget').",
    ),
    Category(
        PRODUCT_FAILURES,
        ("failed",),
        None,
        "A check on the cluster failed: what was expected did not happen (CheckFailed, or "
        "an assertion in a step).",
    ),
    Category(
        PRODUCT_FAILURES,
        ("broken",),
        _WAIT_RE,
        "A wait on the cluster ran out (WaitTimeout) or ended on a terminal state (WaitFailed).",
    ),
)


def categories_json(categories: Iterable[Category] = CATEGORIES) -> list[dict[str, Any]]:
    """The rules in Allure 2 ``categories.json`` form (which Allure 3 also accepts)."""
    return [c.to_json() for c in categories]


def classify(
    status: str, message: str | None, categories: Sequence[Category] = CATEGORIES
) -> str | None:
    """The category Allure 3 puts a result in (None: uncategorised, e.g. passed)."""
    order: list[str] = []
    by_name: dict[str, list[Category]] = {}
    for c in categories:  # Allure 3 merges same-named rules at the first one's position
        if c.name not in by_name:
            order.append(c.name)
            by_name[c.name] = []
        by_name[c.name].append(c)
    for name in order:
        if any(c.matches(status, message) for c in by_name[name]):
            return name
    return None


def write_categories(results_dir: Path, categories: Iterable[Category] = CATEGORIES) -> Path:
    """Write ``categories.json`` into ``results_dir`` (created if missing)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / CATEGORIES_FILE
    _write_text(path, json.dumps(categories_json(categories), indent=2) + "\n")
    return path


def load_categories(path: Path) -> list[dict[str, Any]]:
    """Read a ``categories.json`` and check it is a list of rules with names."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list) or not all(
        isinstance(r, dict) and isinstance(r.get("name"), str) and r["name"].strip() for r in data
    ):
        raise ValueError(f"{path}: expected a JSON list of objects with a non-empty 'name'")
    return data


# -- environment.properties ----------------------------------------------------------------


def _escape_properties(text: str, *, key: bool) -> str:
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\f":
            out.append("\\f")
        elif ch in "=:#!" or (ch == " " and (key or i == 0)):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.extend(f"\\u{unit:04x}" for unit in _utf16_units(ch))
        else:
            out.append(ch)
    return "".join(out)


def _utf16_units(ch: str) -> list[int]:
    raw = ch.encode("utf-16-be")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def environment_properties(env: Mapping[str, object]) -> str:
    """``env`` as a Java ``.properties`` text (ASCII, escaped), in the mapping's order."""
    lines = []
    for key, value in env.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"environment keys must be non-empty strings, got {key!r}")
        text = "" if value is None else str(value)
        lines.append(f"{_escape_properties(key, key=True)}={_escape_properties(text, key=False)}")
    return "\n".join(lines) + ("\n" if lines else "")


_UNESCAPE = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterator[str]:
    """The logical lines of a properties text: comments and blank lines dropped, a line
    ending in an odd number of backslashes joined with the next (its indent stripped)."""
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f") if pending else raw
        if not pending and (not line.strip() or line.lstrip(" \t\f")[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        yield pending + line.lstrip(" \t\f")
        pending = ""
    if pending:
        yield pending


def _parse_property(line: str) -> tuple[str, str]:
    parts: list[list[str]] = [[], []]
    part, i, in_sep = 0, 0, False
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            nxt = line[i + 1]
            if nxt == "u" and i + 6 <= len(line):
                parts[part].append(chr(int(line[i + 2 : i + 6], 16)))
                i += 6
            else:
                parts[part].append(_UNESCAPE.get(nxt, nxt))
                i += 2
            continue
        if part == 0 and ch in "=: \t\f":
            part, in_sep = 1, True
            if ch not in "=:":  # whitespace, then perhaps one '=' or ':'
                rest = line[i:].lstrip(" \t\f")
                if rest[:1] in ("=", ":"):
                    rest = rest[1:]
                i = len(line) - len(rest)
            else:
                i += 1
            continue
        if in_sep and ch in " \t\f":
            i += 1
            continue
        in_sep = False
        parts[part].append(ch)
        i += 1
    key, value = (
        "".join(p).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        for p in parts
    )
    return key, value


def read_environment(path: Path) -> dict[str, str]:
    """The entries of an ``environment.properties`` file (Java properties syntax: what
    :func:`environment_properties` writes, and comments, ``:`` or blank separators, and
    continuation lines), in file order; empty when the file does not exist."""
    try:
        text = path.read_text(encoding="latin-1")  # Java's properties encoding
    except FileNotFoundError:
        return {}
    return dict(_parse_property(line) for line in _logical_lines(text))


def write_environment(results_dir: Path, env: Mapping[str, object], *, merge: bool = True) -> Path:
    """Write ``environment.properties`` into ``results_dir`` (created if missing).

    ``env`` is whatever describes the run, e.g. ``{"Kubernetes version": "v1.36.1",
    "Nodes": 6, "Inventory": "lab", "Timing profile": "fast", "powercut": "0.1.0"}``.
    Values are written with ``str()``; ``None`` becomes an empty value.

    With ``merge`` (the default) an existing file is updated rather than replaced: the keys
    of ``env`` get their new values, the entries already there keep theirs and their order.
    Several writers describe one run: the features' fixture writes the Kubernetes version
    while the scenarios run, and ``powercut run`` adds what it knows afterwards; neither
    loses the other's entries. ``merge=False`` writes ``env`` alone.
    """
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / ENVIRONMENT_FILE
    merged: dict[str, object] = dict(read_environment(path)) if merge else {}
    merged.update(env)
    _write_text(path, environment_properties(merged))
    return path


def inventory_environment(inventory: Inventory) -> dict[str, object]:
    """What the inventory says about the run, for the Environment widget. The features'
    fixture adds the Kubernetes version (it asks the cluster); ``powercut run`` writes these
    same keys, so a run that never got to the fixture still describes its cluster. The
    kubeconfig context says where it came from: ``prod (--context)`` when a command's
    ``--context`` chose it over the inventory's."""
    from harness.kube.target import context_shown

    return {
        "Inventory": inventory.name or "",
        "Inventory file": str(inventory.source or ""),
        "Kubernetes context": context_shown(inventory),
        "Nodes": len(inventory.nodes),
        "Control-plane nodes": len(inventory.nodes_by_role("control-plane")),
        "Workers": len(inventory.nodes_by_role("worker")),
        "Racks": ", ".join(inventory.racks()),
        "Timing profile": inventory.budgets.profile or inventory.timings or "upstream",
        "powercut": __version__,
    }


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def scenario_environment(client: KubeClient, inventory: Inventory) -> dict[str, object]:
    """Values for the Allure Environment widget: the cluster's Kubernetes version, what the
    inventory says (the same keys ``powercut run`` writes) and the test tools' versions."""
    try:
        kube_version = str(client.get("/version").get("gitVersion", "unknown"))
    except PowercutError as exc:  # the environment widget must not fail the run
        kube_version = f"unknown ({type(exc).__name__})"
    return {
        "Kubernetes version": kube_version,
        **inventory_environment(inventory),
        "pytest-bdd": _version("pytest-bdd"),
        "Python": platform.python_version(),
    }


# -- history -------------------------------------------------------------------------------


def history_file(report_or_results_dir: Path) -> Path:
    """Where a report directory (or a prepared results directory) keeps its history JSONL."""
    return report_or_results_dir / HISTORY_DIR / HISTORY_FILE


def carry_history(previous: Path, results_dir: Path) -> Path | None:
    """Copy the history of a previous report into ``results_dir`` for the next report.

    ``previous`` is a report directory written by :func:`harness.report.html.render_report`
    (its ``history/history.jsonl``) or a history JSONL file itself. The copy goes to
    ``results_dir/history/history.jsonl``; Allure's readers do not descend into
    sub-directories, so it is not mistaken for a result or an attachment. Returns the copy,
    or None when the previous report has no history (its first run, or not an Allure 3
    report): a missing history is not an error, the next report just starts a new trend.
    """
    source = previous if previous.is_file() else history_file(previous)
    if not source.is_file():
        return None
    target = history_file(results_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    shutil.copyfile(source, tmp)
    tmp.replace(target)
    return target


def prepare_results(
    results_dir: Path,
    *,
    environment: Mapping[str, object],
    previous_report: Path | None = None,
    categories: Iterable[Category] = CATEGORIES,
) -> None:
    """All of the above at once: environment (merged into an existing file), categories,
    and history when there is one."""
    write_environment(results_dir, environment)
    write_categories(results_dir, categories)
    if previous_report is not None:
        carry_history(previous_report, results_dir)


# -- attachments ---------------------------------------------------------------------------


def attach_timeline(
    transitions: Iterable[Mapping[str, Any]], *, name: str = "timeline", title: str = ""
) -> None:
    """Attach the scenario timeline (SVG swimlanes) to the running Allure test or step."""
    svg = render_timeline_svg(list(transitions), title=title or name)
    allure.attach(svg, name=name, attachment_type=allure.attachment_type.SVG)


def attach_scenario_timeline(timeline: Timeline, *, title: str) -> None:
    """Attach the timeline (JSON, every transition) and its swimlane picture (SVG)."""
    allure.attach(
        timeline.to_json(), name="timeline.json", attachment_type=allure.attachment_type.JSON
    )
    records = [t.to_json(timeline.start_mono) for t in timeline.snapshot()]
    attach_timeline(records, name="timeline", title=title)


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
