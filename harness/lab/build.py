"""Obtain the lab's pinned binaries.

Sources, in order: explicit paths from the environment; the cache keyed on versions
(``~/.cache/powercut/bin/<group>-<version>``); a build through the Go module proxy; on
machines with internet, the official release downloads verified against pinned sha256 sums.
No sum is pinned yet (none could be obtained from an authoritative source where this was
written), so the download path refuses every group and says so: it never fetches a binary
it cannot verify.
``obtain()`` says which source it used for each group and shows progress while building.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.errors import PermanentError
from harness.lab import versions as v
from harness.settings import Settings, bin_variable, or_environment

Say = Callable[[str], None]


class BuildError(PermanentError):
    """No source could provide a binary; the message carries each source's reason."""


@dataclass(frozen=True)
class Group:
    name: str
    version: str
    binaries: tuple[str, ...]

    @property
    def cache_dir(self) -> Path:
        return v.bin_cache() / f"{self.name}-{self.version}"


GROUPS = (
    Group("kubernetes", v.KUBERNETES, v.KUBE_BINARIES),
    Group("etcd", v.ETCD, v.ETCD_BINARIES),
    Group("kwok", v.KWOK, v.KWOK_BINARIES),
)

# Official release artefacts. A download is used only with a pinned sha256 for this exact
# version and platform; none is pinned yet for the versions above, so the download source
# reports that and is skipped (the Go build is the supported path on these machines).
PINNED_SHA256: dict[str, str] = {}
RELEASE_URLS = {
    "kube-apiserver": "https://dl.k8s.io/release/{version}/bin/linux/{arch}/kube-apiserver",
    "kube-controller-manager": (
        "https://dl.k8s.io/release/{version}/bin/linux/{arch}/kube-controller-manager"
    ),
    "kube-scheduler": "https://dl.k8s.io/release/{version}/bin/linux/{arch}/kube-scheduler",
    "kubectl": "https://dl.k8s.io/release/{version}/bin/linux/{arch}/kubectl",
    "kwok": "https://github.com/kubernetes-sigs/kwok/releases/download/{version}/kwok-linux-{arch}",
}

#: How long each group's Go build takes on a cold machine of this project's kind (2 cores, Go
#: caches empty; README.md has the measured runs: the lab's three from the second cold `make
#: demo` of 2026-11-28, modules and compiling, with pip and npm installing beside them), in
#: seconds: said before a build starts and while it runs, as its estimate. A busy machine
#: takes longer.
COLD_BUILD_S: dict[str, int] = {
    "kubernetes": 400,
    "etcd": 45,
    "kwok": 100,
    "kubernetes-node": 360,
    "kind": 40,
    "containerd": 150,
    "crictl": 60,
    "coredns": 300,
    "local-path-provisioner": 90,
    "powercut-images": 10,
    "powercut-lb": 10,
    "helm": 240,
    "pcsi": 40,
    "csi-attacher": 90,
    "csi-provisioner": 240,
}


def estimate(name: str) -> str:
    """``name``'s cold build time as words (``cold on two cores: about 6 min``), or ""
    if unknown."""
    seconds = COLD_BUILD_S.get(name)
    if seconds is None:
        return ""
    took = f"{seconds // 60} min" if seconds >= 120 else f"{seconds} s"
    return f"cold on two cores: about {took}"


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of every lab binary, and where each group came from."""

    paths: dict[str, Path]
    sources: dict[str, str]

    def __getitem__(self, name: str) -> Path:
        return self.paths[name]


def _from_env(group: Group, settings: Settings) -> dict[str, Path] | None:
    """POWERCUT_BIN_<NAME> per binary, or POWERCUT_BIN_DIR holding them all
    (docs/settings.md)."""
    found: dict[str, Path] = {}
    bin_dir = settings.bin_dir
    for b in group.binaries:
        explicit = settings.bin(b)
        if explicit is not None:
            if not (explicit.is_file() and os.access(explicit, os.X_OK)):
                raise BuildError(f"{bin_variable(b)}={explicit}: not an executable file")
            found[b] = explicit.resolve()
        elif bin_dir and (bin_dir / b).is_file():
            found[b] = (bin_dir / b).resolve()
    if not found:
        return None
    missing = [b for b in group.binaries if b not in found]
    if missing:
        names = ", ".join(bin_variable(b) for b in missing)
        raise BuildError(f"{group.name}: some binaries come from the environment, not {names}")
    return found


def _from_cache(group: Group) -> dict[str, Path] | None:
    d = group.cache_dir
    if not (d / ".complete").is_file():
        return None
    paths = {b: d / b for b in group.binaries}
    if all(p.is_file() and os.access(p, os.X_OK) for p in paths.values()):
        return paths
    return None


@contextmanager
def _locked(group: Group, say: Say | None = None) -> Iterator[None]:
    """Hold ``group``'s build lock; if another process holds it (building that group),
    say so before waiting for it."""
    lock_dir = v.bin_cache()
    lock_dir.mkdir(parents=True, exist_ok=True)
    with (lock_dir / f".{group.name}-{group.version}.lock").open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if say is not None:
                say(f"{group.name} {group.version}: another process is building it; waiting")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _go() -> str:
    go = shutil.which("go")
    if not go:
        raise BuildError("the Go toolchain is not on PATH")
    return go


def _run_go(
    args: list[str], cwd: Path, env: dict[str, str], say: Say, what: str, hint: str = ""
) -> None:
    """Run a go command, showing it is alive: packages done and elapsed time (``hint``: what
    to expect, said with each line)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [_go(), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    count = 0
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(15):
            said = f"  {what}: {count} packages, {time.monotonic() - start:.0f}s elapsed"
            say(f"{said} ({hint})" if hint else said)

    t = threading.Thread(target=heartbeat, daemon=True)
    t.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        count += 1
        lines.append(line.rstrip())
        del lines[:-40]
    rc = proc.wait()
    done.set()
    if rc != 0:
        tail = "\n".join(lines[-20:])
        raise BuildError(f"{what} failed (go {' '.join(args[:2])}, exit {rc}):\n{tail}")
    say(f"  {what}: done in {time.monotonic() - start:.0f}s")


def go_caches(env: dict[str, str]) -> str:
    """Where the Go build and module caches are: the same two for every build here (the
    lab's, the kind node's, helm, the storage's), so each reuses what the others compiled
    and downloaded. GOCACHE and GOMODCACHE move them, as for any Go build."""
    out = subprocess.run(
        [_go(), "env", "GOCACHE", "GOMODCACHE"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2:
        return "Go caches: unknown (go env failed)"
    return f"Go caches: GOCACHE={lines[0]} GOMODCACHE={lines[1]}"


def _go_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CGO_ENABLED", "0")
    env["GOFLAGS"] = "-mod=mod"
    env["GOWORK"] = "off"
    env.pop("GOPATH_BUILD", None)
    return env


def _staging_modules(go_env: dict[str, str], workdir: Path) -> list[str]:
    """The staging modules that k8s.io/kubernetes replaces with ./staging, from its go.mod."""
    out = subprocess.run(
        [_go(), "mod", "download", "-json", f"k8s.io/kubernetes@{v.KUBERNETES}"],
        cwd=workdir,
        env=go_env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise BuildError(
            f"go mod download k8s.io/kubernetes@{v.KUBERNETES}: {out.stdout}{out.stderr}"
        )
    gomod = Path(json.loads(out.stdout)["GoMod"]).read_text()
    staging: list[str] = []
    others: list[str] = []
    for line in gomod.splitlines():
        m = re.match(r"\s*(\S+)\s*=>\s*(\S+)", line)
        if m and not line.strip().startswith("//"):
            (staging if m.group(2).startswith("./staging/") else others).append(m.group(1))
    if others:
        raise BuildError(f"k8s.io/kubernetes go.mod has replace lines outside staging: {others}")
    if not staging:
        raise BuildError("found no ./staging replace lines in k8s.io/kubernetes go.mod")
    return staging


def _ldflags_kube() -> str:
    ver = v.KUBERNETES
    major, minor = ver.lstrip("v").split(".")[:2]
    pairs = {
        "k8s.io/component-base/version.gitVersion": ver,
        "k8s.io/component-base/version.gitMajor": major,
        "k8s.io/component-base/version.gitMinor": minor,
        "k8s.io/component-base/version.gitTreeState": "clean",
        "k8s.io/client-go/pkg/version.gitVersion": ver,
    }
    return "-s -w " + " ".join(f"-X {k}={val}" for k, val in pairs.items())


def _write_module(
    workdir: Path, module: str, requires: list[str], replaces: list[str], imports: list[str]
) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    lines = [f"module {module}", "", "go 1.26.0", ""]
    lines += [f"require {r}" for r in requires]
    if replaces:
        lines += ["", "replace ("] + [f"\t{r}" for r in replaces] + [")"]
    (workdir / "go.mod").write_text("\n".join(lines) + "\n")
    body = "\n".join(f'\t_ "{i}"' for i in imports)
    (workdir / "tools.go").write_text(f"//go:build tools\n\npackage tools\n\nimport (\n{body}\n)\n")


def _build_group(group: Group, say: Say) -> dict[str, Path]:
    work = v.cache_root() / "build" / f"{group.name}-{group.version}"
    env = _go_env(work)
    out = Path(tempfile.mkdtemp(prefix=f"{group.name}-", dir=v.bin_cache()))
    try:
        if group.name.startswith("kubernetes"):  # the lab's group and kindlab's node group
            work.mkdir(parents=True, exist_ok=True)
            staging = _staging_modules(env, work)
            pkgs = [f"k8s.io/kubernetes/cmd/{b}" for b in group.binaries]
            _write_module(
                work,
                "powercut.local/kubebuild",
                [f"k8s.io/kubernetes {v.KUBERNETES}"],
                [f"{m} => {m} {v.KUBE_STAGING}" for m in staging],
                pkgs,
            )
            ldflags, tags = _ldflags_kube(), "selinux,notest,grpcnotrace"
        elif group.name == "etcd":
            pkgs = ["go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/etcdctl/v3"]
            _write_module(
                work,
                "powercut.local/etcdbuild",
                [f"go.etcd.io/etcd/server/v3 {v.ETCD}", f"go.etcd.io/etcd/etcdctl/v3 {v.ETCD}"],
                [],
                pkgs,
            )
            ldflags, tags = "-s -w", ""
        else:
            pkgs = [f"sigs.k8s.io/kwok/cmd/{b}" for b in group.binaries]
            _write_module(
                work, "powercut.local/kwokbuild", [f"sigs.k8s.io/kwok {v.KWOK}"], [], pkgs
            )
            ldflags, tags = "-s -w", ""
        say(f"  {go_caches(env)}")
        _run_go(["mod", "tidy", "-e"], work, env, say, f"{group.name}: resolving modules")
        args = ["build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(out) + "/"]
        if tags:
            args += ["-tags", tags]
        compiling = f"{group.name}: compiling"
        _run_go([*args, *pkgs], work, env, say, compiling, estimate(group.name))
        # go build names each binary after its package's last path element.
        produced = {p.name: p for p in out.iterdir()}
        result: dict[str, Path] = {}
        for b, pkg in zip(group.binaries, pkgs, strict=True):
            base = pkg.rstrip("/").split("/")[-1]
            if base == "v3":
                base = pkg.split("/")[
                    -2
                ]  # go names .../server/v3 "server", .../etcdctl/v3 "etcdctl"
            src = produced.get(base) or produced.get(b)
            if src is None:
                raise BuildError(f"{group.name}: go build produced {sorted(produced)}, not {b}")
            result[b] = src
        dest = group.cache_dir
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for b, src in result.items():
            shutil.move(str(src), dest / b)
        (dest / ".complete").write_text(json.dumps({"version": group.version, "source": "go"}))
        return {b: dest / b for b in group.binaries}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _download_group(group: Group, say: Say) -> dict[str, Path]:
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    missing = [b for b in group.binaries if f"{b}-{group.version}-{arch}" not in PINNED_SHA256]
    if missing or group.name == "etcd":
        raise BuildError(
            f"no pinned sha256 for {group.name} {group.version} ({arch}); downloads are only "
            "used when verified against a pinned sum"
        )
    dest = group.cache_dir
    dest.mkdir(parents=True, exist_ok=True)
    for b in group.binaries:
        url = RELEASE_URLS[b].format(version=group.version, arch=arch)
        say(f"  downloading {url}")
        with urllib.request.urlopen(url, timeout=120) as resp:  # noqa: S310 (fixed https URL)
            data = resp.read()
        digest = hashlib.sha256(data).hexdigest()
        want = PINNED_SHA256[f"{b}-{group.version}-{arch}"]
        if digest != want:
            raise BuildError(f"{url}: sha256 {digest} does not match the pinned {want}")
        (dest / b).write_bytes(data)
        (dest / b).chmod(0o755)
    (dest / ".complete").write_text(json.dumps({"version": group.version, "source": "download"}))
    return {b: dest / b for b in group.binaries}


def obtain(
    say: Say | None = None,
    *,
    allow_build: bool = True,
    groups: tuple[Group, ...] = GROUPS,
    settings: Settings | None = None,
) -> Binaries:
    """Return every binary of ``groups`` (the lab's by default), obtaining missing ones;
    says which source served each group. ``settings`` name ready binaries
    (POWERCUT_BIN_*; read from the environment now when not passed)."""
    say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
    settings = or_environment(settings)
    paths: dict[str, Path] = {}
    sources: dict[str, str] = {}
    for group in groups:
        found = _from_env(group, settings)
        source = "environment"
        if found is None:
            found = _from_cache(group)
            source = f"cache {group.cache_dir}"
        if found is None and allow_build:
            with _locked(group, say):
                found = _from_cache(group)  # another process may have just built it
                if found is None:
                    reasons = []
                    for label, fn in (("go build", _build_group), ("download", _download_group)):
                        hint = estimate(group.name) if label == "go build" else ""
                        say(
                            f"{group.name} {group.version}: trying {label}"
                            + (f" ({hint}; longer on a busy machine)" if hint else "")
                        )
                        try:
                            found = fn(group, say)
                            source = f"{label} -> {group.cache_dir}"
                            break
                        except BuildError as exc:
                            reasons.append(f"{label}: {exc}")
                    if found is None:
                        raise BuildError(
                            f"cannot obtain {group.name} {group.version}:\n" + "\n".join(reasons)
                        )
        if found is None:
            raise BuildError(f"{group.name} {group.version} is not built; run: powercut lab build")
        paths.update(found)
        sources[group.name] = source
    return Binaries(paths, sources)
