#!/usr/bin/env python3
"""The tag for an image built with deploy/Dockerfile: ``<version>-<digest>``, the digest a
sha256 (16 hex digits) of every file the Dockerfile copies from the build context (as git
tracks them, links as links) and of the Dockerfile itself. Changed sources give a new tag.

    python scripts/image_tag.py              # prints e.g. 0.1.0-3f2a9c0d1b4e5a6f
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
_COPY = re.compile(r"^COPY\s+(?P<args>.+)$")


def copied_sources(dockerfile: Path = DOCKERFILE) -> list[str]:
    """The context paths the Dockerfile's COPY instructions name (not ``--from`` stages)."""
    out: list[str] = []
    for line in dockerfile.read_text(encoding="utf-8").splitlines():
        m = _COPY.match(line.strip())
        if not m or "--from=" in m["args"]:
            continue
        words = [w for w in m["args"].split() if not w.startswith("--")]
        out += [w.rstrip("/") for w in words[:-1]]
    return out


def context_files(root: Path, sources: list[str]) -> list[str]:
    """The files under those paths that git tracks or would track, sorted."""
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z", "--", *sources],
        capture_output=True,
        check=True,
    )
    return sorted(
        f
        for f in out.stdout.decode().split("\0")
        if f and ((root / f).is_file() or (root / f).is_symlink())
    )


def digest(root: Path = ROOT, dockerfile: Path = DOCKERFILE) -> str:
    h = hashlib.sha256(dockerfile.read_bytes())
    for f in context_files(root, copied_sources(dockerfile)):
        p = root / f
        body = ("->" + os.readlink(p)).encode() if p.is_symlink() else p.read_bytes()
        h.update(f.encode() + b"\0" + body)
    return h.hexdigest()[:16]


def version(root: Path = ROOT) -> str:
    m = re.search(r'^version = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M)
    if not m:
        raise SystemExit(f"{root / 'pyproject.toml'}: no version")
    return m[1]


def main() -> int:
    print(f"{version()}-{digest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
