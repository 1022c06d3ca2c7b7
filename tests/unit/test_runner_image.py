"""The runner image's inputs: what is copied and keyed (the build itself runs in
`powercut image build` and make mgmt-test)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.kindlab import runner_image as ri


def test_the_wheels_sources_only() -> None:
    files = ri.source_files(ri.checkout())
    assert "harness/__init__.py" in files and "pyproject.toml" in files
    assert "README.md" in files and "requirements/lock.txt" in files
    assert any(f.startswith("steps/") for f in files)
    assert any(f.startswith("features/") for f in files)
    assert not [f for f in files if f.startswith(("tests/", "docs/", "bench/", "deploy/"))]


def test_the_key_follows_the_sources(tmp_path: Path) -> None:
    files = ["pyproject.toml", "harness/a.py", "harness/link"]
    (tmp_path / "harness").mkdir()
    (tmp_path / "pyproject.toml").write_text("x")
    (tmp_path / "harness" / "a.py").write_text("A = 1\n")
    (tmp_path / "harness" / "link").symlink_to("../steps")
    copy = tmp_path / "copy"
    ri.copy_sources(tmp_path, files, copy)
    assert (copy / "harness" / "link").is_symlink()
    k1 = ri.inputs_key(copy, files, "base.tar")
    assert ri.inputs_key(copy, files, "base.tar") == k1
    assert ri.inputs_key(copy, files, "other-base.tar") != k1
    (copy / "harness" / "a.py").write_text("A = 2\n")
    assert ri.inputs_key(copy, files, "base.tar") != k1
    shutil.rmtree(copy)


def test_the_image_is_non_root_and_read_only_ready() -> None:
    d = ri.DOCKERFILE.format(base="b", wheel="w.whl", uid=ri.UID, sbom=ri.SBOM_PATH)
    assert f"USER {ri.UID}:{ri.UID}" in d
    for env in ("PYTHONDONTWRITEBYTECODE=1", "HOME=/tmp", "MPLCONFIGDIR=/tmp/matplotlib",
                "POWERCUT_STATE_DIR=/var/lib/powercut/state", "POWERCUT_ALLURE="):  # fmt: skip
        assert env in d
    assert 'ENTRYPOINT ["/usr/bin/tini", "--", "powercut"]' in d
    assert "-c /src/lock.txt" in d  # the locked versions, as constraints
    assert ri.ref("0123456789abcdef", "0.1.0") == "powercut.local/powercut:0.1.0-0123456789abcdef"


def test_the_sbom_lists_the_locked_python_packages_and_the_debian_ones(tmp_path: Path) -> None:
    """What the image build runs inside the image, run here: every locked distribution
    installed in this venv is listed with its version and package URL."""
    import json
    import shutil

    from harness.kindlab import sbom

    out = tmp_path / "sbom.json"
    assert sbom.main([str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.5"
    purls = {c.get("purl", "") for c in doc["components"]}
    lock = Path(__file__).resolve().parents[2] / "requirements" / "lock.txt"
    pinned = dict(line.split("==", 1) for line in lock.read_text().splitlines() if "==" in line)
    assert f"pkg:pypi/pydantic@{pinned['pydantic']}" in purls
    assert f"pkg:pypi/pyyaml@{pinned['PyYAML']}" in purls
    if shutil.which("dpkg-query"):
        assert any(p.startswith("pkg:deb/debian/dpkg@") for p in purls)
    assert sbom.main([]) == 2


def test_built_twice_from_changed_sources_the_image_gets_two_tags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`build` over a checkout whose sources change between two builds: two tags, each
    carrying the key of what went in; an unchanged checkout finds its image by that tag.
    Docker, debootstrap and the wheel are replaced by recorders (the real build:
    make mgmt-test)."""
    import subprocess

    from harness import __version__
    from harness.kindlab import images
    from harness.kindlab import versions as kind_versions

    repo = tmp_path / "repo"
    (repo / "harness").mkdir(parents=True)
    (repo / "requirements").mkdir()
    (repo / "pyproject.toml").write_text("[project]\nname = 'powercut'\n")
    (repo / "requirements" / "lock.txt").write_text("PyYAML==6.0\n")
    (repo / "harness" / "a.py").write_text("A = 1\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    tools = tmp_path / "tools"
    (tools / "allure" / "node_modules").mkdir(parents=True)
    (tools / "node").write_text("node")
    labels: dict[str, str] = {}
    built: list[str] = []

    def docker_build(ref: str, ctx: Path, dockerfile: str, key: str) -> None:
        built.append(ref)
        labels[ref] = key

    def wheel(src: Path, dest: Path) -> Path:
        w = dest / "powercut-0.1.0-py3-none-any.whl"
        w.write_bytes(b"wheel")
        return w

    monkeypatch.setattr(ri, "checkout", lambda: repo)
    monkeypatch.setattr(kind_versions, "kind_cache", lambda: tmp_path / "cache")
    monkeypatch.setattr(images, "rootfs_tar", lambda say, packages: tmp_path / "base-1.tar")
    monkeypatch.setattr(images, "base_image", lambda say, ref, packages: ref)
    monkeypatch.setattr(images, "image_key", labels.get)
    monkeypatch.setattr(images, "_docker_build", docker_build)
    monkeypatch.setattr(
        ri, "report_tools", lambda root, say: (tools / "node", tools / "allure", "t")
    )
    monkeypatch.setattr(ri, "wheelhouse", lambda say: tmp_path)
    monkeypatch.setattr(ri, "_wheel", wheel)
    monkeypatch.setattr(ri, "size", lambda image: 1)
    monkeypatch.setattr(ri, "sbom_beside", lambda image, key: tmp_path / f"sbom-{key}.json")
    first = ri.build(lambda m: None)
    again = ri.build(lambda m: None)
    (repo / "harness" / "a.py").write_text("A = 2\n")
    second = ri.build(lambda m: None)
    assert built == [first.ref, second.ref]  # the unchanged checkout built nothing
    assert again.cached and again.ref == first.ref
    assert first.ref != second.ref
    for b in (first, second):
        assert b.ref == f"powercut.local/powercut:{__version__}-{b.key}"
        assert labels[b.ref] == b.key
