#!/usr/bin/env python3
"""Generate docs/steps.md from the step definitions of the step grammar (steps/).

The reference is rendered by ``harness.steps.reference`` (shipped in the package, printed
by ``powercut steps [WORDS]``); this script writes it to docs/steps.md.

    python scripts/gen_steps_doc.py           # write docs/steps.md
    python scripts/gen_steps_doc.py --check   # exit 1 if docs/steps.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import docgen  # noqa: E402 - after the sys.path set-up
from harness.steps.reference import (  # noqa: E402
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
    return docgen.main(
        argv,
        render=render,
        output=OUTPUT,
        script="scripts/gen_steps_doc.py",
        about=(__doc__ or "").splitlines()[0],
    )


if __name__ == "__main__":
    sys.exit(main())
