"""``powercut rbac``: the Roles and ClusterRoles the chosen features need, as YAML."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from harness.errors import ConfigError
from harness.inventory import load_inventory
from harness.rbac import TIERS, feature_files, render, tiers_for


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "rbac",
        help="print the RBAC objects the chosen features need (least privilege, by tier)",
        description="Print the ClusterRoles, Roles (in the inventory's namespaces and those "
        "the features name) and bindings that grant exactly the tiers the chosen features "
        "need (docs/rbac.md, Tiers), for `kubectl apply -f -`. Each tier is said on stderr "
        "with the features that need it.",
    )
    p.add_argument("--inventory", "-i", required=True, type=Path, help="inventory YAML")
    p.add_argument(
        "--features",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="feature files or directories (repeatable; default: the built-in features)",
    )
    p.add_argument(
        "--service-account",
        default="kube-system/powercut",
        metavar="NAMESPACE/NAME",
        help="the ServiceAccount the bindings name (default: kube-system/powercut)",
    )
    p.add_argument("--user", default=None, help="bind a user (e.g. from OIDC) instead")
    p.set_defaults(func=cmd_rbac)


def cmd_rbac(args: argparse.Namespace) -> int:
    from harness.steps import BUILTIN_FEATURES

    inv = load_inventory(args.inventory)
    for d in args.features:
        if not d.exists():
            raise ConfigError("no such file or directory", source=str(d), field="--features")
    files = feature_files(args.features or [BUILTIN_FEATURES])
    choice = tiers_for(files)
    if args.user:
        subject = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": args.user}
    else:
        ns, _, name = str(args.service_account).partition("/")
        if not ns or not name:
            raise ConfigError(
                f"{args.service_account!r} is not NAMESPACE/NAME", field="--service-account"
            )
        subject = {"kind": "ServiceAccount", "name": name, "namespace": ns}
    namespaces = sorted({w.namespace for w in inv.workloads} | set(choice.namespaces))
    for tier in choice.tiers:
        users = ", ".join(choice.why.get(tier, [])) or "every run"
        print(f"# tier {tier}: {TIERS[tier].why} (needed by: {users})", file=sys.stderr)
    docs = render(choice.tiers, namespaces, subject=subject)
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
    return 0
