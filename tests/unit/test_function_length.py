"""No function in harness/ is over 120 lines (docs/DESIGN.md, "House rules"): a longer one
is split along its own sections. Measured from its ``def`` (decorators aside) to its last
line, docstring included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 120


def long_functions(root: Path, limit: int) -> list[str]:
    """``path:line name (n lines)`` of every function under ``root`` over ``limit`` lines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if path.is_symlink() or any(p.is_symlink() for p in path.parents if p != root):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    rel = path.relative_to(root)
                    out.append(f"{rel}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_the_measure_finds_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path, LIMIT) == [f"m.py:5 long ({LIMIT + 1} lines)"]


def test_no_function_in_harness_is_over_120_lines() -> None:
    assert long_functions(ROOT / "harness", LIMIT) == []  # paths relative to harness/
