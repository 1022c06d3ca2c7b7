"""kind benchmark: `kind up` cold and warm to all nodes Ready, the cluster's memory, and
one node-loss scenario on kind beside the same scenario on the lab.

Run: `.venv/bin/python bench/kind_bench.py [--cold] [--lab] [--control-planes 3]`.
``--control-planes 3`` measures a cluster with three control planes (and kind's load
balancer) instead of one. ``--cold`` removes the node
image (and the images it holds) first, so `kind up` rebuilds it from the cached binaries
(the binaries' own cold build, a Go build of Kubernetes, is in docs/kind.md). ``--lab``
runs the scenario on a lab of its own too. Prints each figure next to its target.

The scenario: power a worker off (forced) that runs a `web` replica; measure until the node
is NotReady, until its pods are evicted, and until `web` has all its replicas Ready again on
the other nodes; then power it on and wait until it is Ready.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.inventory import load_inventory
from harness.kube.client import KubeClient
from harness.power.factory import driver_for

KIND_PORT = int(os.environ.get("POWERCUT_BENCH_KIND_PORT", "27000"))
LAB_PORT = int(os.environ.get("POWERCUT_BENCH_LAB_PORT", "28000"))


def powercut(*args: str) -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "harness.cli", *args], check=True)
    return time.monotonic() - t0


def wait(what: str, fn: Any, timeout_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            if fn():
                return time.monotonic() - t0
        except Exception:  # noqa: BLE001, S110 (the API may be busy; keep waiting)
            pass
        time.sleep(0.5)
    raise SystemExit(f"timed out after {timeout_s:.0f}s waiting for {what}")


def node_ready(c: KubeClient, node: str) -> bool:
    conds = c.get(f"/api/v1/nodes/{node}")["status"].get("conditions") or []
    return any(x["type"] == "Ready" and x["status"] == "True" for x in conds)


def scenario(inventory: Path, namespace: str) -> dict[str, float]:
    """Forced power-off of a worker running a web replica; the phases' durations."""
    inv = load_inventory(inventory)
    c = KubeClient.from_kubeconfig(inv.cluster.kubeconfig, timeout_s=10)
    pods, _ = c.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector="app=web")
    workers = {n.name for n in inv.nodes if n.role == "worker"}
    node = sorted(p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName") in workers)[0]
    lost = {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == node}
    driver = driver_for(inv.node(node), budgets=inv.timing_budgets())
    dep = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    want = c.get(dep)["spec"]["replicas"]

    def replaced() -> bool:
        now, _ = c.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector="app=web")
        ready = [
            p
            for p in now
            if p["metadata"]["name"] not in lost
            and not p["metadata"].get("deletionTimestamp")
            and any(
                x["type"] == "Ready" and x["status"] == "True"
                for x in p["status"].get("conditions") or []
            )
        ]
        return len(ready) >= want

    out: dict[str, float] = {}
    t0 = time.monotonic()
    driver.off()
    out["power_off_s"] = time.monotonic() - t0
    out["not_ready_s"] = out["power_off_s"] + wait("NotReady", lambda: not node_ready(c, node), 300)
    out["replaced_s"] = time.monotonic() - t0 + wait("web replaced", replaced, 600)
    t1 = time.monotonic()
    driver.on()
    out["ready_after_on_s"] = (
        time.monotonic() - t1 + wait("Ready", lambda: node_ready(c, node), 300)
    )
    driver.close()
    c.close()
    return {k: round(v, 1) for k, v in out.items()}


def cluster_memory_mb(name: str) -> float:
    """The memory the cluster's node containers use (``docker stats``), in MiB."""
    return round(sum(container_memory_mb(name).values()), 1)


def container_memory_mb(name: str) -> dict[str, float]:
    """The memory of each of the cluster's containers (``docker stats``), in MiB."""
    names = subprocess.run(
        ["docker", "ps", "--filter", f"label=io.x-k8s.kind.cluster={name}", "--format",
         "{{.Names}}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    stats = subprocess.run(
        ["docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}", *names],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    unit = {"B": 1 / 1024 / 1024, "KiB": 1 / 1024, "kB": 1 / 1024, "MiB": 1, "MB": 1,
            "GiB": 1024, "GB": 1024}  # fmt: skip
    out: dict[str, float] = {}
    for line in stats:
        m = re.match(r"\s*(\S+)\s+([\d.]+)\s*([A-Za-z]+)", line)
        if m:
            out[m.group(1)] = round(float(m.group(2)) * unit[m.group(3)], 1)
    return out


class _Skip(Exception):
    pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cold", action="store_true", help="rebuild the node image first")
    ap.add_argument("--lab", action="store_true", help="the same scenario on a lab too")
    ap.add_argument("--no-kind", action="store_true", help="skip kind (with --lab)")
    ap.add_argument("--control-planes", default="1", choices=("1", "3"), help="kind's (default 1)")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kind-bench-") as tmp:
        state, inv = Path(tmp) / "state", Path(tmp) / "kind.yaml"
        if args.cold and not args.no_kind:
            subprocess.run(["docker", "image", "rm", "-f", "powercut.local/kind-node:v1.36.3"],
                           capture_output=True, check=False)  # fmt: skip
            results["image_build_s"] = round(powercut("kind", "build"), 1)
        up = [
            "kind", "up", "--workloads", "--name", "pcbench", "--base-port", str(KIND_PORT),
            "--state-dir", str(state), "--inventory-out", str(inv),
            "--control-planes", args.control_planes,
        ]  # fmt: skip
        try:
            if args.no_kind:
                raise _Skip
            results["kind_up_s"] = round(powercut(*up), 1)
            results["timings"] = json.loads((state / "timings.json").read_text())
            results["memory_mb"] = cluster_memory_mb("pcbench")
            results["memory_by_container_mb"] = container_memory_mb("pcbench")
            results["kind_scenario"] = scenario(inv, "shop")
        except _Skip:
            pass
        finally:
            results["kind_down_s"] = round(powercut("kind", "down", "--state-dir", str(state)), 1)
        print(json.dumps(results, indent=2), flush=True)
        if args.lab:
            lstate, linv = Path(tmp) / "lab", Path(tmp) / "lab.yaml"
            powercut(
                "lab", "up", "--workloads", "--racks", "3", "--workers-per-rack", "1",
                "--control-planes", "1", "--base-port", str(LAB_PORT),
                "--state-dir", str(lstate), "--inventory-out", str(linv),
            )  # fmt: skip
            try:
                results["lab_scenario"] = scenario(linv, "lab")
            finally:
                powercut("lab", "down", "--state-dir", str(lstate))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
