"""The storage-network cut for real, on this machine: two network namespaces of the test's
own joined by a veth pair, a real OpenSSH sshd serving a directory in the "storage" one, a
real sshfs (FUSE over SSH) mount from the "node" one, and the exact command the SSH driver
sends (:func:`harness.power.storage_cut.cut_command`) run in the node's namespace.

It shows what the failure kind promises: a write to the volume made before the cut is on
the storage; during the cut a write hangs and then fails (measured); the node's other
traffic (a TCP service on another address) goes on; the heal the cut armed first (what the
transient timer would run: ``systemd-run`` is a stand-in here that records it) gives the
storage back; ``COMMAND_HEAL`` is idempotent.

Needs root, iptables, iproute2, sshfs and sshd (Debian ``sshfs``, ``openssh-server``:
``scripts/bootstrap.sh`` installs them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.kindlab.netstorage import _keypair
from harness.power import storage_cut
from harness.power.storage_cut import cut_command, parse_endpoint
from tests.polling import poll_until

SSHD = "/usr/sbin/sshd"
NEEDS = ("iptables", "ip", "nsenter", "sshfs")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0
    or any(shutil.which(t) is None for t in NEEDS)
    or not os.access(SSHD, os.X_OK)
    or not os.path.exists("/dev/fuse"),
    reason="needs root, /dev/fuse, iptables, iproute2, nsenter, sshfs and sshd "
    "(scripts/bootstrap.sh installs sshfs and openssh-server)",
)

STORAGE_IP, API_IP, NODE_IP = "10.213.0.1", "10.213.0.3", "10.213.0.2"
SSH_PORT, API_PORT = 2222, 6443


@dataclass
class Net:
    node: str  # network namespace names
    storage: str
    tmp: Path

    def in_node(self, *args: str, timeout: float = 20, env: dict[str, str] | None = None) -> str:
        out = subprocess.run(
            ["nsenter", f"--net=/run/netns/{self.node}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
        assert out.returncode == 0, f"{args}: {out.stdout}{out.stderr}"
        return out.stdout


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Net]:
    tag = f"{os.getpid() % 100000}"
    node, storage = f"storage-n{tag}", f"storage-s{tag}"
    veth_n, veth_s = f"stn{tag}", f"sts{tag}"
    _ip("netns", "add", node)
    _ip("netns", "add", storage)
    try:
        _ip("link", "add", veth_n, "netns", node, "type", "veth", "peer", veth_s, "netns", storage)
        for ns, dev, addrs in (
            (node, veth_n, [NODE_IP]),
            (storage, veth_s, [STORAGE_IP, API_IP]),
        ):
            for a in addrs:
                _ip("-n", ns, "addr", "add", f"{a}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield Net(node, storage, tmp_path)
    finally:
        subprocess.run(["ip", "netns", "del", node], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", storage], capture_output=True, check=False)


def _spawn(ns: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{ns}", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.fixture
def served(net: Net) -> Iterator[tuple[Path, Path]]:
    """sshd (SFTP only) serving ``export`` in the storage namespace, a TCP service on the
    other address, and an sshfs mount of ``export`` at ``mnt`` from the node's namespace."""
    keys = net.tmp / "keys"
    keys.mkdir(mode=0o700)
    export, mnt = net.tmp / "export", net.tmp / "mnt"
    export.mkdir()
    mnt.mkdir()
    for name in ("host", "client"):
        private, public = _keypair()
        (keys / name).touch(mode=0o600)
        (keys / name).write_bytes(private)
        (keys / f"{name}.pub").write_text(public + "\n")
    (keys / "authorized_keys").write_text((keys / "client.pub").read_text())
    host = (keys / "host.pub").read_text().split()
    (keys / "known_hosts").write_text(f"[{STORAGE_IP}]:{SSH_PORT} {host[0]} {host[1]}\n")
    (keys / "sshd_config").write_text(
        f"Port {SSH_PORT}\nListenAddress {STORAGE_IP}\nHostKey {keys}/host\n"
        f"AuthorizedKeysFile {keys}/authorized_keys\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        f"StrictModes no\nPidFile {keys}/sshd.pid\n"
        "Subsystem sftp internal-sftp\nForceCommand internal-sftp\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    procs = [
        _spawn(net.storage, SSHD, "-D", "-e", "-f", str(keys / "sshd_config")),
        _spawn(
            net.storage,
            sys.executable,
            "-c",
            "import socket\n"
            f"s=socket.create_server(('{API_IP}',{API_PORT}))\n"
            "while True:\n c,_=s.accept(); c.sendall(b'api\\n'); c.close()\n",
        ),
    ]
    mounted = False
    try:
        poll_until("sshd to listen", lambda: _answers(net, STORAGE_IP, SSH_PORT), 20, 0.2)
        net.in_node(
            "sshfs", f"root@{STORAGE_IP}:{export}", str(mnt), "-p", str(SSH_PORT),
            "-o", f"IdentityFile={keys}/client", "-o", f"UserKnownHostsFile={keys}/known_hosts",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
            "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=2",
        )  # fmt: skip
        mounted = True
        yield export, mnt
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)
        for p in procs:
            p.kill()
            p.wait(timeout=10)


def _answers(net: Net, ip: str, port: int) -> bool:
    code = (
        f"import socket\ntry:\n socket.create_connection(('{ip}',{port}),timeout=1).close()\n"
        " print('yes')\nexcept OSError:\n print('no')\n"
    )
    return net.in_node(sys.executable, "-c", code).strip() == "yes"


def _write(path: Path, text: str, timeout_s: float) -> tuple[str, float]:
    """Write and fsync ``text`` at ``path`` in a child process (a write into a cut mount
    blocks in the kernel); ("ok" | "error: ..." | "hung", seconds)."""
    code = (
        "import os,sys\n"
        "try:\n"
        f" fd=os.open({str(path)!r},os.O_CREAT|os.O_WRONLY|os.O_TRUNC,0o644)\n"
        f" os.write(fd,{text!r}.encode()); os.fsync(fd); os.close(fd); print('ok')\n"
        "except OSError as e:\n print('error: '+e.strerror)\n"
    )
    t0 = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return "hung", time.monotonic() - t0
    return out.strip(), time.monotonic() - t0


def test_a_storage_cut_blocks_the_mounts_io_and_nothing_else(
    net: Net, served: tuple[Path, Path]
) -> None:
    export, mnt = served
    assert _write(mnt / "before", "token-1", 20)[0] == "ok"
    assert (export / "before").read_text() == "token-1"

    stub = net.tmp / "bin"
    stub.mkdir()
    armed = net.tmp / "armed"
    (stub / "systemd-run").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {armed}\n')
    (stub / "systemd-run").chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}"}
    command = cut_command([parse_endpoint(f"{STORAGE_IP}:{SSH_PORT}")], 60)
    net.in_node("/bin/sh", "-c", command, env=env)
    t_cut = time.monotonic()
    assert net.in_node("/bin/sh", "-c", storage_cut.COMMAND_STATE).strip() == "cut"
    # the heal was armed before the cut, for the seconds asked
    recorded = armed.read_text().splitlines()
    assert recorded[:3] == ["--collect", f"--unit={storage_cut.HEAL_UNIT}", "--on-active=60"], (
        recorded
    )

    # the node's other traffic goes on: another address of the same peer answers
    assert _answers(net, API_IP, API_PORT)
    assert not _answers(net, STORAGE_IP, SSH_PORT)

    # I/O on the volume hangs, then fails once sshfs's keep-alive gives up
    outcome, seconds = _write(mnt / "during", "token-2", 30)
    assert outcome != "ok", "a write went through a cut storage network"
    print(f"\nwrite during the cut: {outcome} after {seconds:.1f}s "
          f"({time.monotonic() - t_cut:.1f}s after the cut)")  # fmt: skip
    assert seconds >= 1.0, f"the write failed at once ({outcome}), not after hanging"
    assert not (export / "during").exists()

    # what the armed timer runs heals it (the storage answers again), and COMMAND_HEAL
    # after it is a no-op
    assert recorded[3:5] == ["/bin/sh", "-c"]
    net.in_node("/bin/sh", "-c", recorded[5])
    assert net.in_node("/bin/sh", "-c", storage_cut.COMMAND_STATE).strip() == "open"
    assert _answers(net, STORAGE_IP, SSH_PORT)
    net.in_node("/bin/sh", "-c", storage_cut.COMMAND_HEAL)
    assert "POWERCUT" not in net.in_node("iptables", "-w", "-S")
    # the data written before the cut is intact on the storage
    assert (export / "before").read_text() == "token-1"
