"""Synchronized power cut benchmark: acknowledgement skew and request-to-acknowledgement.

Cuts N lab nodes at once (default 10 workers of a lab of its own: 2 racks x 5 workers, one
control plane), R rounds each way, in the same run:

* ``sequential``: the earlier way, each node's whole power-off started in parallel: the
  Redfish call opens its TLS connection, authenticates and finds the system at the moment
  of the cut, the IPMI call opens its session then;
* ``synchronized``: every node prepared first (connection, authentication, discovery,
  session, current state), then a barrier releases every request together.

Prints, per protocol mix and way, the acknowledgement skew (first to last BMC
acknowledgement of one cut), request-to-acknowledgement per node (p50 / max) and the skew of
the confirmations (the new state read back), the ratio sequential / synchronized, and the
targets. The earlier way has no separate acknowledgement: its whole ``off()`` (connect,
authenticate, discover, send, read back) is what it counted as acknowledged, and so it is
counted here; the synchronized way's acknowledgement is the BMC's answer to the request.
Targets: skew <= 50 ms for 10 nodes and request to
acknowledgement <= 100 ms (p50) on a lab BMC, synchronized. Exit 1 if a target is missed.

Then, per protocol, a power-cycle row each way: ``sequential`` is each node's driver
``cycle()`` in parallel (its skew is that of the cycles' ends: read back on); the
synchronized cycle releases the power-offs together, then the power-ons, and both skews are
printed (against the same 50 ms, for information: no target is set for a cycle, and a miss
does not change the exit status).

Run: ``.venv/bin/python bench/cut_bench.py [--inventory INV --nodes w1,w2,...] [--rounds 5]``
(or ``make bench``). Without ``--inventory`` it brings a lab up on ``--base-port`` (default
``$POWERCUT_BENCH_PORT`` or 25000) and takes it down at the end.

At rack scale: ``--sizes 10,24,48,96 [--baseline DIR] [--profile 48]`` brings up one rack of
the largest size (one control plane) and cuts the first N workers of it, synchronized, for
each size and protocol (mixed, redfish, ipmi), ``--rounds`` times, printing the p50 / p95
of the acknowledgement skew and of request to acknowledgement per size, protocol and code.
Each code version cuts from a process of its own (``--worker``, PYTHONPATH and cwd its
tree): this tree's, and with ``--baseline`` a checkout of the code to compare with (``git
worktree add --detach DIR <commit>``), alternating cut by cut on the same lab; ratios
old/new are printed. Targets at 48 nodes: skew <= 50 ms, request to acknowledgement <=
100 ms (p50). ``--profile N`` then cuts N nodes once per protocol with this tree's code and
sets its stamps beside the lab log's (when each BMC emulator began to handle its request).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.inventory import Inventory, load_inventory
from harness.session import PowerResult, Session

SKEW_TARGET_S = 0.050
ACK_TARGET_S = 0.100
TARGET_NODES = 48  # --sizes: the size the targets are for (a 48-node rack)


def powercut(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "harness.cli", *args], check=True, capture_output=True)


def roomy(inventory: Inventory, count: int) -> Inventory:
    """The inventory with safety limits that let the bench cut ``count`` nodes at once."""
    safety = inventory.safety.model_copy(
        update={"max_nodes_down": max(count, inventory.safety.max_nodes_down)}
    )
    safety = safety.model_copy(update={"rack_fraction_policy": "warn"})
    # The bench cuts most of a rack on purpose: its rack warning, once per cut, is noise here.
    logging.getLogger("harness.safety").setLevel(logging.ERROR)
    return inventory.model_copy(update={"safety": safety})


def cut(inventory: Inventory, nodes: list[str], protocol: str | None, sync: bool) -> PowerResult:
    quiet = lambda _message: None  # noqa: E731
    with Session(inventory, undo_on_exit=False, say=quiet) as s:
        result = s.power_off(nodes, protocol=protocol, synchronized=sync)
        s.power_on(nodes, protocol=protocol)
    return result


def cycle(inventory: Inventory, nodes: list[str], protocol: str | None, sync: bool) -> PowerResult:
    quiet = lambda _message: None  # noqa: E731
    with Session(inventory, undo_on_exit=False, say=quiet) as s:
        return s.power_cycle(nodes, protocol=protocol, synchronized=sync)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f}"


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def one_cut(inventory: Inventory, nodes: list[str], protocol: str | None) -> dict[str, object]:
    """One synchronized cut (then the nodes on again), its figures as JSON-able values."""
    result = cut(inventory, nodes, protocol, True)
    done = list(result.confirmed.values())
    return {
        "skew": result.skew_s,
        "spread": result.sent_spread_s,
        "acks": list(result.request_to_ack_s.values()),
        "confirm": max(done) - min(done) if len(done) > 1 else 0.0,
        "errors": result.errors,
    }


def worker(inventory_path: Path, count: int) -> int:
    """``--worker``: cut on command, one JSON line per cut (the code under PYTHONPATH: this
    tree's, or the baseline's); every node of the inventory's workers may be cut."""
    inventory = roomy(load_inventory(inventory_path), count)
    for line in sys.stdin:
        ask = json.loads(line)
        try:
            answer = one_cut(inventory, ask["nodes"], ask["protocol"])
        except Exception as exc:  # noqa: BLE001 (a failed cut is a row's note, not the end)
            answer = {"errors": {"cut": str(exc)[:300]}}
            # What did get powered off comes back on before the next cut.
            with Session(inventory, undo_on_exit=False, say=lambda _m: None) as s:
                s.power_on(ask["nodes"], protocol=ask["protocol"])
        print(json.dumps(answer), flush=True)
    return 0


class Side:
    """One code version cutting in a process of its own (PYTHONPATH = its tree)."""

    def __init__(self, name: str, tree: Path, inventory: Path, count: int) -> None:
        self.name = name
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker",
             "--inventory", str(inventory), "--count", str(count)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tree,
        )  # fmt: skip

    def cut(self, nodes: list[str], protocol: str | None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"nodes": nodes, "protocol": protocol}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} side's worker exited ({self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(30)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def profile(inventory_path: Path, log: Path, count: int, protocols: list[str]) -> None:
    """One synchronized cut of ``count`` nodes per protocol with this tree's code, in this
    process, its client-side stamps set beside the lab's: when each BMC emulator's handler
    began each node's request (the supervisor log's ``redfish: NODE ResetType=ForceOff`` and
    ``ipmi: NODE: power off`` lines, wall clock to the millisecond)."""
    inventory = roomy(load_inventory(inventory_path), count)
    nodes = [n.name for n in inventory.nodes_by_role("worker")][:count]
    print(f"\nprofile: one synchronized cut of {count} nodes per protocol (ms from the first send)")
    for proto in protocols:
        protocol = None if proto == "mixed" else proto
        offset = time.time() - time.monotonic()
        mark = log.stat().st_size
        result = cut(inventory, nodes, protocol, True)
        with log.open() as f:
            f.seek(mark)
            lines = f.read().splitlines()
        handled: dict[str, float] = {}
        for line in lines:
            # "... harness.lab.bmc.redfish: redfish: w-a2 ResetType=ForceOff",
            # "... harness.lab.bmc.ipmi: ipmi: w-a3: power off (forced)": logged by each
            # emulator's handler as it begins, before the power switch.
            parts = line.split()
            if len(parts) < 7 or parts[4] not in ("redfish:", "ipmi:"):
                continue
            if "ResetType=ForceOff" not in line and "power off" not in line:
                continue
            node = parts[5].rstrip(":")
            if node in handled or node not in result.sent:
                continue
            stamp = time.mktime(time.strptime(parts[0] + " " + parts[1][:8], "%Y-%m-%d %H:%M:%S"))
            handled[node] = stamp + int(parts[1][9:12]) / 1000 - offset
        t0 = min(result.sent.values())
        sent = sorted(v - t0 for v in result.sent.values())
        acks = sorted(v - t0 for v in result.acknowledged.values())
        seen = sorted(v - t0 for v in handled.values())
        print(
            f"  {proto:8} sent {ms(sent[0]).strip()}..{ms(sent[-1]).strip()}; lab handled "
            f"{len(seen)} from {ms(seen[0]).strip() if seen else '-'} to "
            f"{ms(seen[-1]).strip() if seen else '-'}; acknowledged "
            f"{ms(acks[0]).strip()}..{ms(acks[-1]).strip()} (skew {ms(result.skew_s).strip()})"
        )
        by_protocol: dict[str, list[float]] = {}
        for node, at in handled.items():
            kind = inventory.node(node).power.driver if protocol is None else proto
            by_protocol.setdefault(kind, []).append(at - t0)
        for kind, stamps in sorted(by_protocol.items()):
            stamps.sort()
            print(
                f"           {kind:8} handled {len(stamps)}: first {ms(stamps[0]).strip()}, "
                f"p50 {ms(pct(stamps, 0.5)).strip()}, last {ms(stamps[-1]).strip()}"
            )
        time.sleep(0.5)


def sizes_run(args: argparse.Namespace, inventory_path: Path) -> int:
    """``--sizes``: the synchronized cut at each size, each protocol, this tree against the
    baseline's (``--baseline``), alternating cut by cut on the same lab."""
    sizes = [int(x) for x in args.sizes.split(",")]
    inventory = load_inventory(inventory_path)
    workers = [n.name for n in inventory.nodes_by_role("worker")]
    if max(sizes) > len(workers):
        raise SystemExit(f"--sizes: the lab has {len(workers)} workers, fewer than {max(sizes)}")
    here = Path(__file__).resolve().parent.parent
    sides = [Side("new", here, inventory_path, max(sizes))]
    if args.baseline:
        sides.append(Side("old", Path(args.baseline).resolve(), inventory_path, max(sizes)))
    print(f"load average at the start: {load()}")
    print(
        f"{'nodes':>5} {'protocol':9} {'code':4} {'skew p50':>9} {'skew p95':>9} "
        f"{'sent spread':>12} {'req->ack p50':>13} {'req->ack p95':>13} {'confirm skew':>13}"
        "   (ms)"
    )
    ok = True
    rows: list[dict[str, Any]] = []
    try:
        for size in sizes:
            nodes = workers[:size]
            for proto in args.protocols.split(","):
                protocol = None if proto == "mixed" else proto
                figures: dict[str, list[dict[str, Any]]] = {s.name: [] for s in sides}
                for r in range(args.rounds):
                    # Alternate which side goes first, so neither always follows the other.
                    for side in sides if r % 2 == 0 else list(reversed(sides)):
                        answer = side.cut(nodes, protocol)
                        if answer["errors"]:
                            print(f"  {side.name} {proto} {size}: errors {answer['errors']}")
                        figures[side.name].append(answer)
                        time.sleep(0.5)
                for side in sides:
                    cuts = [c for c in figures[side.name] if "skew" in c]
                    if not cuts:
                        print(f"{size:>5} {proto:9} {side.name:4} every cut failed")
                        continue
                    skews = [c["skew"] for c in cuts]
                    acks = [a for c in cuts for a in c["acks"]]
                    row = {
                        "nodes": size, "protocol": proto, "code": side.name,
                        "skew_p50": pct(skews, 0.5), "skew_p95": pct(skews, 0.95),
                        "spread_p50": pct([c["spread"] for c in cuts], 0.5),
                        "ack_p50": pct(acks, 0.5), "ack_p95": pct(acks, 0.95),
                        "confirm_p50": pct([c["confirm"] for c in cuts], 0.5),
                    }  # fmt: skip
                    rows.append(row)
                    print(
                        f"{size:>5} {proto:9} {side.name:4} {ms(row['skew_p50']):>9} "
                        f"{ms(row['skew_p95']):>9} {ms(row['spread_p50']):>12} "
                        f"{ms(row['ack_p50']):>13} {ms(row['ack_p95']):>13} "
                        f"{ms(row['confirm_p50']):>13}",
                        flush=True,
                    )
                    if side.name == "new" and size == TARGET_NODES:
                        hit = row["skew_p50"] <= SKEW_TARGET_S and row["ack_p50"] <= ACK_TARGET_S
                        ok = ok and hit
                if len(sides) == 2 and [r["code"] for r in rows[-2:]] == ["new", "old"]:
                    new, old = rows[-2], rows[-1]
                    print(
                        f"{size:>5} {proto:9} ratio old/new: skew "
                        f"{old['skew_p50'] / max(new['skew_p50'], 1e-6):.1f}x, request->ack "
                        f"{old['ack_p50'] / max(new['ack_p50'], 1e-6):.1f}x"
                    )
    finally:
        for side in sides:
            side.close()
    print(f"load average at the end: {load()}")
    verdict = ("met" if ok else "MISSED") if TARGET_NODES in sizes else "not measured"
    print(
        f"target at {TARGET_NODES} nodes (new code, p50): skew <= {SKEW_TARGET_S * 1000:.0f} ms, "
        f"request->ack <= {ACK_TARGET_S * 1000:.0f} ms: {verdict}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"load_end": load(), "rows": rows}, indent=1))
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inventory", type=Path, default=None, help="use this lab/cluster")
    ap.add_argument("--nodes", default="", help="comma-separated nodes (default: N workers)")
    ap.add_argument("--count", type=int, default=10, help="nodes to cut at once (default 10)")
    ap.add_argument("--rounds", type=int, default=5, help="cuts per way and protocol")
    ap.add_argument(
        "--sizes",
        default="",
        help="e.g. 10,24,48,96: the synchronized cut at each size on one rack of the largest "
        "(a lab of its own: 1 rack, 1 control plane), this tree against --baseline",
    )
    ap.add_argument(
        "--baseline",
        default="",
        help="with --sizes: a checkout of the code to compare with (e.g. a `git worktree add "
        "--detach DIR main` of the commit before), cut alternately in the same run",
    )
    ap.add_argument("--json", default="", help="with --sizes: also write the rows here")
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        help="with --sizes (and the bench's own lab): then one cut of this many nodes per "
        "protocol, its stamps beside the lab's log of when each BMC handled its request",
    )
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--base-port",
        type=int,
        default=int(os.environ.get("POWERCUT_BENCH_PORT", "25000")),
        help="the bench lab's first port (default $POWERCUT_BENCH_PORT or 25000; a lab takes 1000)",
    )
    ap.add_argument(
        "--protocols",
        default="mixed,redfish,ipmi",
        help="mixed (each node's primary BMC), redfish, ipmi (default: all three)",
    )
    args = ap.parse_args()
    if args.worker:
        return worker(args.inventory, args.count)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    with tempfile.TemporaryDirectory(prefix="powercut-cut-bench-") as tmp:
        state = Path(tmp) / "state"
        inventory_path = args.inventory
        started = False
        try:
            if inventory_path is None:
                inventory_path = Path(tmp) / "inv.yaml"
                shape = (
                    ["--racks", "1", "--workers-per-rack", str(max(sizes))]
                    if sizes
                    else ["--racks", "2", "--workers-per-rack", "5"]
                )
                print(f"bringing a lab up ({' '.join(shape)}) on port {args.base_port}...")
                t0 = time.monotonic()
                powercut(
                    "lab", "up", *shape,
                    "--control-planes", "1", "--base-port", str(args.base_port),
                    "--state-dir", str(state), "--inventory-out", str(inventory_path),
                )  # fmt: skip
                started = True
                print(f"  up in {time.monotonic() - t0:.1f} s")
            if sizes:
                status = sizes_run(args, inventory_path) if args.rounds else 0
                if args.profile and started:
                    profile(
                        inventory_path,
                        state / "logs" / "supervisor.log",
                        args.profile,
                        args.protocols.split(","),
                    )
                return status
            inventory = load_inventory(inventory_path)
            nodes = [n for n in args.nodes.split(",") if n] or [
                n.name for n in inventory.nodes_by_role("worker")
            ][: args.count]
            inventory = roomy(inventory, len(nodes))
            return run(inventory, nodes, args.rounds, args.protocols.split(","))
        finally:
            if started:
                powercut("lab", "down", "--state-dir", str(state))


def run(inventory: Inventory, nodes: list[str], rounds: int, protocols: list[str]) -> int:
    print(f"cutting {len(nodes)} nodes at once ({', '.join(nodes)}), {rounds} rounds per way")
    print(
        f"{'protocol':9} {'way':13} {'skew p50':>9} {'skew max':>9} {'sent spread':>12} "
        f"{'req->ack p50':>13} {'req->ack max':>13} {'confirm skew':>13}   (ms)"
    )
    ok = True
    for proto in protocols:
        protocol = None if proto == "mixed" else proto
        figures: dict[bool, tuple[list[float], list[float], list[float], list[float]]] = {}
        for _ in range(rounds):
            for sync in (False, True):  # side by side, alternating, in the same run
                result = cut(inventory, nodes, protocol, sync)
                skews, spreads, acks, confirms = figures.setdefault(sync, ([], [], [], []))
                done = list(result.confirmed.values())
                confirms.append(max(done) - min(done) if len(done) > 1 else 0.0)
                skews.append(result.skew_s)
                spreads.append(result.sent_spread_s)
                acks.extend(result.request_to_ack_s.values())
                time.sleep(0.5)
        for sync in (False, True):
            skews, spreads, acks, confirms = figures[sync]
            way = "synchronized" if sync else "sequential"
            print(
                f"{proto:9} {way:13} {ms(statistics.median(skews)):>9} {ms(max(skews)):>9} "
                f"{ms(statistics.median(spreads)):>12} {ms(statistics.median(acks)):>13} "
                f"{ms(max(acks)):>13} {ms(statistics.median(confirms)):>13}"
            )
        seq_skew, sync_skew = (
            statistics.median(figures[False][0]),
            statistics.median(figures[True][0]),
        )
        seq_ack = statistics.median(figures[False][2])
        sync_ack = statistics.median(figures[True][2])
        skew_ratio = seq_skew / max(sync_skew, 1e-6)
        ack_ratio = seq_ack / max(sync_ack, 1e-6)
        print(
            f"{proto:9} ratio sequential/synchronized: skew {skew_ratio:.1f}x, "
            f"request->ack {ack_ratio:.1f}x"
        )
        skew_ok = sync_skew <= SKEW_TARGET_S
        ack_ok = sync_ack <= ACK_TARGET_S
        print(
            f"{proto:9} target: skew {ms(sync_skew).strip()} ms <= {SKEW_TARGET_S * 1000:.0f} ms "
            f"({sync_skew / SKEW_TARGET_S:.2f}) {'ok' if skew_ok else 'MISSED'}; request->ack "
            f"{ms(sync_ack).strip()} ms <= {ACK_TARGET_S * 1000:.0f} ms "
            f"({sync_ack / ACK_TARGET_S:.2f}) {'ok' if ack_ok else 'MISSED'}"
        )
        ok = ok and skew_ok and ack_ok
        cycle_row(inventory, nodes, protocol, proto, rounds)
    return 0 if ok else 1


def cycle_row(
    inventory: Inventory, nodes: list[str], protocol: str | None, proto: str, rounds: int
) -> None:
    ends: list[float] = []
    offs: list[float] = []
    ons: list[float] = []
    for _ in range(rounds):
        for sync in (False, True):  # side by side, alternating
            result = cycle(inventory, nodes, protocol, sync)
            if sync:
                offs.append(result.phases["off"].skew_s)
                ons.append(result.phases["on"].skew_s)
            else:
                ends.append(result.skew_s)
            time.sleep(0.5)
    off_p50, on_p50 = statistics.median(offs), statistics.median(ons)
    print(
        f"{proto:9} cycle sequential: skew of the cycles' ends p50 "
        f"{ms(statistics.median(ends)).strip()} max {ms(max(ends)).strip()} ms | synchronized: "
        f"off skew p50 {ms(off_p50).strip()} max {ms(max(offs)).strip()} ms, on skew p50 "
        f"{ms(on_p50).strip()} max {ms(max(ons)).strip()} ms (information: "
        f"{'ok' if max(off_p50, on_p50) <= SKEW_TARGET_S else 'above'} "
        f"{SKEW_TARGET_S * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    sys.exit(main())
