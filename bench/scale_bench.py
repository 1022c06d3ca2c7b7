"""Large-lab benchmark: a lab of 500+ kwok nodes (three control planes) up, its memory,
10,000 pods on it, down; this tree against a baseline checkout at the baseline's largest size.

Run: ``.venv/bin/python bench/scale_bench.py [--racks 11 --workers-per-rack 48]
[--pods 10000] [--baseline DIR --baseline-racks 10 --baseline-workers 25]
[--base-port P] [--state-dir DIR]``. Needs ``2 x nodes + 200`` ports from ``--base-port``
(rounded up to a thousand) below the kernel's ephemeral range.

Each lab is brought up with ``powercut lab up`` (the baseline's with PYTHONPATH and cwd its
checkout), timed to "ready" (every node Ready, its not-ready taint lifted), its memory read
(the proportional set, PSS, of the supervisor and every process it started, from /proc:
kwok, etcd, API servers, controllers, HAProxy, Prometheus; their resident sets added up
count the kwok binary's shared pages once per node), then 10,000 pods are created as one
Deployment and timed until every replica is Ready, the memory read again, and the lab taken
down and timed. With ``--outage`` the large lab is brought up with the sample workloads
(``--workloads``) and, once the pods are Ready, the built-in feature "Every node of one rack
loses power at once" runs on it end to end (``powercut run -k one_rack_loses``: a whole rack
of ``--workers-per-rack`` workers cut at once, its pods evicted and replaced, powered on,
back to steady state), its wall time, verdict and the scenario's harness time printed.
With ``--baseline``, the baseline's lab and this tree's lab of the same size are brought
up one after the other in the same run (the load is printed with each), then this tree's
large lab. Targets (issue #26): 500 nodes Ready within 60 s, down within
15 s. Prints one table, and the figures as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

UP_TARGET_S = 60.0
IDLE_WINDOW_S = 20.0
DOWN_TARGET_S = 15.0
HERE = Path(__file__).resolve().parent.parent


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def mem_available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


def lab(tree: Path, *args: str) -> tuple[float, str]:
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "lab", *args],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=str(tree)),
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.monotonic() - t0
    if out.returncode != 0:
        raise RuntimeError(f"lab {args[0]} failed ({out.returncode}): {out.stderr[-2000:]}")
    return took, out.stdout


def lab_processes(state: Path) -> list[int]:
    """The lab's supervisor and every process under it."""
    pid = int((state / "supervisor.pid").read_text().strip().split(":")[1])
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(children.get(p, []))
    return seen


def memory_mb(state: Path) -> tuple[float, float, int]:
    """The memory of the lab's supervisor and every process under it: the sum of their
    resident sets (pages shared between the kwok processes, their binary, counted once per
    process), the sum of their proportional sets (each shared page split between its
    sharers: what the lab really holds), and how many processes that is."""
    seen = lab_processes(state)
    rss = pss = 0
    for p in seen:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            pass
    return rss / 1024, pss / 1024, len(seen)


class CpuSampler:
    """Reads :func:`cpu_seconds` every ``period_s`` while ``lab up`` runs, with the load
    average: where a lab's CPU went, also when it never came up (the
    lab is taken down then, and its processes with their counters)."""

    def __init__(self, state: Path, period_s: float = 10.0) -> None:
        self.state = state
        self.period_s = period_s
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.monotonic()

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                cpu = cpu_seconds(self.state)
            except (OSError, ValueError, IndexError):
                continue  # the supervisor not started yet
            self.samples.append(
                {"t": time.monotonic() - self._t0, "cpu": cpu, "load": load().split()[0]}
            )
            self.print(self.samples[-1])

    @staticmethod
    def print(sample: dict[str, Any]) -> None:
        cpu: dict[str, float] = sample["cpu"]
        top = sorted(cpu.items(), key=lambda kv: -kv[1])[:5]
        print(
            f"    {sample['t']:5.0f} s: CPU used {sum(cpu.values()):6.0f} s "
            f"(load {sample['load']}): " + ", ".join(f"{k} {v:.0f}" for k, v in top),
            flush=True,
        )


def cpu_seconds(state: Path) -> dict[str, float]:
    """CPU time (user + system) each kind of the lab's processes has used since it started,
    by program name (kwok, kube-apiserver, etcd, ...; ``python`` is the supervisor with its
    BMC emulators). Read right after ``lab up``, it is what bringing the lab up cost: on a
    machine of C cores the lab cannot be up faster than the total / C seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for p in lab_processes(state):
        try:
            head, tail = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)
        except OSError:
            continue
        name = head.split("(", 1)[1]
        fields = tail.split()
        used = (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / tick
        out[name] = out.get(name, 0.0) + used
    return out


def pods(state: Path, count: int, tree: Path) -> float:
    """Create ``count`` pods as one Deployment; seconds until every replica is Ready."""
    sys.path.insert(0, str(tree))
    from harness.kube.client import KubeClient

    client = KubeClient.from_kubeconfig(state / "kubeconfig")
    ns = "scale-bench"
    client.create("/api/v1/namespaces", {"metadata": {"name": ns}})
    t0 = time.monotonic()
    client.create(
        f"/apis/apps/v1/namespaces/{ns}/deployments",
        {
            "metadata": {"name": "bulk"},
            "spec": {
                "replicas": count,
                "selector": {"matchLabels": {"app": "bulk"}},
                "template": {
                    "metadata": {"labels": {"app": "bulk"}},
                    "spec": {
                        "containers": [{"name": "c", "image": "bulk:1"}],
                        "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
                    },
                },
            },
        },
    )
    deadline = t0 + 1200
    ready = 0
    from harness.errors import TemporaryError

    dropped = 0
    while time.monotonic() < deadline:
        try:
            d = client.get(f"/apis/apps/v1/namespaces/{ns}/deployments/bulk")
        except TemporaryError:  # an API server dropped the connection under the load
            dropped += 1
            time.sleep(2)
            continue
        ready = (d.get("status") or {}).get("readyReplicas", 0) or 0
        if ready >= count:
            break
        time.sleep(2)
    took = time.monotonic() - t0
    client.close()
    if dropped:
        print(f"    (the API servers dropped {dropped} of the bench's polls meanwhile)")
    if ready < count:
        raise RuntimeError(f"only {ready} of {count} pods Ready after {took:.0f} s")
    return took


def outage(tree: Path, inventory: Path, out: Path) -> dict[str, Any]:
    """Run the built-in rack outage feature on the lab; its wall time, outcome and the
    scenario's harness time (read from the Allure results)."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable, "-m", "harness.cli", "run", "--inventory", str(inventory),
            "--out", str(out), "--progress", "plain", "--no-html", "-k", "one_rack_loses",
        ],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=str(tree)),
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    took = time.monotonic() - t0
    (out / "run.log").parent.mkdir(parents=True, exist_ok=True)
    (out / "run.log").write_text(proc.stdout + proc.stderr)
    row: dict[str, Any] = {"outage_s": took, "outage_rc": proc.returncode}
    for result in (out / "allure-results").glob("*-result.json"):
        data = json.loads(result.read_text())
        row["outage_status"] = data.get("status")
        for param in data.get("parameters", []):
            if str(param.get("name", "")).startswith("harness time"):
                row.setdefault("outage_harness", {})[param["name"]] = param.get("value")
    return row


def one_lab(
    name: str,
    tree: Path,
    state: Path,
    base_port: int,
    racks: int,
    workers: int,
    pod_count: int,
    timings: str = "fast",
    rack_outage: bool = False,
) -> dict[str, Any]:
    nodes = 3 + racks * workers
    row: dict[str, Any] = {
        "code": name, "nodes": nodes, "timings": timings, "load_before": load()
    }  # fmt: skip
    avail = mem_available_mb()
    print(f"[{name}] lab up: {nodes} nodes (3 control planes, {racks} racks x {workers})...")
    try:
        with CpuSampler(state) as sampler:
            row["up_s"], _ = lab(
                tree, "up", "--control-planes", "3", "--racks", str(racks),
                "--workers-per-rack", str(workers), "--base-port", str(base_port),
                "--timings", timings, *(["--workloads"] if rack_outage else []),
                "--state-dir", str(state), "--inventory-out", str(state.parent / f"{name}.yaml"),
            )  # fmt: skip
        row["rss_mb"], row["pss_mb"], row["processes"] = memory_mb(state)
        row["cpu_s"] = cpu_seconds(state)
        total = sum(row["cpu_s"].values())
        time.sleep(IDLE_WINDOW_S)  # what the lab costs once up: leases, status updates
        idle = cpu_seconds(state)
        row["idle_cores"] = (sum(idle.values()) - total) / IDLE_WINDOW_S
        print(
            f"[{name}]   once up, the lab alone keeps {row['idle_cores']:.2f} cores busy "
            f"(kwok {(idle.get('kwok', 0) - row['cpu_s'].get('kwok', 0)) / IDLE_WINDOW_S:.2f})"
        )
        kinds = sorted(row["cpu_s"].items(), key=lambda kv: -kv[1])
        print(
            f"[{name}]   CPU used to come up: {total:.0f} s in all (on {os.cpu_count()} cores at "
            f"least {total / (os.cpu_count() or 1):.0f} s of wall time): "
            + ", ".join(f"{k} {v:.0f} s" for k, v in kinds[:6])
        )
        row["mem_used_mb"] = avail - mem_available_mb()
        print(
            f"[{name}]   up in {row['up_s']:.1f} s, RSS {row['rss_mb']:.0f} MB, PSS "
            f"{row['pss_mb']:.0f} MB, {row['processes']} processes (load {load()})"
        )
        if pod_count:
            row["pods"] = pod_count
            row["pods_ready_s"] = pods(state, pod_count, tree)
            _, row["pss_pods_mb"], _ = memory_mb(state)
            print(
                f"[{name}]   {pod_count} pods Ready in {row['pods_ready_s']:.1f} s, PSS "
                f"{row['pss_pods_mb']:.0f} MB"
            )
        if rack_outage:
            print(f"[{name}]   rack outage ({workers} workers) on it (load {load()})...")
            row.update(outage(tree, state.parent / f"{name}.yaml", state.parent / "outage"))
            print(
                f"[{name}]   rack outage: {row.get('outage_status')} (exit "
                f"{row['outage_rc']}) in {row['outage_s']:.1f} s; "
                f"{row.get('outage_harness', {})}"
            )
    except Exception as exc:  # noqa: BLE001 (reported in the table; the lab still goes down)
        row["error"] = str(exc)[-500:]
        if sampler.samples:
            row["cpu_s"] = sampler.samples[-1]["cpu"]
        print(f"[{name}]   FAILED: {row['error']}")
    finally:
        row["load_after"] = load()
        if state.exists():
            row["down_s"], _ = lab(tree, "down", "--state-dir", str(state))
            print(f"[{name}]   down in {row['down_s']:.1f} s")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--racks", type=int, default=11)
    ap.add_argument("--workers-per-rack", type=int, default=48)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--baseline", default="", help="a checkout of the code to compare with")
    ap.add_argument("--baseline-racks", type=int, default=10)
    ap.add_argument("--baseline-workers", type=int, default=25)
    ap.add_argument("--base-port", type=int, default=40000)
    ap.add_argument("--state-dir", type=Path, default=Path("/tmp/powercut-scale-bench"))
    ap.add_argument("--json", default="")
    ap.add_argument(
        "--outage",
        action="store_true",
        help="with the sample workloads, run the rack outage feature on the large lab",
    )
    ap.add_argument(
        "--timings",
        default="fast",
        help="the large lab's timing profile (fast: 8 s leases, renewed every 2 s by every "
        "node; upstream: 40 s, every 10 s)",
    )
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    args.state_dir.mkdir(parents=True, exist_ok=True)
    state = args.state_dir / "lab"
    if args.baseline:
        base = Path(args.baseline).resolve()
        size = (args.baseline_racks, args.baseline_workers)
        rows.append(one_lab("old", base, state, args.base_port, *size, 0))
        rows.append(one_lab("new", HERE, state, args.base_port, *size, 0))
    large = (args.racks, args.workers_per_rack, args.pods, args.timings, args.outage)
    rows.append(one_lab("new", HERE, state, args.base_port, *large))
    print(
        f"\n{'code':4} {'nodes':>5} {'up s':>6} {'PSS MB':>7} {'used MB':>8} {'pods':>6} "
        f"{'pods s':>7} {'PSS+pods':>9} {'down s':>7}  load before/after"
    )
    for r in rows:
        print(
            f"{r['code']:4} {r['nodes']:>5} {r.get('up_s', float('nan')):>6.1f} "
            f"{r.get('pss_mb', float('nan')):>7.0f} {r.get('mem_used_mb', float('nan')):>8.0f} "
            f"{r.get('pods', 0):>6} {r.get('pods_ready_s', float('nan')):>7.1f} "
            f"{r.get('pss_pods_mb', float('nan')):>9.0f} {r.get('down_s', float('nan')):>7.1f}  "
            f"{r['load_before']} / {r['load_after']}  {r['timings']}  {r.get('error', '')}"
        )
    big = rows[-1]
    if args.outage:
        print(
            f"rack outage on it: {big.get('outage_status', 'not run')} "
            f"in {big.get('outage_s', float('nan')):.0f} s"
        )
    ok = big.get("up_s", 1e9) <= UP_TARGET_S and big.get("down_s", 1e9) <= DOWN_TARGET_S
    print(
        f"target ({big['nodes']} nodes): Ready within {UP_TARGET_S:.0f} s, down within "
        f"{DOWN_TARGET_S:.0f} s: {'met' if ok else 'MISSED'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
