"""``lab up``/``lab down`` and ``kind up``/``kind down`` remove only their own state directory.

Both clear what a crashed lab left in ``--state-dir`` before anything else. A directory
that is not a lab's (a typo, a parent directory, a home) is refused with an error naming
it, and nothing in it is touched: ``lab down --state-dir DIR`` on the parent of a lab's
directory removed the parent, the running lab's state with it, and left the lab running.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.lab import build
from harness.lab import cli as labcli


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    labcli.add_parser(parser.add_subparsers(dest="cmd"))
    return parser.parse_args(["lab", *argv])


@pytest.fixture
def precious(tmp_path: Path) -> Path:
    """A directory of the user's, holding a lab's state directory and a file of its own."""
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "lab.json").write_text("{}")
    return tmp_path


def test_down_refuses_a_directory_that_is_not_a_lab_and_removes_nothing(precious: Path) -> None:
    args = parse("down", "--state-dir", str(precious))
    with pytest.raises(ConfigError) as caught:
        args.func(args)
    assert str(precious) in str(caught.value)
    assert "is not a lab's state directory" in str(caught.value)
    assert caught.value.field == "--state-dir"
    assert (precious / "notes.txt").read_text() == "mine"
    assert (precious / "lab" / "lab.json").exists()


def test_up_refuses_a_non_empty_directory_that_is_not_a_lab_before_anything(
    precious: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_build(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the lab's binaries were obtained before the state dir was checked")

    monkeypatch.setattr(build, "obtain", no_build)
    args = parse("up", "--state-dir", str(precious), "--base-port", "21000")
    with pytest.raises(ConfigError) as caught:
        args.func(args)
    assert str(precious) in str(caught.value)
    assert (precious / "notes.txt").read_text() == "mine"


def test_down_removes_what_a_crashed_lab_left(precious: Path) -> None:
    lab = precious / "lab"  # lab.json, no supervisor running
    args = parse("down", "--state-dir", str(lab))
    assert args.func(args) == 0
    assert not lab.exists()
    assert (precious / "notes.txt").exists()


@pytest.mark.parametrize(
    ("content", "is_lab"),
    [
        ((), True),  # empty: nothing to lose
        (("lab.json",), True),
        (("logs/",), True),  # a lab up that crashed before writing lab.json
        (("pgid",), True),
        (("notes.txt",), False),
        (("notes.txt", "sub/"), False),
    ],
)
def test_what_counts_as_a_lab_state_directory(
    tmp_path: Path, content: tuple[str, ...], is_lab: bool
) -> None:
    for name in content:
        if name.endswith("/"):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text("x")
    assert labcli.is_lab_dir(tmp_path) is is_lab


# -- kind ------------------------------------------------------------------------------------


def test_kind_down_refuses_a_directory_that_is_not_a_clusters_before_anything(
    precious: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.kindlab import cluster, engine

    def untouched(*_args: object, **_kwargs: object) -> bool:
        raise AssertionError("the Docker engine was asked before the state dir was checked")

    monkeypatch.setattr(engine, "answers", untouched)
    with pytest.raises(ConfigError) as caught:
        cluster.down(precious, lambda _m: None)
    assert str(precious) in str(caught.value)
    assert "spec.json" in str(caught.value)
    assert (precious / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("content", "ok"),
    [((), True), (("spec.json",), True), (("dockerd.pid",), True), (("notes.txt",), False)],
)
def test_kind_state_directory_check(tmp_path: Path, content: tuple[str, ...], ok: bool) -> None:
    from harness.kindlab import cluster

    for name in content:
        (tmp_path / name).write_text("x")
    if ok:
        cluster.check_state_dir(tmp_path)
        cluster.check_state_dir(tmp_path / "new")  # not there yet
    else:
        with pytest.raises(ConfigError):
            cluster.check_state_dir(tmp_path)
