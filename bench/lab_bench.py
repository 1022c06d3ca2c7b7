"""Lab benchmark: `lab up` to all nodes Ready, `lab down`, and the largest lab this machine holds.

Run: `make bench` (or `.venv/bin/python bench/lab_bench.py [--nodes 100 --pods 3000]`).
Prints each figure next to its target and the ratio measured/target (below 1 is better).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.kube.client import KubeClient

BASE_PORT = 25000


def powercut(*args: str) -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "harness.cli", *args], check=True, capture_output=True)
    return time.monotonic() - t0


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def lab_pids(state: Path) -> list[int]:
    data = json.loads((state / "state.json").read_text())
    pids = [int(data["supervisor_pid"])]
    return pids + [int(c["pid"]) for c in data["components"].values() if c["pid"]]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100, help="workers in the large lab")
    ap.add_argument("--pods", type=int, default=3000, help="pods in the large lab")
    ap.add_argument("--runs", type=int, default=3, help="repetitions of the 12-node up/down")
    args = ap.parse_args()
    rows: list[tuple[str, float, float, str]] = []
    powercut("lab", "build")  # fill the cache if it is cold; the next call is the measure
    rows.append(("lab build, warm cache, s", powercut("lab", "build"), 5, "s"))
    with tempfile.TemporaryDirectory(prefix="powercut-bench-") as tmp:
        state = Path(tmp) / "state"
        common = ["--state-dir", str(state), "--base-port", str(BASE_PORT)]
        inv = ["--inventory-out", str(Path(tmp) / "inv.yaml")]
        ups, downs = [], []
        for _ in range(args.runs):
            try:
                ups.append(powercut("lab", "up", *common, *inv))
            finally:
                # Stop the lab before the temporary directory holding its state goes away.
                downs.append(powercut("lab", "down", "--state-dir", str(state)))
        ups.sort()
        downs.sort()
        rows.append(
            ("lab up, 12 nodes (3 cp + 9 workers) Ready, median s", ups[len(ups) // 2], 30, "s")
        )
        rows.append(("lab down, median s", downs[len(downs) // 2], 5, "s"))

        racks = 4
        per_rack = -(-args.nodes // racks)
        nodes: list[object] = []
        try:
            t_up = powercut(
                "lab",
                "up",
                *common,
                *inv,
                "--control-planes",
                "1",
                "--racks",
                str(racks),
                "--workers-per-rack",
                str(per_rack),
            )
            client = KubeClient.from_kubeconfig(state / "kubeconfig")
            listed, _ = client.list("/api/v1/nodes")
            nodes = list(listed)
            rows.append((f"lab up, {len(nodes)} nodes Ready, s", t_up, 120, "s"))
            ns = "bench"
            client.create("/api/v1/namespaces", {"metadata": {"name": ns}})
            t0 = time.monotonic()
            client.create(
                f"/apis/apps/v1/namespaces/{ns}/deployments",
                {
                    "metadata": {"name": "bulk"},
                    "spec": {
                        "replicas": args.pods,
                        "selector": {"matchLabels": {"app": "bulk"}},
                        "template": {
                            "metadata": {"labels": {"app": "bulk"}},
                            "spec": {"containers": [{"name": "c", "image": "bulk:1"}]},
                        },
                    },
                },
            )
            ready = 0
            deadline = t0 + 900
            while time.monotonic() < deadline:
                d = client.get(f"/apis/apps/v1/namespaces/{ns}/deployments/bulk")
                ready = (d.get("status") or {}).get("readyReplicas", 0)
                if ready >= args.pods:
                    break
                time.sleep(2)
            t_pods = time.monotonic() - t0
            rows.append((f"{ready} of {args.pods} pods Ready, s", t_pods, 300, "s"))
            rows.append(("lab RSS with those pods, MB", rss_mb(lab_pids(state)), 8000, "MB"))
            client.close()
        finally:
            t_down = powercut("lab", "down", "--state-dir", str(state))
        rows.append((f"lab down, {len(nodes)} nodes, s", t_down, 10, "s"))
    print(f"{'measure':58} {'value':>9} {'target':>8} {'ratio':>6}")
    for name, value, target, _unit in rows:
        print(f"{name:58} {value:9.1f} {target:8.0f} {value / target:6.2f}")
    print(f"(cores: {os.cpu_count()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
