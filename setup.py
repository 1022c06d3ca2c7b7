"""The package list and the mapping that puts the top-level ``steps/`` and ``features/`` into
the wheel as ``harness/steps`` and ``harness/features`` (pyproject.toml holds the rest).

A checkout links ``harness/steps`` and ``harness/features`` to them for development; the
build does not follow those links: it maps the directories, so the wheel, ``powercut image
build`` and ``deploy/Dockerfile`` (which copies no links) package the same files.
"""

from setuptools import find_packages, setup

MAPPED = {"harness.steps": "steps", "harness.features": "features"}

packages = find_packages(
    include=["harness", "harness.*"],
    exclude=[f"{name}{tail}" for name in MAPPED for tail in ("", ".*")],
)
packages += [f"harness.{p}" for p in find_packages(include=["steps", "steps.*"])]
packages.append("harness.features")

setup(packages=sorted(packages), package_dir=MAPPED)
