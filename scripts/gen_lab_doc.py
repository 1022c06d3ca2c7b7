#!/usr/bin/env python3
"""Generate docs/lab.md from the lab's own code (harness/lab: spec, inventory, manifests).

python scripts/gen_lab_doc.py           # write docs/lab.md
python scripts/gen_lab_doc.py --check   # exit 1 if docs/lab.md is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.lab.reference import render  # noqa: E402 - after the sys.path set-up

OUTPUT = ROOT / "docs" / "lab.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if docs/lab.md is stale")
    ap.add_argument("--output", type=Path, default=OUTPUT)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run scripts/gen_lab_doc.py", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
