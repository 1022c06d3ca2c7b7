#!/usr/bin/env python3
"""Generate the values table of deploy/chart/README.md from deploy/chart/values.yaml.

Every key of values.yaml is a row: its dotted path, its default (the YAML text after the
colon) and its description (the comment lines right above it and the comment after it).
The table sits between the README's ``<!-- values:begin -->`` and ``<!-- values:end -->``
markers; the rest of the README is hand-written.

    python scripts/gen_chart_readme.py           # rewrite the table in deploy/chart/README.md
    python scripts/gen_chart_readme.py --check   # exit 1 if the table is out of date
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import docgen  # noqa: E402 - after the sys.path set-up

CHART = ROOT / "deploy" / "chart"
VALUES = CHART / "values.yaml"
OUTPUT = CHART / "README.md"
BEGIN = "<!-- values:begin -->"
END = "<!-- values:end -->"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_]*):(?P<rest>.*)$")


@dataclass(frozen=True)
class Row:
    path: str
    default: str
    description: str


def _split_comment(rest: str) -> tuple[str, str]:
    """The value and the trailing comment of the text after a key's colon (a '#' inside
    quotes is part of the value)."""
    quote = ""
    for i, ch in enumerate(rest):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1] == " "):
            return rest[:i].strip(), rest[i + 1 :].strip()
    return rest.strip(), ""


def rows(text: str) -> list[Row]:
    """The keys of a values.yaml, in file order, with their defaults and comments. A comment
    line indented past column 20 under a key with a trailing comment continues that comment;
    other comment lines describe the key below them."""
    found: list[tuple[str, str, list[str]]] = []
    stack: list[tuple[int, str]] = []
    above: list[str] = []
    trailing: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            body = stripped.lstrip("#").strip()
            if trailing is not None and len(line) - len(line.lstrip()) > 20:
                trailing.append(body)
            else:
                above.append(body)
                trailing = None
            continue
        m = _KEY.match(line)
        if not m:
            above, trailing = [], None
            continue
        indent = len(m["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        value, comment = _split_comment(m["rest"])
        words = [*above, *([comment] if comment else [])]
        found.append((".".join([*(k for _, k in stack), m["key"]]), value, words))
        trailing = words if comment else None
        above = []
        if not value:
            stack.append((indent, m["key"]))
    return [Row(path, value, " ".join(w for w in words if w)) for path, value, words in found]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def table(text: str) -> str:
    lines = ["| Key | Default | Description |", "| --- | --- | --- |"]
    for r in rows(text):
        default = f"`{_cell(r.default)}`" if r.default else ""
        lines.append(f"| `{r.path}` | {default} | {_cell(r.description)} |")
    return "\n".join(lines) + "\n"


def render() -> str:
    readme = OUTPUT.read_text(encoding="utf-8")
    head, sep, rest = readme.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{OUTPUT}: the markers {BEGIN} and {END} are missing")
    generated = table(VALUES.read_text(encoding="utf-8"))
    return f"{head}{BEGIN}\n{generated}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    return docgen.main(
        argv,
        render=render,
        output=OUTPUT,
        script="scripts/gen_chart_readme.py",
        about="Generate deploy/chart/README.md's values table from deploy/chart/values.yaml.",
    )


if __name__ == "__main__":
    sys.exit(main())
