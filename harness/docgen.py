"""Write a generated reference document, or check that the one on disk is current.

The references (docs/steps.md from the step grammar, docs/lab.md from the lab's code) are
rendered by the library; the scripts that write them share this one command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def main(
    argv: list[str] | None, *, render: Callable[[], str], output: Path, script: str, about: str
) -> int:
    """``SCRIPT`` writes ``output``; ``SCRIPT --check`` exits 1 when it is out of date."""
    ap = argparse.ArgumentParser(prog=script, description=about)
    ap.add_argument("--check", action="store_true", help=f"fail if {output.name} is stale")
    ap.add_argument("--output", type=Path, default=output)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run {script}", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0
