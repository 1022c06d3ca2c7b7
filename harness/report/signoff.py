"""A run's sign-off, from its allure-results and its target's history: the record that goes
into the history, its gates, its regressions and its sign-off page.

``powercut run`` calls :func:`sign_off` after the scenarios ran and before the report is
rendered: the gates go to the report's Quality Gates tab and decide the exit code, the page
opens the report, and :meth:`SignOffResult.run` is the line appended to the history.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.report.allure_env import HARNESS_ERRORS
from harness.report.gates import Evaluation, Regression, SignOff, evaluate
from harness.report.history import Run, from_allure_results, verdict_of
from harness.report.signoff_page import signoff_html
from harness.report.summary import load_allure_results
from harness.report.trends import regressions as find_regressions


@dataclass(frozen=True)
class SignOffResult:
    run: Run
    evaluation: Evaluation
    regressions: tuple[Regression, ...]
    page: str

    @property
    def gates_for_allure(self) -> list[dict[str, object]]:
        return [r.to_allure() for r in self.evaluation.results]


def allure_ids(results_dir: Path) -> dict[str, str]:
    """Scenario name -> the id Allure 3 gives its (last) test result: md5 of its uuid, the
    address of its page in the report (``index.html#<id>``)."""
    latest: dict[str, tuple[int, str, str]] = {}
    for path in sorted(Path(results_dir).glob("*-result.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, Mapping) or not isinstance(data.get("uuid"), str):
            continue
        name = str(data.get("name") or data.get("fullName") or "")
        stop = data.get("stop") if isinstance(data.get("stop"), int) else 0
        assert isinstance(stop, int)
        if name not in latest or stop >= latest[name][0]:
            latest[name] = (stop, data["uuid"], name)
    return {
        name: hashlib.md5(uid.encode(), usedforsecurity=False).hexdigest()
        for name, (_, uid, _) in latest.items()
    }


def harness_errors(results_dir: Path) -> list[str]:
    """The scenarios whose failure the categories put on the harness or the infrastructure."""
    return [
        s.name for s in load_allure_results(results_dir).scenarios if s.category == HARNESS_ERRORS
    ]


def sign_off(
    results_dir: Path,
    signoff: SignOff,
    *,
    run_id: str,
    target: str,
    started: str,
    finished: str,
    powercut_version: str,
    inventory: str,
    seed: int | None = None,
    previous: Sequence[Run] = (),
    title: str = "",
) -> SignOffResult:
    """Evaluate a finished run (``previous``: its target's earlier runs, oldest first;
    ``title``: what the run is, shown on the page)."""
    record = from_allure_results(
        results_dir,
        run_id=run_id,
        target=target,
        started=started,
        finished=finished,
        powercut_version=powercut_version,
        inventory=inventory,
        seed=seed,
    )
    regs = tuple(find_regressions(record, previous, signoff.trends))
    evaluation = evaluate(
        record, signoff, harness_errors=harness_errors(results_dir), regressions=regs
    )
    gates = evaluation.gates()
    record = replace(record, gates=gates, verdict=verdict_of(record.scenarios, gates))
    page = signoff_html(
        record,
        previous=previous,
        evaluation=evaluation,
        regressions=regs,
        trends=signoff.trends,
        tr_ids=allure_ids(results_dir),
        signoff_source=signoff.source,
        title=title,
    )
    return SignOffResult(record, evaluation, regs, page)


def describe_failed_gates(evaluation: Evaluation) -> list[str]:
    """One line per failed gate: ``gate failed: <name>: <detail>``."""
    return [f"gate failed: {r.name}: {r.detail}" for r in evaluation.failed]
