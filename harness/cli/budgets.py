"""``powercut budgets derive|model``: the budgets the cluster's own settings predict
(``harness.model``, docs/budgets.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli.context import add_context_option
from harness.errors import ConfigError
from harness.inventory import load_inventory

if TYPE_CHECKING:
    from harness.inventory import Inventory
    from harness.model import ClusterModel

DERIVE_HELP = """\
Reads the cluster's timing settings (read-only: controller-manager flags, kubeadm's
ClusterConfiguration, node Leases, the workloads' tolerations, a kubelet's configz) and
writes the inventory's `budgets:` mapping: each modelled phase's upper bound plus the
margin, commented with the setting behind it and where it was read (or that it was
assumed). Budgets the model does not predict keep the inventory's profile figure.
"""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bp = sub.add_parser(
        "budgets",
        help="budgets the cluster's own settings predict (derive a budget file, show the model)",
        description="Kubernetes' own model of the cluster's timings (docs/budgets.md).",
    )
    bsub = bp.add_subparsers(dest="budgets_command", required=True, metavar="COMMAND")
    dv = bsub.add_parser(
        "derive",
        help="write a budget file from the model plus a margin",
        description=DERIVE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dv.add_argument("-i", "--inventory", type=Path, required=True, help="inventory YAML")
    add_context_option(dv)
    dv.add_argument("-o", "--out", type=Path, default=None, help="file (default stdout)")
    dv.add_argument(
        "--margin",
        default="25%",
        help="added to each modelled upper bound: a percentage, seconds or both "
        "('25%%', '10s', '25%%,10s'; default 25%%)",
    )
    dv.set_defaults(func=cmd_derive)
    md = bsub.add_parser("model", help="show the model: settings, workloads and phase bounds")
    md.add_argument("-i", "--inventory", type=Path, required=True, help="inventory YAML")
    add_context_option(md)
    md.add_argument("--json", action="store_true", help="the model as JSON (as a run keeps it)")
    md.set_defaults(func=cmd_model)


def _read(inventory: Path, context: str | None) -> tuple[Inventory, ClusterModel]:
    from harness.kube.target import aim_at_context, client_for
    from harness.model import read_model

    inv = aim_at_context(load_inventory(inventory), context)
    client = client_for(inv)
    try:
        return inv, read_model(client, inv.workloads)
    finally:
        client.close()


def cmd_derive(args: argparse.Namespace) -> int:
    from harness.model.derive import derive_text, parse_margin

    margin = parse_margin(args.margin)  # a bad margin: refused before the cluster is read
    inv, model = _read(args.inventory, args.context)
    profile = inv.budgets.profile or inv.timings or "upstream"
    text = derive_text(
        model, inv.timing_budgets(), profile, margin, source=inv.name or str(args.inventory)
    )
    if args.out is None:
        sys.stdout.write(text)
    else:
        if args.out.is_dir():
            raise ConfigError("a directory: give a file name", source=str(args.out), field="-o")
        args.out.write_text(text, encoding="utf-8")
        print(f"budgets written to {args.out}", file=sys.stderr)
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    _, model = _read(args.inventory, args.context)
    if args.json:
        print(json.dumps(model.to_json(), indent=2))
        return 0
    print(f"Kubernetes {model.version}; zones (nodes each): {list(model.zones)}")
    print("settings:")
    for s in model.settings.values():
        print(f"  {s.shown()}")
    print("workloads:")
    for w in model.workloads:
        print(f"  {w.kind} {w.ref}: unreachable {w.unreachable_s:g} s ({w.source}); {w.semantics}")
    print("phases (least .. most, dominating setting):")
    for name, b in model.bounds.items():
        print(f"  {name.replace('_', '-')}: {b.shown()}")
    return 0
