"""Memory and CPU of one runner (the runner image, as the chart runs it: read-only root, uid
10001, /tmp and the state volume writable) through a feature run and through a longevity
cycle, against a lab exposed on a Docker network's gateway (``lab up --expose``).

    python bench/runner_footprint.py --lab-inventory lab.yaml --network NET --gateway IP \
        --image "$(powercut image build --json | jq -r .image)"

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


def _cgroup_dirs(pid: int) -> tuple[Path, Path]:
    """The memory and CPU accounting cgroup directories of a process (v1 or v2)."""
    mem = cpu = unified = None
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            unified = Path("/sys/fs/cgroup") / path.lstrip("/")
        if "memory" in controllers.split(","):
            mem = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
        if "cpuacct" in controllers.split(","):
            cpu = Path("/sys/fs/cgroup/cpu,cpuacct") / path.lstrip("/")
            if not cpu.is_dir():
                cpu = Path("/sys/fs/cgroup/cpuacct") / path.lstrip("/")
    if (mem is None or cpu is None) and unified is not None and (unified / "cpu.stat").is_file():
        mem = cpu = unified
    if mem is None or cpu is None:
        raise RuntimeError(f"no memory/cpu cgroup for pid {pid}")
    return mem, cpu


def _sample(mem: Path, cpu: Path) -> tuple[int, float]:
    """Peak memory (bytes) and CPU time (s) so far: cgroup v1 or v2."""
    if (mem / "memory.max_usage_in_bytes").is_file():
        peak = int((mem / "memory.max_usage_in_bytes").read_text())
        return peak, int((cpu / "cpuacct.usage").read_text()) / 1e9
    peak = int((mem / "memory.peak").read_text())
    stat = dict(line.split() for line in (cpu / "cpu.stat").read_text().splitlines())
    return peak, int(stat["usage_usec"]) / 1e6


def run_one(
    name: str, image: str, args: list[str], mounts: list[str], network: str
) -> dict[str, object]:
    """Run the image; sample its cgroup every 0.5 s (it goes away with the container)."""
    t0 = time.monotonic()
    cid = docker(
        "run", "-d", "--network", network, "--read-only", "--tmpfs", "/tmp:exec",
        *mounts, image, *args,
    ).strip()  # fmt: skip
    peak, cpu = 0, 0.0
    try:
        pid = int(docker("inspect", "--format", "{{.State.Pid}}", cid).strip())
        try:
            mem_dir, cpu_dir = _cgroup_dirs(pid)
            while True:
                try:
                    peak, cpu = _sample(mem_dir, cpu_dir)
                except OSError:
                    break  # gone with the container
                if docker("inspect", "--format", "{{.State.Running}}", cid).strip() != "true":
                    break
                time.sleep(0.5)
        except (OSError, RuntimeError):
            pass  # exited before its cgroup could be read
        rc = int(docker("wait", cid, timeout=3600).strip())
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
    ap.add_argument(
        "--image",
        required=True,
        help="the runner image: the tag `powercut image build` printed (<version>-<key>)",
    )
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
            print(json.dumps(run_one(name, args.image, cmd, mounts, args.network)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
