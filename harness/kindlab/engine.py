"""The Docker engine kind runs on: installed from Debian, started when none answers, and the
privileged-container adaptation only where privileged containers fail.

On these machines the capability bounding set lacks CAP_SYS_RESOURCE, and ``--privileged``
asks runc for every capability: ``runc create failed: unable to apply caps: operation not
permitted``. Where (and only where) a privileged test container fails with exactly that,
an OCI runtime wrapper that drops CAP_SYS_RESOURCE is registered as the engine's default
runtime (``/etc/docker/daemon.json``) and the engine we started is restarted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from harness.clock import SYSTEM_CLOCK
from harness.errors import PermanentError
from harness.lab.build import Say

WRAPPER_SRC = Path(__file__).parent / "data" / "runc-wrapper.py"
WRAPPER = Path("/usr/local/libexec/powercut/runc-nosysresource")
RUNTIME_NAME = "powercut-runc"
DAEMON_JSON = Path("/etc/docker/daemon.json")
CAPS_ERROR = "unable to apply caps"


class EngineError(PermanentError):
    """The Docker engine cannot be installed, started or used; says what refused."""


@dataclass(frozen=True)
class Engine:
    docker: str
    started_pid: int | None  # the dockerd this harness started (state dir records it), if any
    wrapper_installed: bool


def docker_cli() -> str:
    for cand in ("/usr/bin/docker", shutil.which("docker")):
        if cand and Path(cand).is_file():
            return cand
    raise EngineError("no docker CLI: apt-get install docker.io")


def run(args: list[str], *, timeout: float = 120, input_: str | None = None) -> str:
    """Run a docker command; return stdout; raise with docker's own message on failure."""
    try:
        out = subprocess.run(
            [docker_cli(), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise EngineError(f"docker {' '.join(args[:3])}: no answer in {timeout:.0f}s") from exc
    if out.returncode != 0:
        raise EngineError(
            f"docker {' '.join(args[:3])} failed (exit {out.returncode}): "
            f"{(out.stderr or out.stdout).strip()[-2000:]}"
        )
    return out.stdout


def answers() -> bool:
    try:
        run(["info", "--format", "{{.ServerVersion}}"], timeout=20)
    except EngineError:
        return False
    return True


def _install_packages(say: Say) -> None:
    missing = [p for p, b in (("docker.io", "/usr/sbin/dockerd"),) if not Path(b).exists()]
    if not missing:
        return
    say(f"installing Debian packages: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise EngineError(f"{' '.join(cmd)} failed: {r.stderr.strip()[-1000:]}")


def _start_dockerd(state_dir: Path, say: Say) -> int:
    log = state_dir / "dockerd.log"
    say(f"starting dockerd (log {log})")
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            ["/usr/sbin/dockerd"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (state_dir / "dockerd.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineError(f"dockerd exited with {proc.returncode}; see {log}")
        if answers():
            return proc.pid
        SYSTEM_CLOCK.sleep(0.5)
    raise EngineError(f"dockerd started (pid {proc.pid}) but did not answer in 60s; see {log}")


def stop_dockerd(state_dir: Path) -> bool:
    """Stop the dockerd recorded in the state dir (ours), by its pid; True if one stopped."""
    pid_file = state_dir / "dockerd.pid"
    if not pid_file.is_file():
        return False
    pid = int(pid_file.read_text())
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        pid_file.unlink()
        return False
    if b"dockerd" not in cmdline:
        pid_file.unlink()
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        SYSTEM_CLOCK.sleep(0.2)
    pid_file.unlink()
    return True


def privileged_fails_on_caps(image: str) -> bool:
    """True when a privileged container fails exactly as on a bounding set without
    CAP_SYS_RESOURCE; False when it runs. Any other failure is raised."""
    try:
        run(["run", "--rm", "--privileged", "--entrypoint", "/bin/true", image], timeout=60)
    except EngineError as exc:
        if CAPS_ERROR in str(exc):
            return True
        raise
    return False


def _install_wrapper(say: Say) -> None:
    WRAPPER.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(WRAPPER_SRC, WRAPPER)
    WRAPPER.chmod(0o755)
    conf: dict[str, object] = {}
    if DAEMON_JSON.is_file():
        conf = json.loads(DAEMON_JSON.read_text() or "{}")
    runtimes = dict(conf.get("runtimes") or {})  # type: ignore[call-overload]
    runtimes[RUNTIME_NAME] = {"path": str(WRAPPER)}
    conf["runtimes"] = runtimes
    conf["default-runtime"] = RUNTIME_NAME
    DAEMON_JSON.parent.mkdir(parents=True, exist_ok=True)
    DAEMON_JSON.write_text(json.dumps(conf, indent=2) + "\n")
    say(
        "privileged containers fail here (the capability bounding set lacks CAP_SYS_RESOURCE): "
        f"registered {WRAPPER} as docker's default runtime ({DAEMON_JSON})"
    )


def wrapper_active() -> bool:
    try:
        return run(["info", "--format", "{{.DefaultRuntime}}"], timeout=20).strip() == RUNTIME_NAME
    except EngineError:
        return False


def ensure(state_dir: Path, probe_image: str | None, say: Say) -> Engine:
    """A Docker engine that answers and runs privileged containers."""
    state_dir.mkdir(parents=True, exist_ok=True)
    _install_packages(say)
    started: int | None = None
    if not answers():
        started = _start_dockerd(state_dir, say)
    installed = wrapper_active()
    if probe_image and not installed and privileged_fails_on_caps(probe_image):
        if started is None and not (state_dir / "dockerd.pid").is_file():
            raise EngineError(
                "privileged containers fail (unable to apply caps: the capability bounding set "
                "lacks CAP_SYS_RESOURCE) and the running dockerd was not started by powercut: "
                f"register {WRAPPER_SRC} as its default runtime and restart it"
            )
        _install_wrapper(say)
        stop_dockerd(state_dir)
        started = _start_dockerd(state_dir, say)
        installed = True
        if privileged_fails_on_caps(probe_image):
            raise EngineError("privileged containers still fail with the runtime wrapper")
    return Engine(docker_cli(), started, installed)


def import_into_containerd(container: str, images: list[str], *flags: str) -> None:
    """``docker save IMAGES | ctr import`` into the k8s.io namespace of the containerd that
    runs in ``container`` (a kind node, or the node image being built); ``flags`` are
    ctr import's own (``--no-unpack``, ``--label=...``). Raises EngineError with ctr's words."""
    docker = docker_cli()
    save = subprocess.Popen([docker, "save", *images], stdout=subprocess.PIPE)
    imp = subprocess.run(
        [docker, "exec", "-i", container, "ctr", "--namespace=k8s.io", "images", "import",
         *flags, "--all-platforms", "--digests", "-"],
        stdin=save.stdout,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert save.stdout is not None
    save.stdout.close()
    if save.wait() != 0 or imp.returncode != 0:
        raise EngineError(
            f"importing {', '.join(images)} into {container}'s containerd: "
            f"{imp.stderr.strip()[-1500:]}"
        )
