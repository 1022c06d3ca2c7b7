"""The runner image (``powercut image build``), built with no registry the way the kind node
image is (``images.py``):

1. A Debian root filesystem from ``debootstrap`` with Python, ipmitool, an SSH client and
   tini (``images.rootfs_tar``: a tarball in the kind cache keyed on suite and packages),
   imported as ``powercut.local/runner-base:<suite>``.
2. The powercut wheel, built from this checkout (the files git tracks or would track, copied
   aside as ``make wheel-test`` does), and the wheels of its dependencies from the wheelhouse
   (``~/.cache/powercut/wheelhouse/<key>``, keyed on the Python version and
   ``requirements/lock.txt``, shared with ``make wheel-test``).
3. ``docker build``: a build stage installs the wheel into ``/opt/powercut/venv`` from the
   wheelhouse with the lock file as constraints (so exactly the locked versions of what the
   wheel needs, nothing of the development tools); the final stage copies the venv onto the
   base with Node.js (this machine's, >= 20) and Allure Report 3 (``make report-tools``'s
   cache) for the HTML report, adds the non-root user 10001 and the volumes' mount
   points. Tagged
   ``powercut.local/powercut:<version>-<key>``, the key a digest of everything that went in
   (sources, lock file, base, Node.js and Allure, this Dockerfile), and labelled with it, so
   that a warm build reuses it and a rebuilt one never hides behind an old tag.

The image runs with a read-only root filesystem: everything it writes goes to ``/tmp``
(an emptyDir: HOME, matplotlib's cache) and ``/var/lib/powercut`` (the state volume:
journal, runs, results store). ``load_into_kind`` imports it into every node of a kind
cluster (``docker save | ctr import``, as the node image's build imports its images).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import __version__
from harness.kindlab import engine, images
from harness.kindlab import versions as v
from harness.lab.build import BuildError, Say

REPO = f"{v.REPO}/powercut"
BASE = f"{v.REPO}/runner-base:{v.DEBIAN_SUITE}"
UID = 10001

#: Debian packages of the runner: the interpreter (bookworm's Python 3.11, what the
#: wheelhouse is built for), ipmitool (IPMI lanplus), the SSH client (the ssh power driver),
#: CA certificates, tini (PID 1: forwards SIGTERM so the cycle in progress can finish),
#: libstdc++ (Node.js, which Allure Report 3 runs on: the HTML report).
RUNNER_PACKAGES = (
    "python3",
    "python3-venv",
    "ipmitool",
    "openssh-client",
    "ca-certificates",
    "tini",
    "libstdc++6",
)

DOCKERFILE = """\
FROM {base} AS build
COPY wheels/ /wheels/
COPY lock.txt {wheel} /src/
RUN python3 -m venv /opt/powercut/venv \\
 && /opt/powercut/venv/bin/pip install -q --no-index --disable-pip-version-check \\
      --no-cache-dir --find-links /wheels -c /src/lock.txt /src/{wheel} \\
 && /opt/powercut/venv/bin/pip uninstall -q -y pip \\
 && rm -rf /opt/powercut/venv/share

FROM {base}
COPY --from=build /opt/powercut /opt/powercut
COPY node /usr/local/bin/node
COPY allure/ /opt/allure/
RUN echo "powercut:x:{uid}:{uid}:powercut:/tmp:/usr/sbin/nologin" >> /etc/passwd \\
 && echo "powercut:x:{uid}:" >> /etc/group \\
 && mkdir -p /var/lib/powercut && chown {uid}:{uid} /var/lib/powercut \\
 && /opt/powercut/venv/bin/powercut --version \\
 && /opt/powercut/venv/bin/python -m harness.kindlab.sbom {sbom}
ENV PATH=/opt/powercut/venv/bin:/usr/local/bin:/usr/bin:/bin \\
    PYTHONDONTWRITEBYTECODE=1 \\
    PYTHONUNBUFFERED=1 \\
    HOME=/tmp \\
    MPLBACKEND=Agg \\
    MPLCONFIGDIR=/tmp/matplotlib \\
    POWERCUT_STATE_DIR=/var/lib/powercut/state \\
    POWERCUT_ALLURE=/opt/allure/node_modules/.bin/allure
USER {uid}:{uid}
WORKDIR /tmp
VOLUME ["/tmp", "/var/lib/powercut"]
ENTRYPOINT ["/usr/bin/tini", "--", "powercut"]
CMD ["--help"]
"""


#: The SBOM inside the image (harness/kindlab/sbom.py); a copy is written beside it.
SBOM_PATH = "/opt/powercut/sbom.json"


@dataclass(frozen=True)
class Built:
    ref: str
    key: str
    cached: bool
    seconds: float
    size_bytes: int
    sbom: Path  # the copy of the image's SBOM beside it (in the kind cache)


def sbom_beside(image: str, key: str) -> Path:
    """The image's SBOM copied out of it to ``~/.cache/powercut/kind/runner-sbom-<key>.json``
    (once per image)."""
    out = v.kind_cache() / f"runner-sbom-{key}.json"
    if not out.is_file():
        text = engine.run(["run", "--rm", "--entrypoint", "cat", image, SBOM_PATH])
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    return out


def ref(key: str, version: str = __version__) -> str:
    """The image reference: powercut's version and the key of everything that went in
    (:func:`inputs_key`), so an image rebuilt from changed sources gets a tag of its own
    and a node's ``IfNotPresent`` can never keep running a stale one."""
    return f"{REPO}:{version}-{key}"


def checkout() -> Path:
    """The source checkout this powercut runs from (the wheel is built from it)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file() or not (root / ".git").exists():
        raise BuildError(
            f"powercut image build needs a powercut checkout (a git work tree with "
            f"pyproject.toml); {root} is not one: run it from a clone"
        )
    return root


def source_files(root: Path) -> list[str]:
    """The files the wheel is built from, of those git tracks or would track (as wheel-test
    copies them)."""
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
        capture_output=True,
        check=False,
    )
    if out.returncode != 0:
        raise BuildError(f"git ls-files in {root}: {out.stderr.decode().strip()}")
    return sorted(f for f in out.stdout.decode().split("\0") if f and _in_wheel(f))


#: What the wheel is built from (setuptools: pyproject's packages and package data, the
#: README as its description); tests, docs, benchmarks and the rest are not copied or keyed,
#: so changing them does not rebuild the image.
WHEEL_FILES = ("pyproject.toml", "README.md", "MANIFEST.in", "setup.py", "setup.cfg",
               "requirements/lock.txt")  # fmt: skip
WHEEL_DIRS = ("harness/", "steps/", "features/")


def _in_wheel(path: str) -> bool:
    return path in WHEEL_FILES or path.startswith(WHEEL_DIRS)


def copy_sources(root: Path, files: list[str], dest: Path) -> None:
    """The files into ``dest`` (symlinks as symlinks): the wheel is built from this copy
    (setuptools writes build/ beside the sources) and the key is taken of it, so that what
    is keyed is what is built even if the checkout changes meanwhile."""
    for f in files:
        p = root / f
        if not (p.is_file() or p.is_symlink()):
            continue  # deleted but not yet staged
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        if p.is_symlink():
            os.symlink(os.readlink(p), dest / f)
        else:
            shutil.copy2(p, dest / f)


def inputs_key(src: Path, files: list[str], base_key: str) -> str:
    """Key of everything the image is made of: the base tarball, the sources (as copied),
    the wheelhouse's key (Python version and lock file), the Dockerfile."""
    h = hashlib.sha256()
    h.update(base_key.encode())
    h.update(wheelhouse_key().encode())
    h.update(DOCKERFILE.encode())
    for f in files:
        p = src / f
        if p.is_symlink():
            h.update(f.encode() + b"\0->" + os.readlink(p).encode())
        elif p.is_file():
            h.update(f.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def wheelhouse_key() -> str:
    """sha256 of the Python version and the lock file: ``make wheel-test``'s key."""
    lock = checkout() / "requirements" / "lock.txt"
    return hashlib.sha256(sys.version.encode() + b"\n" + lock.read_bytes()).hexdigest()[:16]


def wheelhouse(say: Say) -> Path:
    """Wheels of every locked dependency, made once per Python version and lock file."""
    d = v.cache_root() / "wheelhouse" / wheelhouse_key()
    if (d / ".complete").is_file():
        return d
    lock = checkout() / "requirements" / "lock.txt"
    say(f"filling the wheelhouse {d} from {lock} (once per lock file)")
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--disable-pip-version-check",
            "-r",
            str(lock),
            "-w",
            str(d),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise BuildError(f"pip wheel -r {lock}: {r.stderr.strip()[-1500:]}")
    (d / ".complete").touch()
    return d


def _wheel(src: Path, dest: Path) -> Path:
    """The powercut wheel, built from the copy of the checkout's files."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dest),
            ".",
        ],
        cwd=src,
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise BuildError(f"building the powercut wheel: {r.stderr.strip()[-1500:]}")
    wheels = list(dest.glob("powercut-*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"building the powercut wheel made {wheels}")
    return wheels[0]


def report_tools(root: Path, say: Say) -> tuple[Path, Path, str]:
    """Node.js (>= 20, this machine's) and Allure Report 3 (``make report-tools``'s cache,
    installed by its script when missing, without Chromium): the HTML report's generator.
    Returns the node binary, the allure install directory and a key of both."""
    node = shutil.which("node")
    if not node:
        raise BuildError("node is not installed: the runner's HTML report needs Node.js >= 20")
    out = subprocess.run(
        [node, "-p", "process.versions.node"], capture_output=True, text=True, check=False
    )
    version = out.stdout.strip()
    if out.returncode != 0 or int(version.split(".")[0] or 0) < 20:
        raise BuildError(f"node {version or '?'} at {node}: Allure Report 3 needs Node.js >= 20")
    r = subprocess.run(
        ["bash", str(root / "scripts" / "install-report-tools.sh")],
        env=dict(os.environ, POWERCUT_NO_CHROMIUM="1"),
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise BuildError(f"scripts/install-report-tools.sh: {r.stderr.strip()[-1000:]}")
    allure = Path(r.stdout.strip().splitlines()[-1])
    install = allure.parents[2]  # .../allure-<version>/node_modules/.bin/allure
    return Path(node).resolve(), install, f"node-{version}/{install.name}"


def size(image: str) -> int:
    return int(engine.run(["image", "inspect", "--format", "{{.Size}}", image]).strip())


def build(say: Say, *, rebuild: bool = False) -> Built:
    """The runner image, built if its inputs changed."""
    t0 = time.monotonic()
    root = checkout()
    files = source_files(root)
    base_tar = images.rootfs_tar(say, RUNNER_PACKAGES)
    v.kind_cache().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="runner-", dir=v.kind_cache()) as d:
        work = Path(d)
        src = work / "src"
        copy_sources(root, files, src)
        node, allure, tools_key = report_tools(root, say)
        key = inputs_key(src, files, base_tar.name + tools_key)
        target = ref(key)
        if not rebuild and images.image_key(target) == key:
            sbom = sbom_beside(target, key)
            return Built(target, key, True, time.monotonic() - t0, size(target), sbom)
        say(f"building the runner image {target} (key {key}) with no registry")
        base = images.base_image(say, BASE, RUNNER_PACKAGES)
        house = wheelhouse(say)
        ctx = work / "ctx"
        (ctx / "wheels").mkdir(parents=True)
        wheel = _wheel(src, ctx)
        say(f"  wheel {wheel.name} built")
        for w in house.glob("*.whl"):
            os.link(w, ctx / "wheels" / w.name)
        shutil.copy2(root / "requirements" / "lock.txt", ctx / "lock.txt")
        shutil.copy2(node, ctx / "node")
        shutil.copytree(allure / "node_modules", ctx / "allure" / "node_modules", symlinks=True)
        dockerfile = DOCKERFILE.format(base=base, wheel=wheel.name, uid=UID, sbom=SBOM_PATH)
        images._docker_build(target, ctx, dockerfile, key)
    sbom = sbom_beside(target, key)
    seconds = time.monotonic() - t0
    say(f"runner image {target} built in {seconds:.0f}s (SBOM: {sbom})")
    return Built(target, key, False, seconds, size(target), sbom)


def save(image: str, out: Path) -> None:
    """``docker save`` to a tarball (``kind load image-archive`` and ``ctr import`` read it)."""
    engine.run(["save", "-o", str(out), image], timeout=600)


def load_into_kind(cluster_name: str, image: str, say: Say) -> list[str]:
    """Import the image into the containerd of every node of the kind cluster (what
    ``kind load docker-image`` does); returns the nodes."""
    from harness.kindlab import cluster

    nodes = [c for c in cluster.containers(cluster_name) if not c.endswith("-lb")]
    if not nodes:
        raise BuildError(f"no kind cluster named {cluster_name} (no node containers)")
    for node in nodes:
        try:
            engine.import_into_containerd(node, [image])
        except engine.EngineError as exc:
            raise BuildError(str(exc)) from None
        say(f"  {image} imported into {node}")
    return nodes
