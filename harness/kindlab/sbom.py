"""The runner image's software bill of materials, made inside the image as it is built
(``python -m harness.kindlab.sbom OUT``: ``powercut image build`` and deploy/Dockerfile run
it) and copied beside the image by ``powercut image build``.

A CycloneDX 1.5 JSON document listing what is installed, each with its package URL: the
Python distributions of the venv (``pkg:pypi``: the locked versions), the Debian packages
(``pkg:deb``, from dpkg's database), Node.js and the Allure Report npm package (``pkg:npm``).
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ALLURE_PACKAGE = Path("/opt/allure/node_modules/allure/package.json")


def python_components() -> list[dict[str, Any]]:
    seen = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            seen[name.lower()] = dist.version
    return [
        {"type": "library", "name": n, "version": v, "purl": f"pkg:pypi/{n}@{v}"}
        for n, v in sorted(seen.items())
    ]


def debian_components() -> list[dict[str, Any]]:
    dpkg = shutil.which("dpkg-query")
    if dpkg is None:
        return []
    out = subprocess.run(
        [dpkg, "-W", "-f", "${Package}\\t${Version}\\t${Architecture}\\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    comps = []
    for line in sorted(out.splitlines()):
        name, version, arch = line.split("\t")
        comps.append(
            {
                "type": "library",
                "name": name,
                "version": version,
                "purl": f"pkg:deb/debian/{name}@{version}?arch={arch}",
            }
        )
    return comps


def report_tool_components() -> list[dict[str, Any]]:
    comps: list[dict[str, Any]] = []
    node = shutil.which("node")
    if node:
        version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        comps.append({"type": "application", "name": "node", "version": version.lstrip("v")})
    if ALLURE_PACKAGE.is_file():
        version = str(json.loads(ALLURE_PACKAGE.read_text())["version"])
        comps.append(
            {
                "type": "application",
                "name": "allure",
                "version": version,
                "purl": f"pkg:npm/allure@{version}",
            }
        )
    return comps


def document() -> dict[str, Any]:
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {"component": {"type": "container", "name": "powercut-runner"}},
        "components": [*python_components(), *debian_components(), *report_tool_components()],
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m harness.kindlab.sbom OUT.json", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document(), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
