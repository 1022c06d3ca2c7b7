"""docs/DESIGN.md is a map a newcomer follows in one hop: every file or directory it names
exists (a move that forgets the map fails here)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "DESIGN.md"
# a repository path in backticks: starts with a top-level directory of the repository
PATH = re.compile(r"`((?:harness|steps|tests|features|docs|scripts|bench|deploy)/[^`\s]*)`")


def named_paths(text: str) -> list[str]:
    """The repository paths ``text`` names (``<kind>`` placeholders left out)."""
    found = {m.group(1).rstrip(".,") for m in PATH.finditer(text)}
    return sorted(p for p in found if "<" not in p)


def test_the_design_doc_names_paths() -> None:
    paths = named_paths(DESIGN.read_text(encoding="utf-8"))
    assert "harness/failures/" in paths and "harness/scenario/expectations/" in paths
    assert len(paths) > 40


def exists(path: str) -> bool:
    """Whether ``path`` (a glob where it has ``*``) names something in the repository."""
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


def test_every_path_the_design_doc_names_exists() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    assert [p for p in named_paths(text) if not exists(p)] == []


def test_a_missing_path_is_found() -> None:
    assert named_paths("see `harness/nowhere.py` and `harness/failures/<kind>.py`") == [
        "harness/nowhere.py"
    ]
