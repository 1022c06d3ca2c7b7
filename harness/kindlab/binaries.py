"""Every binary a kind node image holds, from the Go module proxy (or this repository's own
Go source), cached by version in ``~/.cache/powercut/bin`` like the lab's.

- ``kubelet``, ``kubeadm``, ``kube-proxy``: the lab's Kubernetes wrapper module
  (``harness.lab.build``), a second group of the same version;
- the control-plane binaries and etcd: the lab's own groups, shared with it;
- kind, containerd (+ ``ctr``, the runc shim), crictl, CoreDNS, local-path-provisioner: one
  wrapper module each, since their dependency graphs must not be unified;
- ``pause``, ``probe`` (the HTTP test app) and ``lb`` (the API server load balancer of a
  cluster with several control planes): ``harness/kindlab/go``;
- apart from the node image (``kind up --storage csi`` only, :func:`obtain_csi`): the
  attachable storage's ``pcsi`` (powercut's CSI driver, ``harness/kindlab/csi``) and
  kubernetes-csi's ``csi-attacher`` and ``csi-provisioner`` sidecars.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.kindlab import versions as v
from harness.lab import build
from harness.lab import versions as lab_versions
from harness.lab.build import BuildError, Group, Say

NODE_GROUP = Group("kubernetes-node", v.KUBERNETES, ("kubelet", "kubeadm", "kube-proxy"))


@dataclass(frozen=True)
class Tool:
    """A Go module built through a wrapper module of its own."""

    group: Group
    module: str
    packages: tuple[str, ...]
    tags: str = ""
    source: Path | None = None  # with module "": a Go module of this repository


#: Commands of harness/kindlab/go built apart (their own cache key), so that a change to
#: one does not rebuild the node image: the load balancer runs beside the nodes, not in them.
APART = ("cmd/lb",)


#: powercut's CSI driver: a Go module of its own (it needs gRPC and the CSI spec).
CSI_SOURCE = Path(__file__).parent / "csi"


def _tree_key(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _source_key(only: str | None = None) -> str:
    """Key of the Go source: every file but the ``APART`` commands', or ``only``'s."""
    h = hashlib.sha256()
    for p in sorted(v.GO_SOURCE.rglob("*")):
        rel = str(p.relative_to(v.GO_SOURCE))
        if only is not None and not (rel.startswith(only + "/") or rel in ("go.mod", "go.sum")):
            continue
        if only is None and any(rel.startswith(a + "/") for a in APART):
            continue
        if p.is_file():
            h.update(str(p.relative_to(v.GO_SOURCE)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:12]


def tools() -> tuple[Tool, ...]:
    cd = "github.com/containerd/containerd/v2"
    return (
        Tool(Group("kind", v.KIND, ("kind",)), "sigs.k8s.io/kind", ("sigs.k8s.io/kind",)),
        Tool(
            Group("containerd", v.CONTAINERD, ("containerd", "ctr", "containerd-shim-runc-v2")),
            cd,
            (f"{cd}/cmd/containerd", f"{cd}/cmd/ctr", f"{cd}/cmd/containerd-shim-runc-v2"),
            # the snapshotters that need cgo; kind's base image leaves them out as well
            tags="no_aufs,no_zfs,no_btrfs,no_devmapper",
        ),
        Tool(
            Group("crictl", v.CRICTL, ("crictl",)),
            "sigs.k8s.io/cri-tools",
            ("sigs.k8s.io/cri-tools/cmd/crictl",),
        ),
        Tool(
            Group("coredns", v.COREDNS, ("coredns",)),
            "github.com/coredns/coredns",
            ("github.com/coredns/coredns",),
        ),
        Tool(
            Group("local-path-provisioner", v.LOCAL_PATH, ("local-path-provisioner",)),
            "github.com/rancher/local-path-provisioner",
            ("github.com/rancher/local-path-provisioner",),
        ),
        Tool(
            Group("powercut-images", _source_key(), ("pause", "probe")),
            "",
            ("powercut.local/kindimages/cmd/pause", "powercut.local/kindimages/cmd/probe"),
        ),
    )


def lb_tool() -> Tool:
    """The load balancer, apart from :func:`tools` (the node image's inputs)."""
    return Tool(
        Group("powercut-lb", _source_key("cmd/lb"), ("lb",)),
        "",
        ("powercut.local/kindimages/cmd/lb",),
    )


def helm_tool() -> Tool:
    """helm, apart from :func:`tools` too: the management cluster's installer of
    ``deploy/chart``, not part of a node."""
    return Tool(Group("helm", v.HELM, ("helm",)), "helm.sh/helm/v3", ("helm.sh/helm/v3/cmd/helm",))


def kubeconform_tool() -> Tool:
    """kubeconform, the schema check of the chart's rendered manifests (with the schemas of
    :mod:`harness.kindlab.kubeschemas`)."""
    return Tool(
        Group("kubeconform", v.KUBECONFORM, ("kubeconform",)),
        "github.com/yannh/kubeconform",
        ("github.com/yannh/kubeconform/cmd/kubeconform",),
    )


def _build_tool(tool: Tool, say: Say) -> dict[str, Path]:
    group = tool.group
    if tool.module:
        work = v.cache_root() / "build" / f"{group.name}-{group.version}"
        build._write_module(
            work,
            f"powercut.local/{group.name}build",
            [f"{tool.module} {group.version}"],
            [],
            list(tool.packages),
        )
        env = build._go_env(work)
        build._run_go(["mod", "tidy", "-e"], work, env, say, f"{group.name}: resolving modules")
    else:
        work = v.cache_root() / "build" / f"{group.name}-{group.version}"
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(tool.source or v.GO_SOURCE, work)
        env = build._go_env(work)
    out = Path(tempfile.mkdtemp(prefix=f"{group.name}-", dir=lab_versions.bin_cache()))
    try:
        args = ["build", "-v", "-trimpath", "-ldflags", "-s -w", "-o", str(out) + "/"]
        if tool.tags:
            args += ["-tags", tool.tags]
        build._run_go([*args, *tool.packages], work, env, say, f"{group.name}: compiling")
        produced = {p.name: p for p in out.iterdir()}
        dest = group.cache_dir
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for b, pkg in zip(group.binaries, tool.packages, strict=True):
            src = produced.get(pkg.rsplit("/", 1)[-1]) or produced.get(b)
            if src is None:
                raise BuildError(f"{group.name}: go build produced {sorted(produced)}, not {b}")
            shutil.move(str(src), dest / b)
        (dest / ".complete").write_text(json.dumps({"version": group.version, "source": "go"}))
        return {b: dest / b for b in group.binaries}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def csi_tools() -> tuple[Tool, ...]:
    """The kubernetes-csi sidecars of the kind cluster's attachable storage."""
    att = "github.com/kubernetes-csi/external-attacher/v4"
    prov = "github.com/kubernetes-csi/external-provisioner/v6"
    return (
        Tool(
            Group("pcsi", _tree_key(CSI_SOURCE), ("pcsi",)),
            "",
            ("powercut.local/pcsi",),
            source=CSI_SOURCE,
        ),
        Tool(
            Group("csi-attacher", v.CSI_ATTACHER, ("csi-attacher",)),
            att,
            (f"{att}/cmd/csi-attacher",),
        ),
        Tool(
            Group("csi-provisioner", v.CSI_PROVISIONER, ("csi-provisioner",)),
            prov,
            (f"{prov}/cmd/csi-provisioner",),
        ),
    )


def obtain_csi(say: Say) -> dict[str, Path]:
    """The CSI sidecars by name, built if the cache lacks them."""
    paths: dict[str, Path] = {}
    for tool in csi_tools():
        paths.update(_obtain_tool(tool, say))
    return paths


def obtain(say: Say) -> dict[str, Path]:
    """Every binary of the node image by name; builds what the cache lacks, one group at a
    time."""
    paths: dict[str, Path] = {}
    lab_bins = build.obtain(say, groups=(*build.GROUPS[:2], NODE_GROUP))
    paths.update(lab_bins.paths)
    for tool in tools():
        paths.update(_obtain_tool(tool, say))
    return paths


def obtain_lb(say: Say) -> Path:
    """The load balancer's binary (``lb``), built if the cache lacks it."""
    return _obtain_tool(lb_tool(), say)["lb"]


def obtain_helm(say: Say) -> Path:
    """helm's binary, built from the Go module proxy if the cache lacks it
    (``~/.cache/powercut/bin/helm-<version>/helm``)."""
    return _obtain_tool(helm_tool(), say)["helm"]


def obtain_kubeconform(say: Say) -> Path:
    """kubeconform's binary, built from the Go module proxy if the cache lacks it
    (``~/.cache/powercut/bin/kubeconform-<version>/kubeconform``)."""
    return _obtain_tool(kubeconform_tool(), say)["kubeconform"]


def _obtain_tool(tool: Tool, say: Say) -> dict[str, Path]:
    found = build._from_cache(tool.group)
    if found is None:
        with build._locked(tool.group):
            found = build._from_cache(tool.group)
            if found is None:
                say(f"{tool.group.name} {tool.group.version}: go build")
                found = _build_tool(tool, say)
    return found
