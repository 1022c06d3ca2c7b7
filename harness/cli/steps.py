"""``powercut steps [WORDS]``: the step reference, from the installed step grammar."""

from __future__ import annotations

import argparse


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "steps",
        help="print the step reference (every sentence a feature can use), or the entries "
        "holding WORDS",
        description="Print the step reference: every sentence, its singular and plural forms, "
        "the values it accepts, what it provides and needs, where its measurements start, "
        "whether it skips or fails with nothing to judge, and lab/kind/real-machine "
        "differences. With WORDS, only the entries whose sentences or description hold all "
        "of them; a single word 'amounts', 'failure', 'subjects', 'tags', 'budgets' or "
        "'outline' "
        "prints that table too. The same text as docs/steps.md, from the installed package.",
    )
    p.add_argument("words", nargs="*", metavar="WORDS", help="words to look for")
    p.set_defaults(func=cmd_steps)


def cmd_steps(args: argparse.Namespace) -> int:
    from harness.steps.reference import search

    text = search(args.words)
    if not text:
        print(f"no step holds: {' '.join(args.words)} (`powercut steps` lists every step)")
        return 1
    print(text, end="")
    return 0
