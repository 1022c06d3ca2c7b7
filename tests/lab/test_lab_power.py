"""Power semantics through each real protocol against the lab.

For each of IPMI (pyipmi), Redfish (sushy) and SSH (paramiko): power off the worker that
hosts the singleton ``registry`` (and, by its pod affinity, a ``quorum`` member), then see
what a dead kubelet causes in a real control plane, and power it back on.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from harness.errors import PermanentError
from harness.lab.spec import Timings
from harness.power.base import PowerState
from harness.power.factory import driver_for
from tests.lab.conftest import LabHandle, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.disruptive, pytest.mark.needs_bmc, pytest.mark.slow]
NS = "lab"


def pods(lab: LabHandle, app: str) -> list[dict[str, Any]]:
    items, _ = lab.client.list(f"/api/v1/namespaces/{NS}/pods", labelSelector=f"app={app}")
    return items


def ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def node_ready(lab: LabHandle, name: str) -> str:
    node = lab.client.get(f"/api/v1/nodes/{name}")
    for c in node["status"]["conditions"]:
        if c["type"] == "Ready":
            return str(c["status"])
    return "missing"


def taints(lab: LabHandle, name: str) -> set[str]:
    node = lab.client.get(f"/api/v1/nodes/{name}")
    return {f"{t['key']}:{t['effect']}" for t in node["spec"].get("taints") or []}


def steady(lab: LabHandle) -> bool:
    nodes, _ = lab.client.list("/api/v1/nodes")
    if not all(
        any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
        for n in nodes
    ):
        return False
    want = {"web": 3, "quorum": 3, "registry": 1}
    for app, n in want.items():
        ps = pods(lab, app)
        if len(ps) != n or not all(
            ready(p) and not p["metadata"].get("deletionTimestamp") for p in ps
        ):
            return False
    vas, _ = lab.client.list("/apis/storage.k8s.io/v1/volumeattachments")
    return len(vas) == 4 and all((v.get("status") or {}).get("attached") for v in vas)


def agent_pid(lab: LabHandle, node: str) -> int | None:
    state = json.loads((lab.state_dir / "state.json").read_text())
    pid = state["components"][f"kwok-{node}"]["pid"]
    return int(pid) if pid else None


def attachment_of(lab: LabHandle, pvc: str) -> list[tuple[str, bool]]:
    pv = lab.client.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{pvc}")["spec"][
        "volumeName"
    ]
    vas, _ = lab.client.list("/apis/storage.k8s.io/v1/volumeattachments")
    return [
        (v["spec"]["nodeName"], bool((v.get("status") or {}).get("attached")))
        for v in vas
        if v["spec"]["source"].get("persistentVolumeName") == pv
    ]


def health(lab: LabHandle, app: str) -> int:
    """What the Service's HTTP health endpoint answers, as a client would see it."""
    (w,) = [w for w in lab.inventory.workloads if w.name == app]
    assert w.health is not None and w.health.http
    try:
        with urllib.request.urlopen(w.health.http, timeout=3) as r:  # noqa: S310 (loopback)
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def claim_of(pod: dict[str, Any]) -> str:
    (claim,) = [
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"].get("volumes") or []
        if v.get("persistentVolumeClaim")
    ]
    return str(claim)


@pytest.mark.parametrize("protocol", ["ipmi", "redfish", "ssh"])
def test_power_loss_through(lab: LabHandle, protocol: str) -> None:
    t = Timings.named(lab.inventory.timings or "fast")
    wait_for("the lab in steady state", lambda: steady(lab), 120)
    (registry,) = pods(lab, "registry")
    victim = registry["spec"]["nodeName"]
    (member,) = [p for p in pods(lab, "quorum") if p["spec"]["nodeName"] == victim]
    member_claim = claim_of(member)
    web_on_victim = {
        p["metadata"]["uid"] for p in pods(lab, "web") if p["spec"]["nodeName"] == victim
    }
    assert health(lab, "registry") == 200, "the registry Service must be healthy before"
    node = lab.inventory.node(victim)
    driver = driver_for(node, protocol, timeout_s=30)
    # Power comes back through the node's BMC: SSH can cut power but not restore it.
    bmc = driver if protocol != "ssh" else driver_for(node, None, timeout_s=30)
    try:
        assert driver.state() is PowerState.ON
        t0 = time.monotonic()
        driver.off(graceful=(protocol == "ssh"))
        assert bmc.state() is PowerState.OFF
        if protocol != "ssh":
            assert driver.state() is PowerState.OFF

        wait_for(
            f"{victim} not Ready",
            lambda: node_ready(lab, victim) == "Unknown",
            t.node_monitor_grace_s + 15,
        )
        not_ready_s = time.monotonic() - t0
        assert not_ready_s >= t.node_monitor_grace_s - 3, "NotReady before the grace period ran out"
        wait_for(
            "the unreachable NoExecute taint",
            lambda: "node.kubernetes.io/unreachable:NoExecute" in taints(lab, victim),
            15,
        )
        t_taint = time.monotonic()
        # The node lifecycle controller marks the pods NotReady: the Service loses its only
        # endpoint and a client of its health endpoint sees 503 until a replacement is Ready.
        wait_for(
            "the registry health endpoint answering 503", lambda: health(lab, "registry") == 503, 15
        )

        def evicted() -> bool:
            p = lab.client.get(f"/api/v1/namespaces/{NS}/pods/{registry['metadata']['name']}")
            return bool(p["metadata"].get("deletionTimestamp"))

        wait_for("the registry pod Terminating", evicted, t.toleration_s + 20)
        assert time.monotonic() - t_taint >= t.toleration_s - 3, "evicted before its toleration"

        def replaced() -> dict[str, Any] | None:
            for p in pods(lab, "registry"):
                if p["spec"].get("nodeName") not in (None, victim):
                    return p
            return None

        replacement = wait_for("a registry replacement scheduled on another node", replaced, 30)

        def multi_attach() -> bool:
            evs, _ = lab.client.list(
                f"/api/v1/namespaces/{NS}/events",
                fieldSelector=f"involvedObject.name={replacement['metadata']['name']},reason=FailedAttachVolume",
            )
            return any("Multi-Attach error" in e.get("message", "") for e in evs)

        wait_for("a Multi-Attach event for the replacement", multi_attach, 30)
        assert attachment_of(lab, "registry-data") == [(victim, True)], (
            "RWO volume left the dead node"
        )
        assert attachment_of(lab, member_claim) == [(victim, True)], (
            "the quorum member's RWO volume left the dead node"
        )
        # Like a kubelet, the lab keeps the replacement out of Ready while its volume is
        # held by the dead node: the singleton's service stays down.
        rep = lab.client.get(f"/api/v1/namespaces/{NS}/pods/{replacement['metadata']['name']}")
        assert not ready(rep), "the replacement is Ready without its volume"
        assert health(lab, "registry") == 503, "the registry answers without its volume"
        if web_on_victim:
            # Deployment pods on the dead node are evicted and replaced elsewhere.
            def web_moved() -> bool:
                ps = pods(lab, "web")
                gone = all(
                    p["metadata"].get("deletionTimestamp")
                    for p in ps
                    if p["metadata"]["uid"] in web_on_victim
                )
                live = [
                    p
                    for p in ps
                    if p["spec"].get("nodeName") not in (None, victim)
                    and ready(p)
                    and not p["metadata"].get("deletionTimestamp")
                ]
                return gone and len(live) == 3

            wait_for("the web pods of the dead node replaced elsewhere", web_moved, 30)

        m = lab.client.get(f"/api/v1/namespaces/{NS}/pods/{member['metadata']['name']}")
        assert m["metadata"].get("deletionTimestamp"), "quorum member was not evicted"
        assert m["spec"]["nodeName"] == victim and m["metadata"]["uid"] == member["metadata"]["uid"]
        old = lab.client.get(f"/api/v1/namespaces/{NS}/pods/{registry['metadata']['name']}")
        assert old["metadata"]["uid"] == registry["metadata"]["uid"], "stuck pod must still exist"

        if protocol == "ssh":
            with pytest.raises(PermanentError, match="cannot restore"):
                driver.on()
        bmc.on()
        if protocol == "ssh":
            # The node's own OS answers SSH only once it has booted (fast timings: 15 s).
            wait_for(
                f"{victim} booted (SSH answers)",
                lambda: driver.state() is PowerState.ON,
                t.boot_s + 15,
            )
        else:
            assert driver.state() is PowerState.ON  # a BMC reads On at once (the server POSTs)
        # after its boot (fast timings: 15 s)
        wait_for(f"{victim} Ready again", lambda: node_ready(lab, victim) == "True", t.boot_s + 30)

        def finalised() -> bool:
            names = {p["metadata"]["uid"] for p in pods(lab, "registry") + pods(lab, "quorum")}
            return (
                registry["metadata"]["uid"] not in names and member["metadata"]["uid"] not in names
            )

        wait_for("the stuck pods finalised", finalised, 30)
        wait_for(
            "the volume attached to the replacement's node",
            lambda: (
                attachment_of(lab, "registry-data") == [(replacement["spec"]["nodeName"], True)]
            ),
            60,
        )
        wait_for(
            "the registry health endpoint answering 200 again",
            lambda: health(lab, "registry") == 200,
            30,
        )
        wait_for("the lab back in steady state", lambda: steady(lab), 60)
    finally:
        if bmc.state() is not PowerState.ON:
            bmc.on()
        driver.close()
        if bmc is not driver:
            bmc.close()


def test_state_agrees_across_protocols_and_cycle_works(lab: LabHandle) -> None:
    """Redfish and IPMI read the same switch; SSH (the node's own OS) answers once the node
    booted; graceful off, power cycle and reboot act, the node's agent starting after its
    boot time."""
    node = lab.inventory.node("w-c2")
    boot_s = Timings.named("fast").boot_s
    drivers = {p: driver_for(node, p, timeout_s=60) for p in ("ipmi", "redfish", "ssh")}
    try:
        assert {p: d.state() for p, d in drivers.items()} == dict.fromkeys(drivers, PowerState.ON)
        drivers["redfish"].off(graceful=True)
        assert {p: d.state() for p, d in drivers.items()} == dict.fromkeys(drivers, PowerState.OFF)
        drivers["ipmi"].on()
        # On at once to both BMCs (a server in POST); its OS answers SSH once booted.
        assert drivers["redfish"].state() is drivers["ipmi"].state() is PowerState.ON
        assert drivers["ssh"].state() is PowerState.OFF
        wait_for(
            "w-c2 booted (SSH answers)",
            lambda: drivers["ssh"].state() is PowerState.ON,
            boot_s + 15,
        )
        for protocol in ("ipmi", "redfish", "ssh"):
            before = agent_pid(lab, "w-c2")
            drivers[protocol].cycle()
            assert drivers["ipmi"].state() is PowerState.ON
            # A power cycle restarts the node: its agent is a new process once it booted.
            after = wait_for(
                f"{protocol} cycle to restart w-c2's agent",
                functools.partial(
                    lambda before: (pid := agent_pid(lab, "w-c2")) not in (None, before) and pid,
                    before,
                ),
                timeout_s=boot_s + 15,
            )
            assert after is not None and after != before, f"{protocol} cycle did not restart it"
        wait_for("w-c2 Ready", lambda: node_ready(lab, "w-c2") == "True", 60)
    finally:
        if drivers["ipmi"].state() is not PowerState.ON:
            drivers["ipmi"].on()
        for d in drivers.values():
            d.close()


def test_a_reboot_makes_the_node_notready_and_ready_again(lab: LabHandle) -> None:
    """A BMC reset (off and on again at once) of a lab node: the BMC reads On at once, the
    node boots (fast timings: 15 s, past the 12 s grace period), so Kubernetes sees it
    NotReady, then Ready again once its kubelet reports."""
    node = "w-b3"
    boot_s = Timings.named("fast").boot_s
    wait_for(f"{node} Ready", lambda: node_ready(lab, node) == "True", 60)
    bmc = driver_for(lab.inventory.node(node), "redfish", timeout_s=30)
    try:
        t0 = time.monotonic()
        bmc.cycle()
        acked = time.monotonic() - t0
        assert bmc.state() is PowerState.ON
        wait_for(
            f"{node} NotReady",
            lambda: node_ready(lab, node) in ("False", "Unknown"),
            boot_s + 10,
            every_s=0.5,
        )
        not_ready = time.monotonic() - t0
        wait_for(
            f"{node} Ready again", lambda: node_ready(lab, node) == "True", boot_s + 60, every_s=0.5
        )
        back = time.monotonic() - t0
        print(
            f"reboot of {node}: acknowledged {acked:.1f}s, NotReady {not_ready:.1f}s, "
            f"Ready {back:.1f}s after the request"
        )
        assert back >= boot_s  # not before its kubelet could run
    finally:
        if bmc.state() is not PowerState.ON:
            bmc.on()
        bmc.close()


def test_a_node_agent_that_crashes_while_powered_on_is_restarted(lab: LabHandle) -> None:
    """kwok 0.8.0 sometimes dies at start (a race in its CEL setup): the supervisor restarts
    whatever crashed on a node that is on, as a kubelet restarts a crashed static pod."""
    node = "w-c3"
    state_file = lab.state_dir / "state.json"

    def component() -> dict[str, Any]:
        return dict(json.loads(state_file.read_text())["components"][f"kwok-{node}"])

    before = component()
    assert before["state"] == "running" and before["pid"]
    os.kill(before["pid"], signal.SIGKILL)  # the lab's own process, started by its supervisor
    after = wait_for(
        f"kwok-{node} restarted",
        lambda: (c := component())["state"] == "running" and c["pid"] != before["pid"] and c,
        timeout_s=20,
    )
    assert after["pid"] != before["pid"]
    log_text = (lab.state_dir / "logs" / "supervisor.log").read_text()
    assert f"kwok-{node} exited -9, restarting it (1 of 5)" in log_text
    wait_for(
        f"{node} Ready",
        lambda: any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in lab.client.get(f"/api/v1/nodes/{node}")["status"]["conditions"]
        ),
        timeout_s=30,
    )
