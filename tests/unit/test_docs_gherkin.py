"""Every Gherkin sentence the docs show runs (issue 24, item 7).

Each ```gherkin block of docs/ and the README is parsed and each of its steps matched
against the step definitions, with every value it uses converted as a run would (amounts,
failure words, subject phrases, budget names): the docs cannot show a sentence that does
not exist or a value the reference does not accept. Sentences quoted inline (`Given ...`,
`When ...`, `Then ...`) are checked the same way; a ``<placeholder>`` in one takes a value
the reference accepts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.steps.check import check_step, check_text

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
_BLOCK = re.compile(r"^```gherkin\n(.*?)^```", re.M | re.S)
_ANY_BLOCK = re.compile(r"^```.*?^```", re.M | re.S)
_INLINE = re.compile(r"`(Given|When|Then) ([^`]+)`")
#: A value for each placeholder an inline sentence may show.
PLACEHOLDERS = {"limit": "the recovery budget", "amount": "one", "failure": "power"}


def _blocks() -> list[tuple[Path, int, str]]:
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in _BLOCK.finditer(text):
            out.append((path, text[: m.start()].count("\n") + 2, m.group(1)))
    return out


def _inline() -> list[tuple[Path, int, str, str]]:
    out = []
    for path in DOCS:
        text = _ANY_BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text())
        for m in _INLINE.finditer(text):
            sentence = " ".join(m.group(2).split())
            sentence = re.sub(
                r"<(\w+)>", lambda p: PLACEHOLDERS.get(p.group(1), p.group(0)), sentence
            )
            out.append((path, text[: m.start()].count("\n") + 1, m.group(1), sentence))
    return out


def test_the_docs_show_gherkin() -> None:
    assert len(_blocks()) >= 4
    assert len(_inline()) >= 20


@pytest.mark.parametrize(
    ("path", "line", "block"), _blocks(), ids=lambda v: v.name if isinstance(v, Path) else ""
)
def test_every_gherkin_block_of_the_docs_parses_and_matches_the_grammar(
    path: Path, line: int, block: str
) -> None:
    problems = check_text(block, shown=str(path.relative_to(ROOT)), line_offset=line - 1)
    assert not problems, "\n".join(map(str, problems))


def test_every_sentence_quoted_in_the_docs_matches_the_grammar() -> None:
    problems = [
        f"{path.relative_to(ROOT)}:{line}: {why}"
        for path, line, kind, sentence in _inline()
        if (why := check_step(kind.lower(), sentence)) is not None
    ]
    assert not problems, "\n".join(problems)


def test_a_wrong_sentence_or_value_in_a_block_is_found_with_its_line() -> None:
    block = (
        "Given one worker node\n"
        "When I fail lots worker nodes and zero primary nodes with power failure for 5 seconds\n"
        "Then the node is NotReady within the node-not-redy budget\n"
    )
    problems = check_text(block, shown="doc.md", line_offset=10)
    assert [p.line for p in problems] == [12, 13]
    assert "unknown budget" in problems[1].message
