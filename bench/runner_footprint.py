"""Memory and CPU of one runner (the runner image, as the chart runs it: read-only root, uid
10001, /tmp and the state volume writable) through a feature run and through a longevity
cycle, against a lab exposed on a Docker network's gateway (``lab up --expose``).

    python bench/runner_footprint.py --lab-dir DIR --lab-inventory lab.yaml --network NET

The container's peak memory and CPU time come from its cgroup (v1: memory.max_usage_in_bytes,
cpuacct.usage; v2: memory.peak, cpu.stat), read after it exits and before it is removed.
Prints one JSON line per workload (and the load average, which the figures depend on).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from harness.kindlab import runner_image
from tests.mgmt.conftest import pod_files


def docker(*args: str, timeout: float = 120) -> str:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=True, timeout=timeout
    ).stdout


def cgroup_usage(cid: str) -> tuple[int, float]:
    """Peak memory (bytes) and CPU time (s) of a container."""
    v1 = Path("/sys/fs/cgroup/memory/docker") / cid
    if v1.is_dir():
        peak = int((v1 / "memory.max_usage_in_bytes").read_text())
        cpu_ns = int((Path("/sys/fs/cgroup/cpuacct/docker") / cid / "cpuacct.usage").read_text())
        return peak, cpu_ns / 1e9
    v2 = Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope")
    peak = int((v2 / "memory.peak").read_text())
    stat = dict(line.split() for line in (v2 / "cpu.stat").read_text().splitlines())
    return peak, int(stat["usage_usec"]) / 1e6


def run_one(name: str, args: list[str], mounts: list[str], network: str) -> dict[str, object]:
    t0 = time.monotonic()
    cid = docker(
        "run", "-d", "--network", network, "--read-only", "--tmpfs", "/tmp:exec",
        *mounts, runner_image.ref(), *args,
    ).strip()  # fmt: skip
    try:
        rc = int(docker("wait", cid, timeout=3600).strip())
        peak, cpu = cgroup_usage(cid)
        logs = subprocess.run(["docker", "logs", cid], capture_output=True, text=True, check=False)
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False)
    wall = time.monotonic() - t0
    out = {
        "workload": name,
        "exit": rc,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "cpu_avg_cores": round(cpu / wall, 2),
        "peak_memory_mib": round(peak / 2**20, 1),
        "load_average": os.getloadavg()[0],
    }
    if rc != 0:
        out["log_tail"] = (logs.stdout + logs.stderr)[-2000:]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab-inventory", type=Path, required=True)
    ap.add_argument("--network", required=True, help="the Docker network the lab is exposed on")
    ap.add_argument("--gateway", required=True, help="its gateway (the lab's --expose address)")
    ap.add_argument("--scenario", default="controlplane_node_loses_power")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="footprint-") as d:
        tmp = Path(d)
        inv, files = pod_files(args.lab_inventory, args.gateway, tmp)
        (tmp / "inv").mkdir()
        (tmp / "inv" / "inventory.yaml").write_text(yaml.safe_dump(inv))
        state = tmp / "state"
        state.mkdir()
        os.chown(state, runner_image.UID, runner_image.UID)
        for p in [tmp, files, tmp / "inv", *files.iterdir(), tmp / "inv" / "inventory.yaml"]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        mounts = [
            "-v", f"{files}:/etc/powercut/target:ro",
            "-v", f"{tmp / 'inv'}:/etc/powercut/inventory:ro",
            "-v", f"{state}:/var/lib/powercut",
        ]  # fmt: skip
        inv_path = "/etc/powercut/inventory/inventory.yaml"
        for name, cmd in (
            ("feature run (one scenario)",
             ["run", "--inventory", inv_path, "--out", "/var/lib/powercut/feature",
              "--progress", "plain", "--", "-k", args.scenario]),
            ("longevity (one cycle)",
             ["longevity", "--inventory", inv_path, "--cycles", "1", "--fraction", "1/3",
              "--outage", "5s", "--out", "/var/lib/powercut/longevity", "--progress", "plain"]),
        ):  # fmt: skip
            print(json.dumps(run_one(name, cmd, mounts, args.network)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
