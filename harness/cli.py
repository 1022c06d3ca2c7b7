"""The ``powercut`` command."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import NoReturn, cast

from harness import __version__
from harness.errors import PowercutError


class OneLineParser(argparse.ArgumentParser):
    """Bad options give one line that names the option and where to read more, not a
    usage block (subcommand parsers inherit this class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(
        prog="powercut",
        description="Prove a Kubernetes cluster survives the loss of its failure domains.",
    )
    ap.add_argument("--version", action="version", version=f"powercut {__version__}")
    ap.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    # Subcommand parsers are OneLineParsers at run time; the helpers are typed for the base.
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        ap.add_subparsers(dest="command", required=True, metavar="COMMAND"),
    )
    from harness.lab.cli import add_parser as add_lab

    add_lab(sub)
    from harness.kindlab.cli import add_parser as add_kind

    add_kind(sub)
    from harness.cli_power import add_parsers as add_power

    add_power(sub)
    from harness.cli_run import add_parsers as add_run

    add_run(sub)
    from harness.cli_longevity import add_parsers as add_longevity

    add_longevity(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args, extra = ap.parse_known_args(argv)
    if extra and getattr(args, "command", None) != "run":
        ap.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        rc: int = args.func(args, extra) if args.command == "run" else args.func(args)
    except PowercutError as exc:
        # One clear line, no traceback: the error names what was wrong and what is valid.
        print(f"powercut: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("powercut: interrupted", file=sys.stderr)
        return 130
    return rc


if __name__ == "__main__":
    sys.exit(main())
