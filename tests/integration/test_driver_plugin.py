"""A third-party power driver, installed into a virtualenv of its own outside the
repository, used from an inventory: examples/powercut-driver-example (driver
``example-pdu``) against a small JSON-over-HTTP PDU served here on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "powercut-driver-example"
PASSWORD = "pdu-secret-7f3a"


class Pdu:
    """Outlets that switch at once; basic auth ``powercut`` / PASSWORD."""

    def __init__(self) -> None:
        self.outlets = {3: "on"}
        token = base64.b64encode(f"powercut:{PASSWORD}".encode()).decode()
        pdu = self

        class Handler(BaseHTTPRequestHandler):
            def _outlet(self) -> int | None:
                if self.headers.get("Authorization") != f"Basic {token}":
                    self.send_error(401)
                    return None
                n = int(self.path.rsplit("/", 1)[-1])
                if n not in pdu.outlets:
                    self.send_error(404)
                    return None
                return n

            def _answer(self, n: int) -> None:
                body = json.dumps({"state": pdu.outlets[n]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                n = self._outlet()
                if n is not None:
                    self._answer(n)

            def do_POST(self) -> None:
                n = self._outlet()
                if n is not None:
                    length = int(self.headers.get("Content-Length", 0))
                    pdu.outlets[n] = json.loads(self.rfile.read(length))["state"]
                    self._answer(n)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def pdu() -> Iterator[Pdu]:
    server = Pdu()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv outside the repository that sees powercut (this checkout's
    environment, through a site directory) and has the example driver *installed* (a
    built wheel, not the source tree)."""
    root = tmp_path_factory.mktemp("driver-venv") / "venv"
    assert not root.resolve().is_relative_to(ROOT)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(site, "powercut-env.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    # Built from a copy: setuptools writes build/ and *.egg-info next to the sources.
    source = root.parent / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(source),
        ],
        check=True,
        cwd=root.parent,
    )
    return python


def inventory(tmp_path: Path, pdu_url: str, extra: str = "{outlet: 3, poll_s: 0.05}") -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(
        f"""\
cluster: {{kubeconfig: kubeconfig}}
nodes:
  - name: w1
    role: worker
    power:
      driver: example-pdu
      endpoint: {pdu_url}
      username: powercut
      password_env: PDU_PASSWORD
      extra: {extra}
"""
    )
    return path


def run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PDU_PASSWORD": PASSWORD}
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_the_installed_driver_is_listed_checked_and_drives_the_outlet(
    venv: Path, pdu: Pdu, tmp_path: Path
) -> None:
    inv = inventory(tmp_path, pdu.url)
    status = run(venv, "-m", "harness.cli", "power", "status", "w1", "-i", str(inv), cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert status.stdout.split() == ["w1", "example-pdu", "on"]
    script = f"""
from harness.inventory import load_inventory
from harness.power.factory import driver_for
node = load_inventory({str(inv)!r}).node("w1")
driver = driver_for(node)
print(type(driver).__name__, node.power.options)
driver.off(); print(driver.state().value)
driver.on(); print(driver.state().value)
"""
    switched = run(venv, "-c", script, cwd=tmp_path)
    assert switched.returncode == 0, switched.stderr
    lines = switched.stdout.splitlines()
    assert lines[0] == "PduDriver outlet=3 timeout_s=30.0 poll_s=0.05 settle_s=1.0"
    assert lines[1:] == ["off", "on"]
    assert pdu.outlets[3] == "on"
    assert PASSWORD not in status.stdout + status.stderr + switched.stdout + switched.stderr


def test_its_options_model_checks_the_inventory_naming_file_field_and_valid_keys(
    venv: Path, pdu: Pdu, tmp_path: Path
) -> None:
    inv = inventory(tmp_path, pdu.url, extra="{outlet: 3, setle_s: 2}")
    result = run(venv, "-m", "harness.cli", "power", "status", "w1", "-i", str(inv), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr  # one line
    assert f"{inv}:nodes[0].power.extra.setle_s: unknown option 'setle_s'" in result.stderr
    assert "(did you mean 'settle_s'?); valid keys: outlet, timeout_s, poll_s, settle_s" in (
        result.stderr
    )
    inv = inventory(tmp_path, pdu.url, extra="{poll_s: 1}")
    result = run(venv, "-m", "harness.cli", "power", "status", "w1", "-i", str(inv), cwd=tmp_path)
    assert "nodes[0].power.extra.outlet: is required by driver example-pdu" in result.stderr


def test_without_the_package_the_inventory_lists_the_installed_drivers(
    pdu: Pdu, tmp_path: Path
) -> None:
    """This checkout's own environment does not have the example installed."""
    inv = inventory(tmp_path, pdu.url)
    result = run(
        Path(sys.executable),
        "-m",
        "harness.cli",
        "power",
        "status",
        "w1",
        "-i",
        str(inv),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert (
        "nodes[0].power.driver: 'example-pdu' is not an installed power driver; installed: "
        "ipmi, kind, redfish, ssh (node 'w1', line 6)" in result.stderr
    )
