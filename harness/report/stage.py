"""The copy of an allure-results directory that the report is rendered from.

The results a run wrote stay as they are (the text summary, the history and JUnit read
them); the report is generated from a staged copy (hard links where possible) in which:

* each scenario's measured phases, which the steps record as pairs of Allure parameters
  (``"<phase> (s)"``, ``"<phase> budget (s)"``, ``"<phase> observation gap (s)"``: 34 to 61
  of them per scenario, most behind "Show more"), become one table at the top of the
  scenario's page (its description: phase, measured, budget, percent of budget), and those
  parameters are dropped;
* the sign-off page, when there is one, is a global attachment of the report (Allure 3's
  ``*-globals.json``), named :data:`SIGNOFF_ATTACHMENT`.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.report.history import Phase, phases_of

SIGNOFF_ATTACHMENT = "Sign-off"
_NS = uuid.UUID("0b7e55a4-3c55-4d1e-9f0e-5a1c9b1f2e77")
_PHASE_PARAM = re.compile(r"^.+ (?:budget |observation gap )?\(s\)$")


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _pct(p: Phase) -> str:
    ratio = p.ratio
    return f"{ratio * 100:.0f}%" if ratio is not None else "-"


def phases_table_html(phases: Mapping[str, Phase]) -> str:
    """One scenario's phases as an HTML table (plain attributes and one style per table:
    Allure shows a description's HTML without the page's style sheets, and a longevity run
    has thousands of these): phase, measured, Kubernetes' own model (docs/budgets.md),
    budget, percent of budget, in the order they were measured; over-budget rows and
    deviations from the model in red."""
    rows = []
    for name, p in phases.items():
        notes = []
        if not p.complete:
            notes.append("end not seen: a lower bound")
        if p.gap:
            notes.append("observation gap")
        if p.deviation:
            notes.append(
                "deviation: longer than Kubernetes' own model of this cluster allows "
                f"({p.model_setting})"
            )
        bad = p.over_budget or p.deviation
        over = ' style="color:#b71c1c;font-weight:600"' if bad else ""
        budget = "" if p.budget_s is None else f"{p.budget_s:g}"
        model = "" if p.model_s is None else f"&le; {p.model_s:g}"
        rows.append(
            f'<tr data-phase="{html.escape(name)}"{over}><td>{html.escape(name)}</td>'
            f'<td align="right">{p.value_s:.3f}</td>'
            f'<td align="right" title="{html.escape(p.model_setting)}">{model}</td>'
            f'<td align="right">{budget}</td>'
            f'<td align="right">{_pct(p)}</td><td>{html.escape("; ".join(notes))}</td></tr>'
        )
    return (
        '<table class="powercut-phases" border="1" cellpadding="3" '
        'style="border-collapse:collapse;border-color:#ddd;font-size:13px">'
        "<thead><tr><th>phase</th><th>measured (s)</th><th>model (s)</th><th>budget (s)</th>"
        "<th>% of budget</th>"
        f"<th></th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _drop_phase_params(node: dict[str, Any]) -> None:
    params = node.get("parameters")
    if isinstance(params, list):
        node["parameters"] = [
            p
            for p in params
            if not (isinstance(p, Mapping) and _PHASE_PARAM.match(str(p.get("name") or "")))
        ]
    for step in node.get("steps") or ():
        if isinstance(step, dict):
            _drop_phase_params(step)


def _stage_result(src: Path, dst_dir: Path, results_dir: Path) -> None:
    try:
        data = json.loads(src.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        _link_or_copy(src, dst_dir / src.name)  # Allure says what is wrong with it
        return
    if not isinstance(data, dict):
        _link_or_copy(src, dst_dir / src.name)
        return
    phases = phases_of(data, results_dir)
    if phases:
        before = data.get("descriptionHtml")
        if not isinstance(before, str) or not before:
            text = data.get("description")
            before = f"<p>{html.escape(text)}</p>" if isinstance(text, str) and text else ""
        data["descriptionHtml"] = before + phases_table_html(phases)
        _drop_phase_params(data)
    (dst_dir / src.name).write_text(json.dumps(data), encoding="utf-8")


def stage_results(results_dir: Path, staged: Path, *, signoff_html: str | None = None) -> Path:
    """Stage ``results_dir`` into ``staged`` (created) as described above; return it."""
    staged.mkdir(parents=True)
    for p in results_dir.iterdir():
        if not p.is_file():
            continue  # Allure's readers do not descend into sub-directories either
        if p.name.endswith("-result.json"):
            _stage_result(p, staged, results_dir)
        else:
            _link_or_copy(p, staged / p.name)
    if signoff_html is not None:
        add_signoff(staged, signoff_html)
    return staged


def add_signoff(
    results_dir: Path, signoff_html: str, *, key: str | None = None, timestamp_ms: int | None = None
) -> Path:
    """Put ``signoff_html`` into ``results_dir`` as the report's sign-off page: a global
    attachment named :data:`SIGNOFF_ATTACHMENT` (``<uuid>-globals.json``); returns the
    globals file. With ``key`` the file names are derived from it (a rebuild writes the same
    names)."""
    ident = uuid.uuid5(_NS, key) if key is not None else uuid.uuid4()
    source = f"{ident}-attachment.html"
    (results_dir / source).write_text(signoff_html, encoding="utf-8")
    globals_doc = {
        "attachments": [
            {
                "name": SIGNOFF_ATTACHMENT,
                "source": source,
                "type": "text/html",
                "timestamp": timestamp_ms if timestamp_ms is not None else int(time.time() * 1000),
            }
        ]
    }
    path = results_dir / f"{ident}-globals.json"
    path.write_text(json.dumps(globals_doc), encoding="utf-8")
    return path


def find_signoff(results_dir: Path) -> str | None:
    """The sign-off page a results directory carries already (see :func:`add_signoff`),
    or None."""
    for path in sorted(results_dir.glob("*-globals.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for att in doc.get("attachments") or () if isinstance(doc, Mapping) else ():
            if isinstance(att, Mapping) and att.get("name") == SIGNOFF_ATTACHMENT:
                try:
                    return (results_dir / str(att.get("source"))).read_text(encoding="utf-8")
                except OSError:
                    return None
    return None
