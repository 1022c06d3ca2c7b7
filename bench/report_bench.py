"""Report benchmark: size and Chromium's first render of the one-file report, at scale.

Side by side in one run (the machine is shared: ratios matter, the load is printed):

* ``today-29``: 29 scenarios rendered as before the sign-off page (``allure generate`` on
  the raw results: every phase two parameters, the tree by package path, no gates);
* ``signoff-29`` and ``signoff-200``: 29 and 200 scenarios through ``render_report`` with
  the sign-off page, the gates and five earlier runs of history;
* ``longevity-10000``: a 10,000-cycle longevity run (``bench/longevity_bench.py``'s
  synthetic cycles, with an SLO), its Allure results (one per cycle, and its sign-off page)
  rendered with ``render_report``.

Each synthetic scenario carries what a feature scenario carries: 40 phases (their
``measurements.json`` and parameters), a timeline JSON and SVG, its labels and seed.
"First render" is the wall time of headless Chromium loading the file until its sign-off
page (or Allure's tree) is in the DOM (``--dump-dom`` with a 10 s virtual-time budget)
minus that of an empty page with the same flags; the median of ``--repeat``.

    .venv/bin/python bench/report_bench.py [--repeat 3] [--skip-longevity]

Prints one JSON object; exits 1 when a report is not one file, or the sign-off page is
not what opens.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.report import browser  # noqa: E402
from harness.report.allure_env import write_categories, write_environment  # noqa: E402
from harness.report.gates import SignOff  # noqa: E402
from harness.report.history import Run  # noqa: E402
from harness.report.html import allure_config, find_allure, render_report  # noqa: E402
from harness.report.signoff import sign_off  # noqa: E402

EPICS = ["Node failure", "Rack failure", "Control plane", "Planned maintenance"]


def synthetic_results(out: Path, n: int, seed: int = 3, factor: float = 1.0) -> None:
    rng = random.Random(seed)
    out.mkdir(parents=True)
    write_environment(out, {"Inventory": "bench", "Seed": 42, "powercut": "bench"})
    write_categories(out)
    for i in range(n):
        uid = str(uuid.UUID(int=rng.getrandbits(128)))
        name = f"Scenario {i:03d}: node group {i % 17} loses power"
        phases = []
        for k in range(40):
            budget = float(rng.choice([20, 30, 60, 90, 120]))
            value = round(budget * rng.uniform(0.05, 0.9) * factor, 3)
            phases.append(
                {
                    "phase": f"w-{k % 8} phase {k}",
                    "seconds": value,
                    "budget_s": budget,
                    "within_budget": value <= budget,
                    "detail": {},
                    "complete": True,
                }
            )
        m_src = f"{uid}-m-attachment.json"
        (out / m_src).write_text(json.dumps(phases))
        t_src = f"{uid}-t-attachment.json"
        (out / t_src).write_text(
            json.dumps(
                [
                    {
                        "mono": j * 0.1,
                        "kind": "Pod",
                        "name": f"web-{j}",
                        "transition": "observed",
                        "detail": {"node": f"w-{j % 8}", "phase": "Running"},
                    }
                    for j in range(400)
                ]
            )
        )
        s_src = f"{uid}-s-attachment.svg"
        (out / s_src).write_text(
            "<svg xmlns='http://www.w3.org/2000/svg' width='900' height='300'>"
            + "".join(f"<rect x='{j}' y='{j % 280}' width='8' height='8'/>" for j in range(600))
            + "</svg>"
        )
        params = [{"name": "seed", "value": "42", "excluded": True}]
        for p in phases:
            params.append(
                {"name": f"{p['phase']} (s)", "value": str(p["seconds"]), "excluded": True}
            )
            params.append(
                {"name": f"{p['phase']} budget (s)", "value": str(p["budget_s"]), "excluded": True}
            )
        status = "passed" if i % 23 else "failed"
        doc = {
            "uuid": uid,
            "historyId": name,
            "name": name,
            "fullName": f"harness.steps.test_features::{name}",
            "status": status,
            "start": 1_000_000 + i * 100_000,
            "stop": 1_090_000 + i * 100_000,
            "labels": [
                {"name": "epic", "value": EPICS[i % len(EPICS)]},
                {"name": "feature", "value": f"Feature {i % 12}"},
                {"name": "story", "value": name},
                {"name": "severity", "value": "critical" if i % 5 == 0 else "normal"},
                {"name": "package", "value": "harness.steps.test_features"},
            ],
            "parameters": params,
            "steps": [
                {
                    "name": f"Then step {j}",
                    "status": "passed",
                    "start": 1,
                    "stop": 2,
                    "steps": [],
                    "attachments": [],
                    "parameters": [],
                }
                for j in range(12)
            ],
            "attachments": [
                {"name": "measurements.json", "source": m_src, "type": "application/json"},
                {"name": "timeline.json", "source": t_src, "type": "application/json"},
                {"name": "timeline", "source": s_src, "type": "image/svg+xml"},
            ],
        }
        if status == "failed":
            doc["statusDetails"] = {"message": "CheckFailed: over budget: expected x"}
        (out / f"{uid}-result.json").write_text(json.dumps(doc))


def render_today(results: Path, out: Path) -> Path:
    """As before the sign-off page: ``allure generate`` on the raw results."""
    binary = find_allure()
    out.mkdir(parents=True)
    config = allure_config(
        title="bench",
        history_path=out / "history.jsonl",
        history_limit=100,
        categories=[],
        group_by=(),
    )
    rc = out / "allurerc.json"
    rc.write_text(json.dumps(config))
    subprocess.run(
        [str(binary), "generate", "--config", str(rc), "--output", str(out / "r"), str(results)],
        check=True,
        capture_output=True,
        timeout=1800,
    )
    index = out / "r" / "index.html"
    shutil.move(str(index), out / "index.html")
    return out / "index.html"


def first_render_s(page: Path, blank: Path, repeat: int) -> tuple[float, bool]:
    def once(url: str) -> tuple[float, str]:
        t0 = time.perf_counter()
        dom = browser.dump_dom(url, budget_ms=10_000, timeout_s=600)
        return time.perf_counter() - t0, dom

    times, base = [], []
    shown = False
    for _ in range(repeat):
        base.append(once(blank.as_uri())[0])
        took, dom = once(page.as_uri())
        times.append(took)
        shown = 'id="powercut-signoff"' in dom or 'data-testid="tree-leaf-title"' in dom
    med = sorted(times)[len(times) // 2] - sorted(base)[len(base) // 2]
    return round(med, 2), shown


def signed(results: Path, out: Path, history: list[Run]) -> tuple[Path, float]:
    t0 = time.perf_counter()
    res = sign_off(
        results,
        SignOff(),
        run_id="20261126T170000Z-000000",
        target="bench",
        started="",
        finished="",
        powercut_version="bench",
        inventory="bench",
        previous=history,
    )
    index = render_report(
        results, out, title="bench", gates=res.gates_for_allure, signoff_html=res.page
    )
    return index, time.perf_counter() - t0


def history_of(results: Path, runs: int) -> list[Run]:
    out = []
    for i in range(runs):
        res = sign_off(
            results,
            SignOff(),
            run_id=f"20261126T1{i}0000Z-00000{i}",
            target="bench",
            started="",
            finished="",
            powercut_version="bench",
            inventory="bench",
        )
        out.append(res.run)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-longevity", action="store_true")
    args = ap.parse_args()
    rows: dict[str, Any] = {}
    ok = True
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        base = Path(tmp)
        blank = base / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body>x</body></html>")
        cases: list[tuple[str, Path]] = []
        r29 = base / "r29"
        synthetic_results(r29, 29)
        t0 = time.perf_counter()
        cases.append(("today-29", render_today(r29, base / "today-29")))
        rows["today-29"] = {"render_s": round(time.perf_counter() - t0, 1)}
        for n in (29, 200):
            res = base / f"s{n}"
            synthetic_results(res, n)
            index, took = signed(res, base / f"signoff-{n}", history_of(res, 5))
            cases.append((f"signoff-{n}", index))
            rows[f"signoff-{n}"] = {"render_s": round(took, 1)}
        if not args.skip_longevity:
            sys.path.insert(0, str(REPO / "bench"))
            from longevity_bench import write_synthetic  # type: ignore[import-not-found]

            from harness.longevity.report import write_report

            lon = base / "longevity"
            lon.mkdir()
            write_synthetic(lon, 10_000)
            t0 = time.perf_counter()
            files = write_report(lon, plots=True, allure=True)
            assert files.allure is not None
            index = render_report(files.allure, base / "longevity-10000", title="bench")
            rows["longevity-10000"] = {"render_s": round(time.perf_counter() - t0, 1)}
            cases.append(("longevity-10000", index))
        for name, index in cases:
            listing = sorted(p.name for p in index.parent.iterdir() if not p.name.startswith("."))
            first, shown = first_render_s(index, blank, args.repeat)
            one_file = "index.html" in listing
            rows[name].update(
                size_mb=round(index.stat().st_size / 1e6, 2),
                first_render_s=first,
                opened=shown,
                one_file=one_file,
            )
            ok = ok and one_file and shown
    print(
        json.dumps(
            {
                "benchmark": "report",
                "load_average": [round(x, 1) for x in os.getloadavg()],
                "cases": rows,
                "ok": ok,
            },
            indent=2,
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
