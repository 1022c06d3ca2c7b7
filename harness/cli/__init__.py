"""The ``powercut`` command."""

from __future__ import annotations

import argparse
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
    ap.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="debug logging, and every library's warnings on the terminal (by default they "
        "go to the log: ~/.cache/powercut/log/powercut.log or $POWERCUT_LOG; `run`: DIR/run.log)",
    )
    # Subcommand parsers are OneLineParsers at run time; the helpers are typed for the base.
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        ap.add_subparsers(dest="command", required=True, metavar="COMMAND"),
    )
    from harness.lab.cli import add_parser as add_lab

    add_lab(sub)
    from harness.kindlab.cli import add_parser as add_kind

    add_kind(sub)
    from harness.kindlab.image_cli import add_parser as add_image

    add_image(sub)
    from harness.cli.power import add_parsers as add_power

    add_power(sub)
    from harness.cli.rbac import add_parsers as add_rbac

    add_rbac(sub)
    from harness.cli.journal import add_parsers as add_journal

    add_journal(sub)
    from harness.cli.run import add_parsers as add_run

    add_run(sub)
    from harness.cli.longevity import add_parsers as add_longevity

    add_longevity(sub)
    from harness.cli.init import add_parsers as add_init

    add_init(sub)
    from harness.cli.steps import add_parsers as add_steps

    add_steps(sub)
    from harness.cli.store import add_parsers as add_store

    add_store(sub)
    from harness.cli.budgets import add_parsers as add_budgets

    add_budgets(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args, extra = ap.parse_known_args(argv)
    if extra and getattr(args, "command", None) != "run":
        ap.error(f"unrecognized arguments: {' '.join(extra)}")
    from harness.cli.log import configure_logging
    from harness.settings import from_environment

    try:
        # The one read of powercut's environment (docs/settings.md); commands take it from
        # here and pass it down.
        args.settings = from_environment()
    except PowercutError as exc:
        print(f"powercut: error: {exc}", file=sys.stderr)
        return 2
    configure_logging(bool(args.verbose), log_file=args.settings.log_file)
    from harness.progress.display import showing

    # Commands that wait on BMCs in this process say what they wait for (run and
    # longevity show their own progress).
    waits = "auto" if args.command in ("power", "recover", "preflight") else "off"
    try:
        with showing(waits, sys.stderr):
            rc: int = args.func(args, extra) if args.command == "run" else args.func(args)
    except PowercutError as exc:
        # One clear line, no traceback: the error names what was wrong and what is valid.
        print(f"powercut: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("powercut: interrupted", file=sys.stderr)
        return 130
    return rc
