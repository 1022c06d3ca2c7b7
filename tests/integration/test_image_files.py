"""The registry Dockerfile, `powercut image build` and the wheel hold the same files: a wheel
built from exactly what deploy/Dockerfile copies (links as links, as COPY does) lists the
same files as the one `powercut image build` installs (built from the checkout's files),
steps/ and features/ included; and the Dockerfile's tag changes with its sources."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from harness.kindlab import runner_image as ri

ROOT = Path(__file__).resolve().parents[2]


def _image_tag() -> ModuleType:
    spec = importlib.util.spec_from_file_location("image_tag", ROOT / "scripts" / "image_tag.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {n for n in z.namelist() if not n.startswith("powercut-")}


@pytest.mark.slow
def test_the_dockerfiles_files_make_the_same_wheel_as_the_image_build(tmp_path: Path) -> None:
    tag = _image_tag()
    image_src, docker_src = tmp_path / "image", tmp_path / "docker"
    ri.copy_sources(ROOT, ri.source_files(ROOT), image_src)
    ri.copy_sources(ROOT, tag.context_files(ROOT, tag.copied_sources()), docker_src)
    image_wheel = _names(ri._wheel(image_src, tmp_path / "w1"))
    docker_wheel = _names(ri._wheel(docker_src, tmp_path / "w2"))
    assert image_wheel == docker_wheel, (
        sorted(image_wheel - docker_wheel),
        sorted(docker_wheel - image_wheel),
    )
    steps = {p.relative_to(ROOT / "steps").as_posix() for p in (ROOT / "steps").rglob("*.py")}
    features = {
        p.relative_to(ROOT / "features").as_posix() for p in (ROOT / "features").rglob("*.feature")
    }
    assert steps and features
    assert {f"harness/steps/{s}" for s in steps} <= docker_wheel
    assert {f"harness/features/{f}" for f in features} <= docker_wheel


@pytest.mark.slow
def test_a_wheel_from_sources_without_links_holds_the_steps_and_features(tmp_path: Path) -> None:
    """The build maps steps/ and features/ (setup.py): with no links in the sources at all
    (a checkout where they were not made), the wheel still holds both."""
    src = tmp_path / "src"
    files = [f for f in ri.source_files(ROOT) if f not in ("harness/steps", "harness/features")]
    ri.copy_sources(ROOT, files, src)
    assert not (src / "harness" / "steps").exists()
    names = _names(ri._wheel(src, tmp_path / "w"))
    assert "harness/steps/plugin.py" in names
    assert "harness/features/control_plane_loss.feature" in names
    assert any(n.startswith("harness/features/experiments/") for n in names)


def test_the_dockerfile_tag_changes_with_its_sources(tmp_path: Path) -> None:
    tag = _image_tag()
    repo = tmp_path / "repo"
    (repo / "deploy").mkdir(parents=True)
    shutil.copy2(ROOT / "deploy" / "Dockerfile", repo / "deploy" / "Dockerfile")
    for f in ("pyproject.toml", "setup.py", "README.md", "requirements/lock.txt"):
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, repo / f)
    (repo / "harness").mkdir()
    (repo / "harness" / "a.py").write_text("A = 1\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    dockerfile = repo / "deploy" / "Dockerfile"
    first = tag.digest(repo, dockerfile)
    assert tag.digest(repo, dockerfile) == first
    (repo / "harness" / "a.py").write_text("A = 2\n")
    second = tag.digest(repo, dockerfile)
    assert second != first
    (repo / "harness" / "b.py").write_text("")  # a new file, untracked but not ignored
    assert tag.digest(repo, dockerfile) not in (first, second)
    assert tag.version(repo) == tag.version(ROOT)
