"""SLO benchmark against a running lab (run by hand): how fast a stop condition stops a
scenario, what the lab's Prometheus costs, and how long the SLO steps' range queries take.

    .venv/bin/powercut lab up --workloads --base-port 29000 --state-dir /tmp/b/lab \\
        --inventory-out /tmp/b/lab.yaml
    POWERCUT_STATE_DIR=/tmp/b/state .venv/bin/python bench/slo_bench.py /tmp/b/lab.yaml

For each of ``--runs`` runs, a session powers one worker off and waits; a stop condition on
that worker's power metric (scraped every second) breaches, the session raises
StoppedByCondition and powers the node back on. Measured: power-off acknowledged -> the
exception in the main thread (target < 5 s: one scrape, one watcher tick, the `for` of 0),
and -> the node powered on again (undo). Then the lab Prometheus's CPU and RSS over 60 s,
and the time of "every SLO held throughout"'s queries over a 10-minute window.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import yaml

from harness.inventory import load_inventory
from harness.kube.client import KubeClient
from harness.kube.timeline import match
from harness.power.base import PowerState
from harness.power.factory import driver_for
from harness.session import Session, StoppedByCondition
from harness.slo.client import PrometheusClient
from harness.slo.evaluate import evaluate_slo

VICTIM = "w-c3"
TARGET_STOP_S = 5.0


def node_ready(client: KubeClient, node: str) -> bool:
    conds = client.get(f"/api/v1/nodes/{node}")["status"]["conditions"]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def wait(what: str, fn: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not fn():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.5)


def prometheus_pid(state_dir: Path) -> int | None:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            cmd
            and cmd[0].endswith(b"prometheus")
            and any(str(state_dir).encode() in part for part in cmd)
        ):
            return int(proc.name)
    return None


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, in ticks of 10 ms


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inventory", type=Path, help="the running lab's inventory (lab up)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    doc = yaml.safe_load(args.inventory.read_text())
    doc["slos"].append(
        {
            "name": "victim-powered",
            "expr": f'min(powercut_lab_node_power_on{{node="{VICTIM}"}})',
            "comparison": ">=",
            "threshold": 1,
            "step": "1s",
        }
    )
    doc.setdefault("stop_conditions", []).append({"slo": "victim-powered"})
    path = args.inventory.with_name("slo-bench.yaml")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    inv = load_inventory(path)
    client = KubeClient.from_kubeconfig(inv.cluster.kubeconfig)
    to_stop: list[float] = []
    to_restored: list[float] = []
    for run in range(args.runs):
        wait(f"{VICTIM} Ready", lambda: node_ready(client, VICTIM), 120)
        time.sleep(3)  # the power metric back at 1 for a few scrapes
        stopped_at = acked = 0.0
        try:
            with Session(inv, client=client, say=lambda m: None) as s:
                s.power_off([VICTIM])
                acked = time.monotonic()
                try:
                    s.timeline.wait_for(match(kind="Never"), time.monotonic() + 120, "never")
                except StoppedByCondition:
                    stopped_at = time.monotonic()
                    raise
        except StoppedByCondition:
            pass
        restored = time.monotonic()
        d = driver_for(inv.node(VICTIM), "redfish")
        on = d.state() is PowerState.ON
        d.close()
        if not stopped_at or not on:
            print(f"run {run + 1}: the stop did not happen or the node is not on", file=sys.stderr)
            return 1
        to_stop.append(stopped_at - acked)
        to_restored.append(restored - acked)
        print(
            f"run {run + 1}: stopped {to_stop[-1]:.2f} s after power-off acknowledged; "
            f"node on again {to_restored[-1]:.2f} s after"
        )
    med = statistics.median(to_stop)
    print(
        f"stop condition -> scenario stopped: median {med:.2f} s, max {max(to_stop):.2f} s "
        f"(target {TARGET_STOP_S:g} s: {'met' if med < TARGET_STOP_S else 'MISSED'}); "
        f"-> node on again: median {statistics.median(to_restored):.2f} s"
    )
    state = Path(str(inv.cluster.kubeconfig)).parent
    pid = prometheus_pid(state)
    if pid is not None:
        c0, t0 = cpu_s(pid), time.monotonic()
        time.sleep(60)
        share = (cpu_s(pid) - c0) / (time.monotonic() - t0)
        print(f"lab Prometheus: {share * 100:.1f}% of one core over 60 s, RSS {rss_mb(pid):.0f} MB")
    assert inv.prometheus is not None
    with PrometheusClient(inv.prometheus) as prom:
        end = time.time()
        t0 = time.monotonic()
        for slo in inv.slos:
            if slo.name != "victim-powered":
                evaluate_slo(prom, slo, end - 600, end)
        took = time.monotonic() - t0
        print(f"every lab SLO over a 10-minute window: {took * 1000:.0f} ms")
    client.close()
    return 0 if med < TARGET_STOP_S else 1


if __name__ == "__main__":
    sys.exit(main())
