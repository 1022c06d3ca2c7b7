"""``powercut kind {build,up,status,down}``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from harness.kindlab import cluster, csi, engine, images
from harness.kindlab.spec import KindSpec, default_state_dir
from harness.settings import attached


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    kind = sub.add_parser(
        "kind",
        help="a real-kubelet kind cluster, built and run here without a registry",
        description=(
            "Build the kind node image with no registry, create a kind cluster from it, "
            "inspect it, delete it."
        ),
    )
    ksub = kind.add_subparsers(dest="kind_command", required=True, metavar="COMMAND")
    b = ksub.add_parser("build", help="build (or reuse) the node image and every image it runs")
    b.add_argument("--rebuild", action="store_true", help="rebuild even if the cache is current")
    b.add_argument(
        "--storage",
        choices=("local-path", "csi"),
        default="local-path",
        help="csi: also build (or reuse) the attachable storage's binaries and image, which "
        "`kind up --storage csi` would otherwise build (its Go builds are long on a cold "
        "machine: `make test` runs them here, at the lowest CPU priority)",
    )
    b.add_argument("--state-dir", type=Path, default=None, help=argparse.SUPPRESS)
    b.set_defaults(func=cmd_build)
    up = ksub.add_parser("up", help="create the cluster (refuses if one of that name exists)")
    up.add_argument("--control-planes", type=int, default=1, help="1 or 3 (default 1)")
    up.add_argument("--workers", type=int, default=2, help="worker nodes (default 2)")
    up.add_argument("--racks", type=int, default=3, help="racks, as zone labels (default 3)")
    up.add_argument("--timings", default="fast", help="fast or upstream (default fast)")
    up.add_argument("--workloads", action="store_true", help="deploy the sample workloads")
    up.add_argument(
        "--storage",
        default="local-path",
        help="the workloads' volumes: local-path (on their node, the default) or csi "
        "(attachable storage: powercut's CSI driver with the kubernetes-csi attacher and "
        "provisioner on a host directory every node has; real VolumeAttachments)",
    )
    up.add_argument(
        "--base-port",
        type=int,
        default=24000,
        help="API server on 127.0.0.1:BASE, workloads' HTTP at BASE+80.. (default 24000)",
    )
    up.add_argument("--name", default="powercut", help="cluster name (default powercut)")
    up.add_argument(
        "--network",
        default="kind",
        help="the Docker network the nodes join, created if missing and removed by down when "
        "nothing else uses it (default kind, as kind's own)",
    )
    up.add_argument(
        "--inventory-out",
        type=Path,
        default=Path("inventories/kind.yaml"),
        help="where to write the cluster's inventory (default inventories/kind.yaml)",
    )
    up.add_argument("--state-dir", type=Path, default=None, help=argparse.SUPPRESS)
    up.set_defaults(func=cmd_up)
    st = ksub.add_parser("status", help="node containers, API nodes, racks")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.add_argument("--state-dir", type=Path, default=None, help=argparse.SUPPRESS)
    st.set_defaults(func=cmd_status)
    dn = ksub.add_parser("down", help="delete the cluster and what up left (idempotent)")
    dn.add_argument("--state-dir", type=Path, default=None, help=argparse.SUPPRESS)
    dn.set_defaults(func=cmd_down)


def _root(args: argparse.Namespace) -> Path:
    return Path(args.state_dir or default_state_dir(attached(args))).resolve()


def cmd_build(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    root = _root(args)
    # The build needs a Docker engine: one that answers, or a dockerd of ours, stopped after.
    eng = engine.ensure(root, None, cluster.say_stderr)
    try:
        ref = images.node_image(cluster.say_stderr, rebuild=args.rebuild)
        if args.storage == "csi":
            ref += f" and the storage's {csi.ensure_image(cluster.say_stderr)}"
    finally:
        if eng.started_pid is not None:
            engine.stop_dockerd(root)
    print(f"node image {ref} ready in {time.monotonic() - t0:.0f}s")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    root = _root(args)
    spec = KindSpec(
        state_dir=str(root),
        name=args.name,
        control_planes=args.control_planes,
        workers=args.workers,
        racks=args.racks,
        timings=args.timings,
        base_port=args.base_port,
        workloads=args.workloads,
        storage=args.storage,
        network=args.network,
    )
    t = cluster.up(spec, cluster.say_stderr)
    from harness.kindlab.inventory_out import write_inventory

    write_inventory(spec, args.inventory_out)
    print(
        f"kind cluster {spec.name} ready in {t['total']:.0f}s (image {t['image']:.0f}s, "
        f"create {t['create']:.0f}s, all nodes Ready {t['ready']:.0f}s later): "
        f"{len(spec.nodes())} nodes in {spec.racks} racks"
    )
    print(f"kubeconfig: {spec.kubeconfig}")
    print(f"inventory:  {args.inventory_out}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    root = _root(args)
    if not (root / "spec.json").is_file():
        print("no kind cluster is up (no state in " + str(root) + ")")
        return 3
    st = cluster.status(root)
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    print(f"kind cluster {st['name']}: API {st['api']}")
    print(f"kubeconfig: {st['kubeconfig']}")
    for c, state in sorted(st["containers"].items()):
        n = st["nodes"].get(c, {})
        print(
            f"  {c:28} container {state:8} {n.get('role', ''):14} {n.get('zone', ''):8} "
            f"{n.get('ready', '-')}"
        )
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    root = _root(args)
    t0 = time.monotonic()
    removed = cluster.down(root, cluster.say_stderr)
    if not removed:
        print("no kind cluster is up; nothing to do")
    else:
        print(f"removed in {time.monotonic() - t0:.0f}s: {', '.join(removed)}")
    return 0
