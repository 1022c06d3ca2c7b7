"""docs/management.md's "From nothing to the first nightly run" block, run as written: the
fenced ``sh`` block is taken from the page by its heading and its ten numbered commands run
with bash in the checkout, on the management cluster and lab of tests/mgmt/conftest.py.

What the reader brings, the test brings as a reader would: the variables the page names
(``MGMT``, ``NS``, ``ONLY``, ``PORT``, ``RACK``, ``BMC_PASSWORD``), kubectl's current context
(``KUBECONFIG``: the kind cluster's), kubectl and helm on ``PATH``, and in ``$RACK`` (a
directory outside the checkout) the lab's inventory as the runner's pods see it, a
kubeconfig of an identity bound to the target role (a token of the runner's ServiceAccount
for the lab's audience: the lab's lock admission policy admits that identity alone) and the
files the inventory names. The release goes in a namespace of its own (``NS``; the other
mgmt tests use ``powercut``), and is uninstalled with that namespace at the end, so the
other tests see the cluster as they left it whatever the order."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.mgmt.conftest import (
    AUDIENCE,
    NAME,
    ROOT,
    SCENARIO,
    Mgmt,
    mgmt_token,
    pod_files,
    run,
    wait_for,
)
from tests.role_bound import token_kubeconfig

pytestmark = [pytest.mark.mgmt, pytest.mark.disruptive, pytest.mark.timeout(3600)]
HEADING = "## From nothing to the first nightly run: 10 commands"
NS = "powercut-path"
TARGET = "rack-a"  # the block's
#: the page's local port for command 10: between the test's Prometheus (the mgmt port + 100)
#: and the lab's thousand ports (from the mgmt port + 200 by default)
PORT = int(os.environ.get("POWERCUT_TEST_MGMT_PORT", "27000")) + 150
BLOCK_TIMEOUT = 2400
_NUMBERED = re.compile(r"\s#\s+(\d+)\b[^\n]*$")


def documented_block(text: str, heading: str = HEADING) -> str:
    """The first fenced ``sh`` block after ``heading`` (a line of its own)."""
    lines = text.splitlines()
    at = lines.index(heading)
    start = next(i for i in range(at + 1, len(lines)) if lines[i].strip() == "```sh")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
    assert not any(ln.startswith("## ") for ln in lines[at + 1 : start]), "block under another"
    return "\n".join(lines[start + 1 : end]) + "\n"


def numbered_commands(block: str) -> list[tuple[int, str]]:
    """The block's commands (continuation lines joined, text kept as written), each with the
    number its trailing comment gives it."""
    out: list[tuple[int, str]] = []
    current: list[str] = []
    for line in block.splitlines():
        current.append(line)
        if line.endswith("\\"):
            continue
        cmd = "\n".join(current)
        current = []
        if not cmd.strip():
            continue
        m = _NUMBERED.search(cmd)
        assert m, f"a command without its number: {cmd!r}"
        out.append((int(m.group(1)), cmd))
    assert not current, "the block ends in a continuation line"
    return out


def test_the_block_is_ten_numbered_commands() -> None:
    block = documented_block((ROOT / "docs" / "management.md").read_text())
    numbers = [n for n, _ in numbered_commands(block)]
    assert numbers == list(range(1, 11)), numbers


def script(commands: list[tuple[int, str]], pid_file: Path, pf_log: Path) -> str:
    """Commands 1-9 in order, each as written (set -e: the first failure ends the script);
    command 10 in the background, its PID in ``pid_file``, then wait for it."""
    *first, (last_n, last) = commands
    assert last_n == 10 and "port-forward" in last, last
    parts = ["set -eo pipefail"]
    for n, cmd in first:
        parts += [f'echo "== command {n} at $(date -u +%T)" >&2', cmd]
    parts += [
        'echo "== command 10 at $(date -u +%T)" >&2',
        "{\n" + last + f"\n}} >{pf_log} 2>&1 &",
        f"echo $! > {pid_file}",
        "wait $!",
    ]
    return "\n".join(parts) + "\n"


def reader_inputs(m: Mgmt, work: Path) -> dict[str, str]:
    """``$RACK`` as a reader fills it (rack-a.yaml, rack-a.kubeconfig, files/) and the
    environment the block reads."""
    rack = work / "rack-a"
    rack.mkdir()
    token = mgmt_token(m.kind_client, AUDIENCE, 7200)
    kc = token_kubeconfig(m.lab_dir / "kubeconfig", "rack-a", token, work / "token.kubeconfig")
    inv, files = pod_files(m.lab_inventory, m.gateway, work, kubeconfig=kc)

    def by_env(v: Any) -> Any:  # the BMC password from $BMC_PASSWORD, as the page says
        if isinstance(v, dict):
            if "password_file" in v:
                v = {k: x for k, x in v.items() if k != "password_file"}
                v["password_env"] = "BMC_PASSWORD"
            return {k: by_env(x) for k, x in v.items()}
        if isinstance(v, list):
            return [by_env(x) for x in v]
        return v

    inv = by_env(inv)
    password = (files / "bmc-password").read_text().strip()
    (files / "bmc-password").unlink()
    (files / "kubeconfig").rename(rack / "rack-a.kubeconfig")
    files.rename(rack / "files")
    (rack / "rack-a.yaml").write_text(yaml.safe_dump(inv, sort_keys=False))
    assert sorted(p.name for p in (rack / "files").iterdir()), "the inventory names no files"
    bindir = work / "bin"
    bindir.mkdir()
    (bindir / "kubectl").symlink_to(m.kubectl)
    (bindir / "helm").symlink_to(m.helm)
    return {
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "KUBECONFIG": str(m.kubeconfig),
        "MGMT": NAME,  # the kind cluster's name
        "NS": NS,
        "ONLY": SCENARIO,
        "PORT": str(PORT),
        "RACK": str(rack),
        "BMC_PASSWORD": password,
    }


class PowerWatch:
    """Every lab node seen off (the lab's power state) while the block runs."""

    def __init__(self, m: Mgmt) -> None:
        self.m, self.off, self._stop = m, set[str](), threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            try:
                power = self.m.lab_state().get("power", {})
            except (OSError, ValueError):
                continue  # the lab rewriting its state file
            self.off |= {n for n, s in power.items() if s != "on"}

    def __enter__(self) -> PowerWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _k(m: Mgmt, *args: str, check: bool = True, timeout: float = 120) -> str:
    return run([m.kubectl, "--kubeconfig", str(m.kubeconfig), "-n", NS, *args],
               timeout=timeout, check=check).stdout  # fmt: skip


def _clean_up(m: Mgmt) -> None:
    run([m.helm, "uninstall", "powercut", "-n", NS, "--kubeconfig", str(m.kubeconfig),
         "--wait", "--timeout", "300s"], check=False, timeout=330)  # fmt: skip
    run([m.kubectl, "--kubeconfig", str(m.kubeconfig), "delete", "namespace", NS,
         "--ignore-not-found", "--timeout=300s"], check=False, timeout=330)  # fmt: skip


def _fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 (the port-forward)
            return str(r.read().decode())
    except OSError:
        return None


def _stop_port_forward(pid: int) -> None:
    """SIGTERM the port-forward: ``pid`` itself when bash exec'd it, else its kubectl child."""
    kids = run(["pgrep", "-P", str(pid)], check=False).stdout.split()
    for p in [pid, *map(int, kids)]:
        if "kubectl" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace"):
            os.kill(p, signal.SIGTERM)
            return
    raise AssertionError(f"no kubectl port-forward at PID {pid} or its children {kids}")


def test_the_documented_path_runs_as_written(mgmt: Mgmt, tmp_path_factory: Any) -> None:
    m = mgmt
    _clean_up(m)  # a namespace a killed earlier run left
    assert m.lab_clean() == []
    assert _fetch(f"http://127.0.0.1:{PORT}/") is None, f"port {PORT} already answers"
    work = tmp_path_factory.mktemp("reader")
    assert not work.resolve().is_relative_to(ROOT)
    env = {**os.environ, **reader_inputs(m, work)}
    commands = numbered_commands(documented_block((ROOT / "docs" / "management.md").read_text()))
    pid_file, pf_log = work / "port-forward.pid", work / "port-forward.log"
    (work / "block.sh").write_text(script(commands, pid_file, pf_log))
    t0 = time.monotonic()
    bash = subprocess.Popen(["bash", str(work / "block.sh")], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(bash.stdout or []), daemon=True)
    reader.start()
    try:
        with PowerWatch(m) as watch:
            wait_for("commands 1-9 to pass and command 10 to start",
                     lambda: pid_file.exists() or bash.poll() is not None,
                     BLOCK_TIMEOUT, every_s=2)  # fmt: skip
        m.timings["documented path, commands 1-9"] = time.monotonic() - t0
        assert bash.poll() is None and pid_file.exists(), "".join(out)[-6000:]
        # command 9 saw the Job complete: the run did what a night does
        job = json.loads(_k(m, "get", "job", "first", "-o", "json"))
        assert (job.get("status") or {}).get("succeeded") == 1, job.get("status")
        assert watch.off, "no lab node was powered off while the documented run ran"
        assert m.lab_clean() == [], "the run left the lab disrupted"
        store = _k(m, "exec", "deploy/powercut-page", "--", "cat",
                   f"/store/{TARGET}/history.jsonl")  # fmt: skip
        (record,) = [json.loads(ln) for ln in store.splitlines() if ln.strip()]
        assert record["target"] == TARGET and record["verdict"] == "passed", record
        assert [s["name"] for s in record["scenarios"]], record
        listing = _k(m, "exec", "deploy/powercut-page", "--", "ls",
                     f"/store/{TARGET}/runs/{record['run_id']}")  # fmt: skip
        assert "report.html" in listing or "index.html" in listing, listing
        # command 10: the page through the port-forward lists the run with its verdict
        page = wait_for("the page through the port-forward",
                        lambda: _fetch(f"http://127.0.0.1:{PORT}/"), 60, every_s=1)  # fmt: skip
        assert str(record["run_id"]) in page and "passed" in page, page[-3000:]
        _stop_port_forward(int(pid_file.read_text()))
        bash.wait(timeout=60)
        assert _fetch(f"http://127.0.0.1:{PORT}/") is None, "the port-forward still answers"
        print(f"documented path: {m.timings['documented path, commands 1-9']:.0f} s to the "
              f"first run's end; nodes seen off: {sorted(watch.off)}")  # fmt: skip
    finally:
        if bash.poll() is None:
            os.killpg(bash.pid, signal.SIGTERM)
            bash.wait(timeout=60)
        reader.join(timeout=10)
        print("".join(out)[-4000:])
        _clean_up(m)
