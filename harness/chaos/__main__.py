"""``python -m harness.chaos discover``: the extension's chaostoolkit discovery document."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.chaos import discover


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.chaos",
        description="Write powercut's chaostoolkit discovery document (its actions and "
        "probes) for `chaos init --discovery-path FILE`.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("discover", help="write the discovery document")
    d.add_argument(
        "--discovery-path",
        type=Path,
        default=Path("discovery.json"),
        help="where to write it (default ./discovery.json; '-' for stdout)",
    )
    d.add_argument(
        "--no-system-info",
        action="store_true",
        help="leave out the nodes of the POWERCUT_INVENTORY inventory",
    )
    args = parser.parse_args(argv)
    text = json.dumps(discover(not args.no_system_info), indent=2, default=str)
    if str(args.discovery_path) == "-":
        print(text)
    else:
        args.discovery_path.write_text(text + "\n", encoding="utf-8")
        print(f"discovery written to {args.discovery_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
