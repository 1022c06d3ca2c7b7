"""powercut's settings: every ``POWERCUT_*`` variable is parsed in ``harness/settings.py``
and nowhere else in ``harness/`` (docs/settings.md), a bad value is refused naming the
variable and what is valid, and docs/settings.md's table is the code's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness import settings as s
from harness.cli import main
from harness.errors import ConfigError
from harness.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"
HOME = Path("/home/someone")

#: Modules that read a variable whose name is not theirs to choose, and why.
READS_A_NAME_GIVEN: dict[str, str] = {
    "discover.py": "the BMC password variable the user names on the command line",
    "inventory/secrets.py": "the secret variables the inventory names (`env: NAME`)",
    "chaos/runner.py": "puts POWERCUT_INVENTORY back as it was after setting it for chaostoolkit",
}

_NAME = re.compile(r"POWERCUT_[A-Z0-9_]*")


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ``."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _env_key(node: ast.AST) -> ast.expr | None:
    """The key ``node`` reads from the environment, if it reads one: ``os.environ.get(K)``,
    ``os.getenv(K)``, ``os.environ[K]`` (read), ``os.environ.pop(K)``."""
    if isinstance(node, ast.Call) and node.args:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("get", "pop") and _is_environ(f.value):
            return node.args[0]
        if (isinstance(f, ast.Attribute) and f.attr == "getenv") or (
            isinstance(f, ast.Name) and f.id == "getenv"
        ):
            return node.args[0]
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and _is_environ(node.value)
    ):
        return node.slice
    return None


def environment_reads(root: Path, *, allowed: dict[str, str]) -> list[str]:
    """``path:line what`` of every module under ``root`` but settings.py that reads a
    POWERCUT_* variable, or names one as a whole string (a constant read elsewhere), or
    reads a variable by a computed name without a reason in ``allowed``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "settings.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        keys = {id(k): k for k in map(_env_key, ast.walk(tree)) if k is not None}
        here: list[tuple[int, str]] = []
        for key in keys.values():
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if key.value.startswith(s.PREFIX):
                    here.append((key.lineno, f"reads {key.value}"))
            elif rel not in allowed:
                here.append((key.lineno, f"reads {ast.unparse(key)}"))
        for node in ast.walk(tree):
            if id(node) in keys or not isinstance(node, ast.Constant):
                continue
            if isinstance(node.value, str) and _NAME.fullmatch(node.value):
                here.append((node.lineno, f"names {node.value}"))
        found += [f"{rel}:{line} {what}" for line, what in sorted(here)]
    return found


# -- the rule --------------------------------------------------------------------------------


def test_the_scan_finds_each_way_of_reading_a_variable(tmp_path: Path) -> None:
    (tmp_path / "settings.py").write_text('import os\nX = os.environ.get("POWERCUT_A")\n')
    (tmp_path / "m.py").write_text(
        "import os\n"
        'a = os.environ.get("POWERCUT_A")\n'
        'b = os.getenv("POWERCUT_B", "x")\n'
        'c = os.environ["POWERCUT_C"]\n'
        'NAME = "POWERCUT_D"\n'
        "d = os.environ.get(NAME)\n"
        'e = os.environ.get("HOME")\n'
        'os.environ["POWERCUT_E"] = "1"\n'
        '"""a docstring naming POWERCUT_F is not a read"""\n'
    )
    assert environment_reads(tmp_path, allowed={}) == [
        "m.py:2 reads POWERCUT_A",
        "m.py:3 reads POWERCUT_B",
        "m.py:4 reads POWERCUT_C",
        "m.py:5 names POWERCUT_D",
        "m.py:6 reads NAME",
        "m.py:8 names POWERCUT_E",
    ]
    assert environment_reads(tmp_path, allowed={"m.py": "why"})[-1] == "m.py:8 names POWERCUT_E"


def test_no_module_but_settings_reads_a_powercut_variable() -> None:
    assert environment_reads(HARNESS, allowed=READS_A_NAME_GIVEN) == []


def test_each_allowed_reader_still_reads_a_name_given() -> None:
    """The list above does not outlive its reasons."""
    for rel in READS_A_NAME_GIVEN:
        tree = ast.parse((HARNESS / rel).read_text(encoding="utf-8"))
        keys = [k for k in map(_env_key, ast.walk(tree)) if k is not None]
        assert any(not isinstance(k, ast.Constant) for k in keys), rel


# -- parsing ---------------------------------------------------------------------------------


def test_defaults_follow_home_and_the_cache() -> None:
    got = Settings.from_environ({}, home=HOME)
    assert got.state_dir == HOME / ".local/state/powercut"
    assert got.cache_dir == HOME / ".cache/powercut"
    assert got.log_file == HOME / ".cache/powercut/log/powercut.log"
    assert got.lab_dir == HOME / ".cache/powercut/lab"
    assert got.kind_dir == HOME / ".cache/powercut/kind-state"
    assert (got.allure, got.chromium, got.inventory, got.bin_dir) == (None, None, None, None)
    assert (got.progress, got.progress_fd, dict(got.bins)) == ("off", None, {})


def test_the_cache_moves_what_lives_under_it_unless_named() -> None:
    got = Settings.from_environ(
        {"POWERCUT_CACHE": "/c", "POWERCUT_LAB_DIR": "~/lab", "POWERCUT_LOG": ""}, home=HOME
    )
    assert got.cache_dir == Path("/c")
    assert got.log_file == Path("/c/log/powercut.log")  # empty counts as unset
    assert got.kind_dir == Path("/c/kind-state")
    assert got.lab_dir == Path("~/lab").expanduser()


def test_every_variable_is_read() -> None:
    env = {
        "POWERCUT_STATE_DIR": "/s",
        "POWERCUT_LOG": "/l.log",
        "POWERCUT_KIND_DIR": "/k",
        "POWERCUT_ALLURE": "/a",
        "POWERCUT_CHROMIUM": "/ch",
        "POWERCUT_INVENTORY": "/i.yaml",
        "POWERCUT_PROGRESS": "plain",
        "POWERCUT_PROGRESS_FD": "7",
        "POWERCUT_BIN_DIR": "/bin",
        "POWERCUT_BIN_KUBE_APISERVER": "/x/kube-apiserver",
        "POWERCUT_BIN_ETCD": "",
    }
    got = Settings.from_environ(env, home=HOME)
    assert (got.state_dir, got.log_file, got.kind_dir) == (Path("/s"), Path("/l.log"), Path("/k"))
    assert (got.allure, got.chromium, got.inventory) == (Path("/a"), Path("/ch"), Path("/i.yaml"))
    assert (got.progress, got.progress_fd, got.bin_dir) == ("plain", 7, Path("/bin"))
    assert got.bin("kube-apiserver") == Path("/x/kube-apiserver")
    assert got.bin("etcd") is None  # empty
    assert s.bin_variable("kube-controller-manager") == "POWERCUT_BIN_KUBE_CONTROLLER_MANAGER"


def test_the_settings_are_frozen() -> None:
    got = Settings.from_environ({}, home=HOME)
    with pytest.raises(AttributeError):
        got.progress = "rich"  # type: ignore[misc]
    with pytest.raises(TypeError):
        got.bins["POWERCUT_BIN_X"] = Path("/x")  # type: ignore[index]


@pytest.mark.parametrize(
    ("name", "value", "valid"),
    [
        ("POWERCUT_PROGRESS", "fancy", "valid: auto, rich, plain, off"),
        ("POWERCUT_PROGRESS_FD", "two", "valid: a file descriptor, an integer >= 0"),
        ("POWERCUT_PROGRESS_FD", "-1", "valid: a file descriptor, an integer >= 0"),
        ("POWERCUT_STATE_DIR", "/a\0b", "valid: a directory path"),
    ],
)
def test_a_bad_value_names_the_variable_and_what_is_valid(
    name: str, value: str, valid: str
) -> None:
    with pytest.raises(ConfigError) as err:
        Settings.from_environ({name: value}, home=HOME)
    assert err.value.field == name
    assert str(err.value).startswith(f"{name}: {value!r} is not ")
    assert str(err.value).endswith(valid)


def test_the_handover_to_pytest_is_read_back() -> None:
    env = Settings.from_environ({}, home=HOME).progress_environ("rich", 9)
    assert env == {"POWERCUT_PROGRESS": "rich", "POWERCUT_PROGRESS_FD": "9"}
    back = Settings.from_environ(env, home=HOME)
    assert (back.progress, back.progress_fd) == ("rich", 9)
    with pytest.raises(ConfigError, match="POWERCUT_PROGRESS"):
        Settings.from_environ({}, home=HOME).progress_environ("loud", None)


def test_a_library_call_without_settings_reads_the_environment_now(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from harness.session.paths import state_dir

    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "a"))
    assert state_dir() == tmp_path / "a"
    monkeypatch.setenv("POWERCUT_STATE_DIR", str(tmp_path / "b"))
    assert state_dir() == tmp_path / "b"
    passed = Settings.from_environ({"POWERCUT_STATE_DIR": "/passed"}, home=HOME)
    assert state_dir(passed) == Path("/passed")  # what is passed down wins


def test_the_command_refuses_a_bad_value_before_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERCUT_PROGRESS", "fancy")
    assert main(["journal", "-i", "/nonexistent.yaml"]) == 2
    err = capsys.readouterr().err
    assert "POWERCUT_PROGRESS: 'fancy' is not valid; valid: auto, rich, plain, off" in err
    assert "nonexistent" not in err  # refused before the command ran


# -- the documentation -----------------------------------------------------------------------


def test_docs_settings_shows_the_table_of_the_code() -> None:
    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert s.markdown_table() in text, (
        "docs/settings.md's table differs from harness/settings.py's VARIABLES: paste "
        "`python -c 'from harness.settings import markdown_table as t; print(t())'`"
    )


def test_every_settings_field_has_its_variable() -> None:
    fields = list(Settings.__dataclass_fields__)
    assert len(fields) == len(s.VARIABLES)
