#!/usr/bin/env python3
"""Generate docs/lab.md from the lab's own code (harness/lab: spec, inventory, manifests).

python scripts/gen_lab_doc.py           # write docs/lab.md
python scripts/gen_lab_doc.py --check   # exit 1 if docs/lab.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import docgen  # noqa: E402 - after the sys.path set-up
from harness.lab.reference import render  # noqa: E402

OUTPUT = ROOT / "docs" / "lab.md"


def main(argv: list[str] | None = None) -> int:
    return docgen.main(
        argv,
        render=render,
        output=OUTPUT,
        script="scripts/gen_lab_doc.py",
        about=(__doc__ or "").splitlines()[0],
    )


if __name__ == "__main__":
    sys.exit(main())
