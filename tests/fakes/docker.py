"""A fake ``docker`` CLI for unit tests: an executable Python script written to a temp dir.

Container states live in a JSON file (``FAKE_DOCKER_STATE``); every invocation is logged
there. It answers ``inspect --format '{{.State.Status}} {{.State.Paused}}'``, ``start``,
``stop``, ``kill``, ``pause``, ``unpause`` and the kind driver's ``exec`` scripts (named by
their first line: partition, heal, partition-state, stop-kubelet, start-kubelet,
kubelet-state, poweroff; a container records ``cut`` and ``kubelet``) with the docker CLI's texts,
including its errors. Knobs: ``lag`` (a change shows after that many more inspects),
``never_applies``, ``poweroff_ignored``, ``busy`` (the next N changes answer "is
restarting"), ``down`` (the engine is unreachable) and ``hang_s``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FAKE_DOCKER = textwrap.dedent(
    """\
    #!{python}
    # A fake docker CLI: states in $FAKE_DOCKER_STATE (JSON), every call logged there.
    # Calls run in parallel (a power-on of several nodes): each one holds the state's lock
    # from read to write, and writes by rename, so none sees half a file or loses an update.
    import fcntl, json, os, sys, time
    path = os.environ["FAKE_DOCKER_STATE"]
    with open(path) as f:
        hang_s = json.load(f).get("hang_s")
    if hang_s:
        time.sleep(hang_s)  # outside the lock: hung calls hang side by side
    lock = open(path + ".lock", "a")
    fcntl.flock(lock, fcntl.LOCK_EX)  # released when this process exits
    with open(path) as f:
        st = json.load(f)
    args = sys.argv[1:]
    st["log"].append(args)

    def done(code=0, out="", err=""):
        with open(path + ".tmp", "w") as f:
            json.dump(st, f)
        os.replace(path + ".tmp", path)
        sys.stdout.write(out)
        sys.stderr.write(err)
        sys.exit(code)

    if st.get("down"):
        done(1, err="Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
             "Is the docker daemon running?\\n")
    verb, name = args[0], (args[1] if args[0] == "exec" else args[-1])
    c = st["containers"].get(name)
    if c is None:
        what = "object" if verb == "inspect" else "container"
        done(1, err=f"Error response from daemon: No such {{what}}: {{name}}\\n")
    if verb == "inspect":
        # A change takes effect once `lag` more inspects have seen the old state.
        if c.get("pending") is not None:
            if c.get("lag", 0) > 0:
                c["lag"] -= 1
            else:
                c["status"], c["paused"] = c.pop("pending")
        done(0, out=f"{{c['status']}} {{str(c['paused']).lower()}}\\n")
    if st.get("busy", 0) > 0:
        st["busy"] -= 1
        done(1, err=f"Error response from daemon: Container {{name}} is restarting, "
             "wait until the container is running\\n")

    def change(status, paused):
        if st.get("never_applies"):
            return
        c["pending"] = [status, paused]
        c["lag"] = st.get("lag", 0)

    if verb == "exec":
        if c["status"] != "running" or c["paused"]:
            done(1, err=f"Error response from daemon: Container {{name}} is not running\\n")
        op = args[5]
        c.setdefault("execs", []).append([op, *args[6:]])
        if op == "partition":
            c["cut"] = True
        elif op == "heal":
            c["cut"] = False
        elif op == "partition-state":
            done(0, out="cut\\n" if c.get("cut") else "open\\n")
        elif op == "stop-kubelet":
            c["kubelet"] = False
        elif op == "start-kubelet":
            c["kubelet"] = True
        elif op == "poweroff":
            if not st.get("poweroff_ignored"):
                change("exited", False)
        elif op == "kubelet-state":
            done(0, out="active\\n" if c.get("kubelet", True) else "inactive\\n")
        done(0)

    if verb == "kill":
        if c["status"] != "running":
            done(1, err=f"Error response from daemon: cannot kill container: {{name}}: "
                 "container is not running\\n")
        change("exited", False)
    elif verb == "stop":
        change("exited", False)
    elif verb == "start":
        change("running", False)
        c["cut"], c["kubelet"] = False, True  # a new network namespace; systemd starts it
    elif verb == "update":
        c["restart"] = args[2]
    elif verb == "pause":
        if c["status"] != "running" or c["paused"]:
            done(1, err=f"Error response from daemon: container {{name}} is not running\\n")
        change("paused", True)
    elif verb == "unpause":
        if not c["paused"]:
            done(1, err=f"Error response from daemon: container {{name}} is not paused\\n")
        change("running", False)
    else:
        done(1, err=f"unknown verb {{verb}}\\n")
    done(0, out=name + "\\n")
    """
)


class Docker:
    """The fake docker's state file, seen from the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.exe = self.bin / "docker"
        self.exe.write_text(FAKE_DOCKER.format(python=sys.executable))
        self.exe.chmod(self.exe.stat().st_mode | stat.S_IXUSR)
        self.state_file = tmp_path / "docker-state.json"
        self.write({"containers": {}, "log": []})

    def read(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.state_file.read_text())
        return data

    def write(self, data: dict[str, Any]) -> None:
        tmp = self.state_file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.state_file)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """Read-modify-write under the lock the fake's calls take too."""
        with open(f"{self.state_file}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self.read()
            yield data
            self.write(data)

    def set(self, **settings: Any) -> None:
        with self._locked() as data:
            data.update(settings)

    def container(self, name: str, status: str = "running", paused: bool = False) -> None:
        with self._locked() as data:
            data["containers"][name] = {"status": status, "paused": paused}

    def status(self, name: str) -> tuple[str, bool]:
        c = self.read()["containers"][name]
        if c.get("pending") is not None:
            return c["pending"][0], c["pending"][1]
        return c["status"], c["paused"]

    def verbs(self) -> list[str]:
        """Each call as "VERB ARGS" (the container left out); an exec as "exec OP ARGS"."""
        return [
            " ".join(["exec", *a[5:]]) if a[0] == "exec" else " ".join(a[:-1])
            for a in self.read()["log"]
        ]

    def cut(self, name: str) -> bool:
        """Whether the container is partitioned (the kind driver's exec scripts)."""
        return bool(self.read()["containers"][name].get("cut"))

    def kubelet(self, name: str) -> bool:
        return bool(self.read()["containers"][name].get("kubelet", True))

    def clear_log(self) -> None:
        self.set(log=[])


def install(tmp_path: Path, env: Any) -> Docker:
    """Write the fake into ``tmp_path/bin``, put it first on PATH (``env``: a
    ``pytest.MonkeyPatch``) and point it at its state file."""
    d = Docker(tmp_path)
    env.setenv("FAKE_DOCKER_STATE", str(d.state_file))
    env.setenv("PATH", f"{d.bin}{os.pathsep}{os.environ['PATH']}")
    return d
