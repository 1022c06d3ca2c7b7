#!/usr/bin/env python3
"""Generate docs/steps.md from the step definitions of the step grammar (steps/).

The reference is rendered by ``harness.steps.reference`` (shipped in the package, printed
by ``powercut steps [WORDS]``); this script writes it to docs/steps.md.

    python scripts/gen_steps_doc.py           # write docs/steps.md
    python scripts/gen_steps_doc.py --check   # exit 1 if docs/steps.md is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.steps.reference import (  # noqa: E402 - after the sys.path set-up
    FIELD_TYPES,
    StepDoc,
    collect,
    render,
    step_modules,
)
from harness.steps.reference import sentence as _sentence  # noqa: E402

__all__ = ["FIELD_TYPES", "OUTPUT", "StepDoc", "_sentence", "collect", "render", "step_modules"]

OUTPUT = ROOT / "docs" / "steps.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if docs/steps.md is stale")
    ap.add_argument("--output", type=Path, default=OUTPUT)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run scripts/gen_steps_doc.py", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
