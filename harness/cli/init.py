"""``powercut init DIR`` (a project skeleton) and ``powercut inventory discover -o FILE``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Final

from harness.errors import ConfigError
from harness.kube.names import ANNOTATION_BMC, LABEL_ZONE

INVENTORY: Final = """\
# powercut inventory: the cluster, its nodes and how to switch their power.
# Write the nodes from the cluster itself:  powercut inventory discover -o inventory.yaml
# Every field, commented: inventories/baremetal-example.yaml in powercut's repository.
name: my-cluster
cluster:
  kubeconfig: ~/.kube/config   # relative paths resolve against this file's directory
  # context: my-context
racks:
  - name: rack-a
nodes:
  - name: worker-1            # the Kubernetes Node name
    role: worker              # worker | control-plane
    rack: rack-a
    power:
      driver: redfish         # ipmi | redfish | ssh | kind, or an installed plugin
      endpoint: https://bmc-worker-1.example
      username: powercut
      password_env: BMC_PASSWORD   # or password_file: a file holding only the password
      # verify_tls: path/to/bmc-ca.pem
# workloads: what must survive; health URLs make outages measurable
# workloads:
#   - {namespace: shop, kind: Deployment, name: web, min_available: 2, critical: true,
#      health: {http: "https://shop.example/healthz"}}
budgets:
  profile: upstream           # fast | upstream (Kubernetes' defaults); overrides: {...}
"""

FEATURE: Final = """\
@disruptive @needs_bmc @serial
Feature: A worker survives losing its power
  One worker running a StatefulSet member loses power without warning; Kubernetes notices,
  and once the node is powered on again everything is back as it was. Change it to your
  failure case: every sentence powercut knows is in its docs/steps.md.

  Background:
    Given the cluster is in steady state

  Scenario: A worker with a stateful pod loses power and comes back
    Given a worker node running a StatefulSet member with a ReadWriteOnce volume
    When the node loses power
    Then the node is NotReady within the node-not-ready budget
    And the node is tainted unreachable within the taint-applied budget
    When the node is powered on again
    Then the node is Ready within the node-ready-after-power-on budget
    And the cluster is back to steady state within the recovery budget
"""

TEST_MODULE: Final = """\
# For plain pytest: `pytest --inventory inventory.yaml` runs every feature in features/ with
# powercut's step vocabulary (its pytest plugin is installed with the package).
from pytest_bdd import scenarios

scenarios("features")
"""

CI_JOB: Final = """\
# GitHub Actions: run the failure cases against a cluster from a runner that reaches it and
# its BMCs. Other CI systems: the same three commands.
name: powercut
on:
  workflow_dispatch:
  schedule:
    - cron: "0 2 * * 1"   # Mondays 02:00
jobs:
  resilience:
    runs-on: [self-hosted, lab-network]
    timeout-minutes: 120
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with: {python-version: "3.11"}
      - run: pip install powercut
      - run: powercut preflight -i inventory.yaml
        env: {BMC_PASSWORD: "${{ secrets.BMC_PASSWORD }}"}
      - run: powercut run -i inventory.yaml --features features/ --out reports/run
        env: {BMC_PASSWORD: "${{ secrets.BMC_PASSWORD }}"}
      - if: always()
        run: powercut recover -i inventory.yaml   # nothing to do unless a run was cut short
        env: {BMC_PASSWORD: "${{ secrets.BMC_PASSWORD }}"}
      - if: always()
        uses: actions/upload-artifact@v4
        with: {name: powercut-report, path: reports/run}
"""

README: Final = """\
# Failure cases of my cluster, run with powercut

```sh
pip install powercut
powercut inventory discover -o inventory.yaml   # from the current kubeconfig; fill in FILL-IN
export BMC_PASSWORD=...                         # credentials stay references
powercut preflight -i inventory.yaml            # API server, nodes Ready, BMCs answer
powercut run -i inventory.yaml --features features/   # yours and the built-in ones
powercut run -i inventory.yaml --features features/ --no-builtin   # only yours
pytest --inventory inventory.yaml               # the same with plain pytest (test_features.py)
```

- `features/`: your failure cases, in powercut's step vocabulary.
- `inventory.yaml`: the cluster, its nodes, racks, BMCs, workloads and budgets.
- `test_features.py`: the one-line module plain pytest needs.
- `ci/powercut.yml`: a CI job (GitHub Actions) running them weekly.
"""

#: path in the project -> content
SKELETON: Final = {
    "inventory.yaml": INVENTORY,
    "features/worker_power_loss.feature": FEATURE,
    "test_features.py": TEST_MODULE,
    "ci/powercut.yml": CI_JOB,
    "README.md": README,
}


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = sub.add_parser(
        "init",
        help="write a project skeleton: inventory template, an example feature, a test "
        "module for plain pytest, a CI job",
        description="Write a new powercut project into DIR (created if missing): "
        + ", ".join(SKELETON)
        + ". Existing files are never overwritten (the command refuses and names them).",
    )
    init.add_argument("dir", type=Path, metavar="DIR")
    init.set_defaults(func=cmd_init)
    inv = sub.add_parser("inventory", help="write an inventory from the cluster")
    isub = inv.add_subparsers(dest="inventory_command", required=True, metavar="ACTION")
    disc = isub.add_parser(
        "discover",
        help="nodes, roles, racks and BMCs from the current cluster",
        description="Read the cluster's Nodes (role from the node-role labels, rack from "
        f"{LABEL_ZONE}) and their BMCs where the cluster knows them: the "
        f"node annotation {ANNOTATION_BMC} (ipmi://host:623, redfish://host, "
        "redfish+http://host...), else the Metal3 BareMetalHost that provisioned the node. "
        "Credentials are left as references to fill in (password_env BMC_PASSWORD, "
        "username FILL-IN); no Secret is read.",
    )
    disc.add_argument("-o", "--out", type=Path, required=True, help="inventory file to write")
    disc.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="default: $KUBECONFIG (its first file), else ~/.kube/config",
    )
    disc.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    disc.add_argument(
        "--rack-label",
        default=LABEL_ZONE,
        help=f"the node label naming its rack (default {LABEL_ZONE})",
    )
    disc.add_argument("--name", default=None, help="the inventory's name (for the report)")
    disc.add_argument(
        "--no-probe",
        action="store_true",
        help="do not ask the BMCs anything (by default each BMC host is asked, read-only: "
        "its Redfish service root for the protocol, version, vendor and SessionService, and "
        "with credentials its Systems for the system_id)",
    )
    disc.add_argument(
        "--password-env",
        default="BMC_PASSWORD",
        metavar="VAR",
        help="environment variable holding the BMC password for the read-only Systems "
        "listing (default BMC_PASSWORD; unset: system ids are left TODO)",
    )
    disc.add_argument(
        "--username",
        default=None,
        help="BMC user for that listing, where the node's annotation names none",
    )
    disc.add_argument(
        "--tls-ca",
        type=Path,
        default=None,
        metavar="FILE",
        help="CA bundle to verify the BMCs' certificates with (default: the system's)",
    )
    disc.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    disc.set_defaults(func=cmd_discover)


def cmd_init(args: argparse.Namespace) -> int:
    root: Path = args.dir
    if root.exists() and not root.is_dir():
        raise ConfigError("exists and is not a directory", source=str(root))
    existing = [p for p in SKELETON if (root / p).exists()]
    if existing:
        raise ConfigError(
            f"would overwrite {', '.join(existing)}; nothing written (move them away or "
            "choose another directory)",
            source=str(root),
        )
    for rel, text in SKELETON.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    print(
        f"next: cd {root} && powercut inventory discover -o inventory.yaml --force "
        "(or edit inventory.yaml), then powercut preflight -i inventory.yaml"
    )
    return 0


def default_kubeconfig() -> Path:
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0]).expanduser()
    return Path("~/.kube/config").expanduser()


def cmd_discover(args: argparse.Namespace) -> int:
    from harness.discover import discover, probe, render
    from harness.inventory import parse_inventory
    from harness.kube.client import KubeClient

    out: Path = args.out
    if out.exists() and not args.force:
        raise ConfigError("exists; pass --force to overwrite it", source=str(out))
    kubeconfig = (args.kubeconfig or default_kubeconfig()).expanduser().resolve()
    if not kubeconfig.is_file():
        raise ConfigError("kubeconfig not found (pass --kubeconfig)", source=str(kubeconfig))
    client = KubeClient.from_kubeconfig(kubeconfig, args.context)
    try:
        nodes = discover(client, rack_label=args.rack_label)
    finally:
        client.close()
    if not args.no_probe:
        verify: bool | str = str(args.tls_ca) if args.tls_ca else True
        probe(nodes, verify=verify, username=args.username, password_env=args.password_env)
    text = render(nodes, kubeconfig=kubeconfig, context=args.context, name=args.name)
    # What we write must load: a bug here is ours, not the user's to find.
    parse_inventory(text, source=str(out), base_dir=out.resolve().parent)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    known = [n for n in nodes if n.bmc is not None]
    racks = sorted({n.rack for n in nodes if n.rack})
    print(
        f"wrote {out}: {len(nodes)} nodes "
        f"({sum(n.role == 'control-plane' for n in nodes)} control-plane), "
        f"{len(racks)} rack(s), {len(known)} BMC(s) found"
    )
    for n in nodes:
        where = n.bmc.source if n.bmc else "TODO: no BMC known"
        if n.redfish is not None and n.bmc is not None and n.bmc.driver == "redfish":
            where += f"; {n.redfish.summary()}"
        print(f"  {n.name:24} {n.role:14} {n.rack or '-':10} {where}")
    print("fill in FILL-IN / TODO and set BMC_PASSWORD, then: powercut preflight -i " + str(out))
    if any(n.notes for n in nodes):
        for n in nodes:
            for note in n.notes:
                print(f"powercut: warning: {n.name}: {note}", file=sys.stderr)
    return 0
