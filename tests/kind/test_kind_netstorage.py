"""kind's storage network without a cluster (marker kind: it needs the Docker engine): the
storage server container of ``kind up --storage csi`` (:mod:`harness.kindlab.netstorage`:
OpenSSH's sshd, SFTP only) on a Docker network of the test's own, and a "node" container
that mounts a volume from it with sshfs exactly as the CSI node plugin does (the host key
checked, the plugin's keep-alive). The kind driver's own storage cut (``docker exec`` into
the node: the firewall chain of :mod:`harness.power.storage_cut`) then blocks the mount's
I/O and nothing else, and its heal gives it back.

The node containers of a kind cluster run systemd; this one does not, so ``systemd-run``
is a stand-in that records the heal the cut arms (which the test then runs, as the timer
would).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.kindlab import netstorage
from harness.kindlab.spec import KindSpec
from harness.power import storage_cut
from harness.power.kind import STORAGE_STATE, KindDriver
from harness.power.storage_cut import parse_endpoint
from tests.kind.conftest import NETWORK, docker, wait_for

pytestmark = [pytest.mark.kind, pytest.mark.slow]
NAME = os.environ.get("POWERCUT_TEST_KIND_NAME", "pctest") + "-ns"
NET = NETWORK + "-ns"


def _say(msg: str) -> None:
    print(msg, flush=True)


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[tuple[KindSpec, str, str]]:
    """(spec, the server's address, the node container) on a network of the test's own."""
    spec = KindSpec(state_dir=str(tmp_path / "state"), name=NAME, network=NET)
    spec.root.mkdir(parents=True)
    spec.shared_storage.mkdir()
    (spec.shared_storage / "volumes" / "pvc-1").mkdir(parents=True)
    netstorage.ensure_base_image(_say)
    node = f"{NAME}-node"
    stub = tmp_path / "systemd-run"
    stub.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > /tmp/armed\n')
    stub.chmod(0o755)
    subprocess.run(["docker", "network", "create", NET], capture_output=True, check=False)
    try:
        addr = netstorage.start(spec, _say)
        keys = netstorage.key_dir(spec)
        docker(
            "run", "-d", "--name", node, "--network", NET, "--cap-add", "SYS_ADMIN",
            "--cap-add", "NET_ADMIN", "--device", "/dev/fuse",
            "--security-opt", "apparmor=unconfined",
            "-v", f"{keys}/id_ed25519:{netstorage.SSH_DIR}/id_ed25519:ro",
            "-v", f"{keys}/known_hosts:{netstorage.SSH_DIR}/known_hosts:ro",
            "-v", f"{stub}:/usr/local/bin/systemd-run:ro",
            netstorage.BASE_IMAGE, "sleep", "infinity",
        )  # fmt: skip
        yield spec, addr, node
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            docker("rm", "-f", "-v", node)
        netstorage.remove(NAME)
        subprocess.run(["docker", "network", "rm", NET], capture_output=True, check=False)


def _sshfs(addr: str) -> list[str]:
    """The CSI node plugin's sshfs command line (harness/kindlab/csi/main.go sshfsArgs)."""
    d = netstorage.SSH_DIR
    opts = [
        f"IdentityFile={d}/id_ed25519", f"UserKnownHostsFile={d}/known_hosts",
        "StrictHostKeyChecking=yes", "BatchMode=yes", "ConnectTimeout=10",
        f"ServerAliveInterval={netstorage.ALIVE_INTERVAL_S}",
        f"ServerAliveCountMax={netstorage.ALIVE_COUNT}", "allow_other",
    ]  # fmt: skip
    args = ["sshfs", f"{netstorage.sshfs_source(addr)}/pvc-1", "/mnt/vol"]
    for o in opts:
        args += ["-o", o]
    return args


def _write(node: str, name: str, text: str, timeout_s: float) -> tuple[str, float]:
    t0 = time.monotonic()
    try:
        out = subprocess.run(
            ["docker", "exec", node, "/bin/sh", "-c", f"echo {text} > /mnt/vol/{name} && sync"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "hung", time.monotonic() - t0
    return ("ok" if out.returncode == 0 else f"error: {out.stderr.strip()}"), time.monotonic() - t0


def test_the_kind_drivers_storage_cut_blocks_the_volumes_io_only(
    storage: tuple[KindSpec, str, str],
) -> None:
    spec, addr, node = storage
    docker("exec", node, "mkdir", "-p", "/mnt/vol")
    docker("exec", node, *_sshfs(addr))
    assert _write(node, "token", "before-the-cut", 30)[0] == "ok"
    assert (spec.shared_storage / "volumes" / "pvc-1" / "token").read_text() == "before-the-cut\n"

    driver = KindDriver(node, timeout_s=60)
    t_cut = time.monotonic()
    driver.cut_storage(node, [parse_endpoint(f"{addr}:{netstorage.PORT}")], heal_after_s=120)
    assert driver.storage_cut()
    armed = docker("exec", node, "cat", "/tmp/armed").splitlines()
    assert armed[:3] == ["--collect", f"--unit={storage_cut.HEAL_UNIT}", "--on-active=120"]

    # the node's other traffic goes on: the server's address on another port is still
    # reached (a refused connection is an answer; a dropped one would time out)
    probe = "exec 3<>/dev/tcp/{}/{} && echo open || echo closed"
    other = subprocess.run(
        ["docker", "exec", node, "timeout", "5", "bash", "-c", probe.format(addr, 2049)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert "No route" not in other.stderr and other.returncode != 124, other
    assert "Connection refused" in other.stderr, other.stderr

    outcome, seconds = _write(node, "during", "during-the-cut", 60)
    print(
        f"\nwrite during the cut: {outcome} after {seconds:.1f}s "
        f"({time.monotonic() - t_cut:.1f}s after the cut)"
    )
    assert outcome != "ok", "a write went through a cut storage network"
    assert seconds >= 1.0
    assert not (spec.shared_storage / "volumes" / "pvc-1" / "during").exists()

    driver.heal_storage(node)
    assert not driver.storage_cut()
    assert "POWERCUT" not in docker("exec", node, "iptables", "-w", "-S")
    assert docker("exec", node, "/bin/sh", "-c", STORAGE_STATE).strip() == "open"
    # sshfs gave up on the cut mount (it is gone or dead); a fresh mount (a
    # replacement's) reads the data written before the cut
    docker("exec", node, "/bin/sh", "-c", "umount -l /mnt/vol 2>/dev/null; true")
    docker("exec", node, *_sshfs(addr))
    wait_for(
        "the token read back over a fresh mount",
        lambda: docker("exec", node, "cat", "/mnt/vol/token").strip() == "before-the-cut",
        30,
    )
