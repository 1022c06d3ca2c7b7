"""The kind node image, built with no registry.

1. A Debian root filesystem from ``debootstrap`` (the machine's Debian mirror), imported as
   ``powercut.local/debian:<suite>`` (cached as a tarball keyed on suite and packages).
2. Every image the node runs, built locally with ``docker build`` (no ``FROM`` but that
   Debian base or ``scratch``): the control-plane components, kube-proxy, etcd, pause,
   CoreDNS, the pod network agent, local-path-provisioner and its helper, the probe app.
3. The node: the Debian base plus kind's own base-image files (entrypoint, systemd units,
   containerd config, from the kind module's ``images/base/files``), containerd, crictl,
   kubelet, kubeadm, kubectl; then, in a build container, every image of step 2 imported
   into the node's containerd (``ctr -n k8s.io images import``), committed as
   ``powercut.local/kind-node:<kubernetes version>``, labelled with the key of its inputs
   so that a warm ``kind up`` reuses it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from harness.kindlab import binaries, engine
from harness.kindlab import versions as v
from harness.lab.build import BuildError, Say

DATA = Path(__file__).parent / "data"
KEY_LABEL = "io.powercut.build-key"


def image_names() -> dict[str, str]:
    """Component -> image reference, as kubeadm names them with ``imageRepository`` set to
    ``powercut.local`` and the etcd / CoreDNS tags pinned in the cluster config."""
    r, k = v.REPO, v.KUBERNETES
    return {
        "kube-apiserver": f"{r}/kube-apiserver:{k}",
        "kube-controller-manager": f"{r}/kube-controller-manager:{k}",
        "kube-scheduler": f"{r}/kube-scheduler:{k}",
        "kube-proxy": f"{r}/kube-proxy:{k}",
        "etcd": f"{r}/etcd:{v.ETCD}",
        "coredns": f"{r}/coredns:{v.COREDNS}",
        "pause": f"{r}/pause:{v.PAUSE_TAG}",
        "netd": f"{r}/netd:{v.KUBERNETES}",
        "local-path-provisioner": f"{r}/local-path-provisioner:{v.LOCAL_PATH}",
        "local-path-helper": f"{r}/local-path-helper:{v.DEBIAN_SUITE}",
        "probe": f"{r}/probe:v1",
    }


#: The attachable storage's image (``kind up --storage csi``): built and loaded into the
#: nodes by ``kindlab/csi.py``, not part of the node image.
CSI_IMAGE = f"{v.REPO}/csi:{v.CSI_ATTACHER}-{v.CSI_PROVISIONER}"


def _kind_module_dir() -> Path:
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"sigs.k8s.io/kind@{v.KIND}"],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ, GOFLAGS="-mod=mod", GOWORK="off"),
        cwd=tempfile.gettempdir(),
    )
    if out.returncode != 0:
        raise BuildError(f"go mod download sigs.k8s.io/kind@{v.KIND}: {out.stdout}{out.stderr}")
    return Path(json.loads(out.stdout)["Dir"])


def _debian_mirror() -> str:
    src = Path("/etc/apt/sources.list.d/debian.sources")
    if src.is_file():
        for line in src.read_text().splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    return "http://deb.debian.org/debian"


def restrict_oom_score_adj() -> bool:
    """True where the capability bounding set lacks CAP_SYS_RESOURCE (bit 24): the node
    containers run without it (engine.py's runtime wrapper), and runc in a node cannot
    lower a pod's oom_score_adj (-998 for static pods: "can't get final child's PID from
    pipe: EOF"); containerd then keeps pods' scores at or above its own."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            return not int(line.split()[1], 16) & (1 << 24)
    return False


def _inputs_key(bins: dict[str, Path]) -> str:
    h = hashlib.sha256()
    for name in sorted(bins):
        h.update(f"{name}={bins[name]}".encode())  # cache dirs are keyed on versions
    for p in sorted(DATA.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    h.update(Path(__file__).read_bytes())
    h.update(
        json.dumps(
            [v.NODE_PACKAGES, v.DEBIAN_SUITE, image_names(), restrict_oom_score_adj()]
        ).encode()
    )
    return h.hexdigest()[:16]


def image_key(ref: str) -> str | None:
    try:
        out = engine.run(["image", "inspect", "--format", "{{json .Config.Labels}}", ref])
    except engine.EngineError:
        return None
    labels = json.loads(out or "null") or {}
    key = labels.get(KEY_LABEL)
    return str(key) if key else None


def rootfs_tar(say: Say, packages: tuple[str, ...] = v.NODE_PACKAGES) -> Path:
    """A Debian root filesystem (``debootstrap --variant=minbase`` of the suite with
    ``packages``) as a tarball in the kind cache, keyed on the suite and the packages: made
    once, reused by every build. The node image's base, and the runner image's
    (``runner_image.py``) with packages of its own."""
    pk = hashlib.sha256(" ".join(packages).encode()).hexdigest()[:10]
    tar = v.kind_cache() / f"debian-{v.DEBIAN_SUITE}-{pk}.tar"
    if tar.is_file():
        return tar
    if not shutil.which("debootstrap"):
        engine_say = "installing Debian package: debootstrap"
        say(engine_say)
        r = subprocess.run(
            ["apt-get", "install", "-y", "-qq", "debootstrap"],
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            raise BuildError(f"apt-get install debootstrap: {r.stderr.strip()[-500:]}")
    v.kind_cache().mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="rootfs-", dir=v.kind_cache()))
    t0 = time.monotonic()
    say(f"debootstrap {v.DEBIAN_SUITE} ({len(packages)} packages) from {_debian_mirror()}")
    try:
        r = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=" + ",".join(packages),
                v.DEBIAN_SUITE,
                str(root),
                _debian_mirror(),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            raise BuildError(f"debootstrap failed: {(r.stdout + r.stderr).strip()[-1500:]}")
        for junk in (
            "var/cache/apt/archives",
            "var/lib/apt/lists",
            "usr/share/doc",
            "usr/share/man",
        ):
            shutil.rmtree(root / junk, ignore_errors=True)
        tmp = tar.with_suffix(".tmp")
        subprocess.run(["tar", "-C", str(root), "-cf", str(tmp), "."], check=True)
        tmp.rename(tar)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    say(f"  root filesystem in {time.monotonic() - t0:.0f}s ({tar.stat().st_size >> 20} MB)")
    return tar


def base_image(
    say: Say, ref: str = v.BASE_IMAGE, packages: tuple[str, ...] = v.NODE_PACKAGES
) -> str:
    """:func:`rootfs_tar` imported as the image ``ref`` (labelled with the tarball's name, so
    that an image of the same inputs is reused)."""
    tar = rootfs_tar(say, packages)
    key = tar.name
    if image_key(ref) == key:
        return ref
    say(f"docker import {tar.name} -> {ref}")
    engine.run(["import", "--change", f"LABEL {KEY_LABEL}={key}", str(tar), ref], timeout=600)
    return ref


def _docker_build(ref: str, ctx: Path, dockerfile: str, key: str) -> None:
    (ctx / "Dockerfile").write_text(dockerfile + f"\nLABEL {KEY_LABEL}={key}\n")
    engine.run(["build", "-q", "-t", ref, str(ctx)], timeout=900)


def _component_images(bins: dict[str, Path], key: str, say: Say) -> list[str]:
    names = image_names()
    base = v.BASE_IMAGE
    static = "FROM scratch\nCOPY tmp /tmp\nCOPY passwd group /etc/\n"
    specs: dict[str, tuple[list[str], str]] = {
        "kube-apiserver": (["kube-apiserver"], static + "COPY kube-apiserver /usr/local/bin/\n"),
        "kube-controller-manager": (
            ["kube-controller-manager"],
            static + "COPY kube-controller-manager /usr/local/bin/\n",
        ),
        "kube-scheduler": (["kube-scheduler"], static + "COPY kube-scheduler /usr/local/bin/\n"),
        "etcd": (["etcd", "etcdctl"], static + "COPY etcd etcdctl /usr/local/bin/\n"),
        "coredns": (
            ["coredns"],
            static + 'COPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT ["/coredns"]\n',
        ),
        "pause": (
            ["pause"],
            static + 'COPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n',
        ),
        "probe": (
            ["probe"],
            static + 'COPY probe /probe\nEXPOSE 8080\nENTRYPOINT ["/probe"]\n',
        ),
        "local-path-provisioner": (
            ["local-path-provisioner"],
            f"FROM {base}\nCOPY local-path-provisioner /usr/local/bin/\n"
            'ENTRYPOINT ["local-path-provisioner"]\n',
        ),
        "kube-proxy": (["kube-proxy"], f"FROM {base}\nCOPY kube-proxy /usr/local/bin/\n"),
        "netd": (
            [],
            f"FROM {base}\nCOPY netd.sh /usr/local/bin/powercut-netd\n"
            "RUN chmod 0755 /usr/local/bin/powercut-netd\n",
        ),
        "local-path-helper": ([], f"FROM {base}\n"),
    }
    built: list[str] = []
    for comp, (files, dockerfile) in specs.items():
        ref = names[comp]
        built.append(ref)
        if image_key(ref) == key:
            continue
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="img-", dir=v.kind_cache()) as d:
            ctx = Path(d)
            (ctx / "tmp").mkdir(mode=0o1777)
            (ctx / "passwd").write_text(
                "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n"
            )
            (ctx / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
            for f in files:
                shutil.copy2(bins[f], ctx / f)
            if comp == "netd":
                shutil.copy2(DATA / "netd.sh", ctx / "netd.sh")
            _docker_build(ref, ctx, dockerfile, key)
        say(f"  image {ref} in {time.monotonic() - t0:.1f}s")
    return built


def _manifests(kind_dir: Path) -> dict[str, str]:
    """kind's default storage manifest with our images; our pod network manifest."""
    names = image_names()
    src = (kind_dir / "pkg/build/nodeimage/const_storage.go").read_text()
    m = re.search(r"const defaultStorageManifest = `(.*)`\s*$", src, re.S)
    if not m:
        raise BuildError("kind's const_storage.go: no defaultStorageManifest found")
    storage = m.group(1)
    storage = storage.replace("` + storageProvisionerImage + `", names["local-path-provisioner"])
    storage = storage.replace("` + storageHelperImage + `", names["local-path-helper"])
    if "`" in storage or "kindest" in storage:
        raise BuildError("kind's storage manifest has a form this build does not know")
    net = (DATA / "netd.yaml").read_text().replace("NETD_IMAGE", names["netd"])
    return {"default-storage.yaml": storage, "default-cni.yaml": net}


# kind's base image: containerd's default OCI spec plus kind's product-files hook.
CRI_HOOK = (
    ".hooks.createContainer[.hooks.createContainer| length] |= . + "
    '{"path": "/kind/bin/mount-product-files.sh"}'
)
NODE_DOCKERFILE = """\
FROM {base}
COPY kind-base/ /
COPY usr-local-bin/ /usr/local/bin/
COPY usr-bin/ /usr/bin/
COPY manifests/ /kind/manifests/
RUN chmod 0755 /kind /kind/bin /kind/bin/* /usr/local/bin/* /usr/bin/kubelet /usr/bin/kubeadm \\
        /usr/bin/kubectl \\
    && cd /lib/systemd/system \\
    && rm -f sysinit.target.wants/systemd-tmpfiles-setup.service multi-user.target.wants/* \\
        local-fs.target.wants/* sockets.target.wants/*udev* sockets.target.wants/*initctl* \\
        basic.target.wants/* /etc/systemd/system/*.wants/* \\
    && cd / \\
    && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \\
    && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \\
    && systemctl mask systemd-binfmt.service \\
    && mkdir -p /etc/kubernetes/manifests /opt/cni/bin /etc/cni/net.d \\
    && ln -sf /usr/lib/cni/* /opt/cni/bin/ \\
    && ctr oci spec | jq '{hook}' | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \\
    && sed -i 's#sandbox_image = .*#sandbox_image = "{pause}"#' /etc/containerd/config.toml \\
    && grep -q '{pause}' /etc/containerd/config.toml \\
    && sed -i 's#restrict_oom_score_adj = .*#restrict_oom_score_adj = {restrict_oom}#' \\
        /etc/containerd/config.toml \\
    && echo "{version}" > /kind/version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
"""


def _stage_image(bins: dict[str, Path], key: str, kind_dir: Path) -> str:
    ref = f"{v.REPO}/kind-node-stage:{v.KUBERNETES}"
    if image_key(ref) == key:
        return ref
    with tempfile.TemporaryDirectory(prefix="node-", dir=v.kind_cache()) as d:
        ctx = Path(d)
        shutil.copytree(
            kind_dir / "images/base/files",
            ctx / "kind-base",
            ignore=shutil.ignore_patterns("LICENSES"),
        )
        for p in (ctx / "kind-base").rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        for sub, names in (
            ("usr-local-bin", ("containerd", "ctr", "containerd-shim-runc-v2", "crictl")),
            ("usr-bin", ("kubelet", "kubeadm", "kubectl")),
        ):
            (ctx / sub).mkdir()
            for n in names:
                shutil.copy2(bins[n], ctx / sub / n)
        (ctx / "manifests").mkdir()
        for name, text in _manifests(kind_dir).items():
            (ctx / "manifests" / name).write_text(text)
        dockerfile = NODE_DOCKERFILE.format(
            base=v.BASE_IMAGE,
            pause=image_names()["pause"],
            version=v.KUBERNETES,
            hook=CRI_HOOK,
            restrict_oom=str(restrict_oom_score_adj()).lower(),
        )
        _docker_build(ref, ctx, dockerfile, key)
    return ref


def _preload(stage: str, images: list[str], key: str, say: Say) -> None:
    """Import every image into the node's containerd in a build container; commit it."""
    name = f"powercut-kind-build-{os.getpid()}"
    engine.run(["run", "-d", "--name", name, "--entrypoint", "sleep", stage, "infinity"])
    try:
        engine.run(["exec", name, "bash", "-c", "nohup containerd >/tmp/containerd.log 2>&1 &"])
        engine.run(
            [
                "exec",
                name,
                "bash",
                "-c",
                "for i in $(seq 1 60); do [ -S /run/containerd/containerd.sock ] && "
                "ctr version >/dev/null 2>&1 && exit 0; sleep 0.5; done; "
                "cat /tmp/containerd.log; exit 1",
            ],
            timeout=60,
        )
        try:
            engine.import_into_containerd(
                name, images, "--label=io.cri-containerd.pinned=pinned", "--no-unpack"
            )
        except engine.EngineError as exc:
            raise BuildError(f"the node image's preload: {exc}") from None
        listed = set(
            engine.run(["exec", name, "ctr", "-n", "k8s.io", "images", "list", "-q"]).split()
        )
        missing = [i for i in images if i not in listed and f"docker.io/{i}" not in listed]
        if missing:
            raise BuildError(f"the node's containerd lacks {missing} after the import")
        engine.run(
            ["exec", name, "bash", "-c", "pkill containerd; sleep 1; rm -f /tmp/containerd.log"]
        )
        engine.run(
            [
                "commit",
                "--change",
                'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]',
                "--change",
                "CMD []",
                "--change",
                f"LABEL {KEY_LABEL}={key}",
                name,
                v.NODE_IMAGE,
            ],
            timeout=600,
        )
        say(f"  {len(images)} images imported into the node's containerd")
    finally:
        subprocess.run(
            [engine.docker_cli(), "rm", "-f", "-v", name], capture_output=True, check=False
        )


def node_image(say: Say, *, rebuild: bool = False) -> str:
    """The node image, built if its inputs changed; returns its reference."""
    t0 = time.monotonic()
    bins = binaries.obtain(say)
    key = _inputs_key(bins)
    if not rebuild and image_key(v.NODE_IMAGE) == key:
        say(f"node image {v.NODE_IMAGE}: cached (key {key})")
        return v.NODE_IMAGE
    say(f"building node image {v.NODE_IMAGE} (key {key}) with no registry")
    kind_dir = _kind_module_dir()
    base_image(say)
    images = _component_images(bins, key, say)
    stage = _stage_image(bins, key, kind_dir)
    _preload(stage, images, key, say)
    say(f"node image {v.NODE_IMAGE} built in {time.monotonic() - t0:.0f}s")
    return v.NODE_IMAGE
