"""``powercut image build``: the runner image with no registry (``runner_image.py``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.kindlab import cluster, engine, runner_image
from harness.kindlab.spec import default_state_dir
from harness.settings import attached


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    img = sub.add_parser(
        "image",
        help="the runner image (for a management cluster), built here without a registry",
        description=(
            "Build the runner image with no registry: a Debian base made by debootstrap (as "
            "the kind node image's), the powercut wheel of this checkout with its locked "
            "dependencies, ipmitool, an SSH client; non-root (uid 10001), for a read-only "
            f"root filesystem; tagged {runner_image.REPO}:<version>."
        ),
    )
    isub = img.add_subparsers(dest="image_command", required=True, metavar="COMMAND")
    b = isub.add_parser(
        "build",
        help="build (or reuse) the runner image; optionally load it into kind or save it",
    )
    b.add_argument("--rebuild", action="store_true", help="rebuild even if the cache is current")
    b.add_argument(
        "--kind-cluster",
        action="append",
        default=[],
        metavar="NAME",
        help="import the image into every node of this kind cluster (repeatable)",
    )
    b.add_argument(
        "--save",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write it as a docker-save tarball",
    )
    b.add_argument("--json", action="store_true", help="machine-readable summary")
    b.add_argument("--state-dir", type=Path, default=None, help=argparse.SUPPRESS)
    b.set_defaults(func=cmd_build)


def cmd_build(args: argparse.Namespace) -> int:
    root = Path(args.state_dir or default_state_dir(attached(args))).resolve()
    eng = engine.ensure(root, None, cluster.say_stderr)
    try:
        built = runner_image.build(cluster.say_stderr, rebuild=args.rebuild)
        for name in args.kind_cluster:
            runner_image.load_into_kind(name, built.ref, cluster.say_stderr)
        if args.save:
            runner_image.save(built.ref, args.save)
    finally:
        if eng.started_pid is not None:
            engine.stop_dockerd(root)
    if args.json:
        print(
            json.dumps(
                {
                    "image": built.ref,
                    "key": built.key,
                    "cached": built.cached,
                    "seconds": round(built.seconds, 1),
                    "size_bytes": built.size_bytes,
                    "sbom": str(built.sbom),
                    "kind_clusters": args.kind_cluster,
                    "saved": str(args.save) if args.save else None,
                }
            )
        )
    else:
        how = "cached" if built.cached else f"built in {built.seconds:.0f}s"
        print(
            f"runner image {built.ref} {how}, {built.size_bytes / 1e6:.0f} MB (key {built.key}); "
            f"SBOM {built.sbom}"
        )
    return 0
