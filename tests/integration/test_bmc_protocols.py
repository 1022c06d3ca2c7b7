"""The lab's BMC servers against the harness's power drivers, over the real protocols.

Every test starts its own servers on 127.0.0.1 (free ports) with in-memory targets, drives
them with the real drivers (pyipmi + ipmitool / native RMCP+, sushy over HTTPS, paramiko),
checks the target's state and the calls it received, and stops the servers and closes the
drivers when the fixtures that made them end. No Kubernetes, no lab cluster.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.error
import urllib.request
from base64 import b64encode
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

import paramiko
import pytest

from harness.errors import PermanentError, WaitTimeout
from harness.failures import FailureKind, strategy, supports
from harness.lab.bmc.creds import (
    LabCredentials,
    ensure_lab_credentials,
    ensure_ssh_keypair,
    ensure_tls,
    known_hosts_line,
)
from harness.lab.bmc.ipmi import IpmiServer
from harness.lab.bmc.redfish import MIN_THREADS, RedfishServer
from harness.lab.bmc.ssh import SshServer
from harness.lab.bmc.target import MemoryTarget, PowerCall, system_uuid
from harness.lab.machines import LabError
from harness.power.base import (
    NothingToDo,
    PowerDriver,
    PowerState,
    prepare_off,
)
from harness.power.ipmi import IpmiDriver
from harness.power.redfish import RedfishDriver
from harness.power.ssh import SshDriver
from harness.power.volley import SplitPower, Volley

pytestmark = pytest.mark.timeout(30)

FAST: dict[str, Any] = {"timeout_s": 10.0, "poll_s": 0.05}
D = TypeVar("D", bound=PowerDriver)

OFF_GRACEFUL = PowerCall("off", True)
OFF_FORCED = PowerCall("off", False)
ON = PowerCall("on")
RESET = PowerCall("reset")


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def creds(tmp_path_factory: pytest.TempPathFactory) -> LabCredentials:
    return ensure_lab_credentials(tmp_path_factory.mktemp("creds"), username="admin")


@pytest.fixture
def node_a() -> MemoryTarget:
    return MemoryTarget("node-a", PowerState.ON)


@pytest.fixture
def node_b() -> MemoryTarget:
    return MemoryTarget("node-b", PowerState.OFF)


@pytest.fixture
def drivers() -> Iterator[Callable[[D], D]]:
    """Register a driver to be closed after the test."""
    opened: list[PowerDriver] = []

    def track(driver: D) -> D:
        opened.append(driver)
        return driver

    try:
        yield track
    finally:
        for driver in opened:
            driver.close()


@pytest.fixture
def ipmi_server(
    node_a: MemoryTarget, node_b: MemoryTarget, creds: LabCredentials
) -> Iterator[IpmiServer]:
    with IpmiServer([node_a, node_b], "127.0.0.1", creds.username, creds.password) as server:
        yield server


@pytest.fixture
def redfish_factory(creds: LabCredentials) -> Iterator[Callable[..., RedfishServer]]:
    started: list[RedfishServer] = []

    def start(targets: list[MemoryTarget], **kwargs: Any) -> RedfishServer:
        server = RedfishServer(
            targets,
            "127.0.0.1",
            0,
            creds.username,
            creds.password,
            creds.tls_cert,
            creds.tls_key,
            **kwargs,
        )
        server.start()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def redfish_server(
    redfish_factory: Callable[..., RedfishServer], node_a: MemoryTarget, node_b: MemoryTarget
) -> RedfishServer:
    return redfish_factory([node_a, node_b])


@pytest.fixture
def ssh_server(node_a: MemoryTarget, creds: LabCredentials) -> Iterator[SshServer]:
    with SshServer(
        node_a, "127.0.0.1", 0, creds.ssh_host_key, [creds.ssh_client_public_key]
    ) as server:
        yield server


@pytest.fixture
def known_hosts(tmp_path: Path, ssh_server: SshServer, creds: LabCredentials) -> Path:
    path = tmp_path / "known_hosts"
    path.write_text(known_hosts_line("127.0.0.1", ssh_server.port, creds.ssh_host_public_key))
    return path


@pytest.fixture
def open_ipmi(
    creds: LabCredentials, drivers: Callable[[IpmiDriver], IpmiDriver]
) -> Callable[..., IpmiDriver]:
    """``open_ipmi(server, interface, node=..., password=..., **options)``: a driver for
    one of ``server``'s nodes with the lab's credentials and fast polling, closed after the
    test."""

    def open_(
        server: IpmiServer,
        interface: Literal["ipmitool", "rmcpplus"],
        *,
        node: str = "node-a",
        password: str | None = None,
        **kwargs: Any,
    ) -> IpmiDriver:
        options = {**FAST, **kwargs}
        driver = IpmiDriver(
            node,
            "127.0.0.1",
            server.port_of(node),
            creds.username,
            creds.password if password is None else password,
            interface=interface,
            **options,
        )
        return drivers(driver)

    return open_


@pytest.fixture
def open_redfish(
    creds: LabCredentials, drivers: Callable[[RedfishDriver], RedfishDriver]
) -> Callable[..., RedfishDriver]:
    """``open_redfish(server, node=..., **options)``: a driver that trusts the lab's CA and
    logs in with its credentials (unless ``verify``/``password`` say otherwise), closed
    after the test."""

    def open_(server: RedfishServer, *, node: str = "node-a", **kwargs: Any) -> RedfishDriver:
        options: dict[str, Any] = {"verify": str(creds.tls_ca_cert), **FAST, **kwargs}
        password = options.pop("password", creds.password)
        return drivers(RedfishDriver(node, server.url, creds.username, password, **options))

    return open_


@pytest.fixture
def open_ssh(
    ssh_server: SshServer,
    known_hosts: Path,
    creds: LabCredentials,
    drivers: Callable[[SshDriver], SshDriver],
) -> Callable[..., SshDriver]:
    """``open_ssh(known_hosts=..., **options)``: a driver for ``ssh_server`` that logs in
    with the lab's client key (unless ``key_file`` says otherwise) and checks the host key
    against the ``known_hosts`` fixture (or the file given), closed after the test."""

    def open_(known_hosts: Path | None = known_hosts, **kwargs: Any) -> SshDriver:
        options: dict[str, Any] = {**FAST, "probe_timeout_s": 2.0, **kwargs}
        driver = SshDriver(
            "node-a",
            "127.0.0.1",
            ssh_server.port,
            "root",
            str(options.pop("key_file", creds.ssh_client_key)),
            known_hosts=str(known_hosts) if known_hosts is not None else None,
            **options,
        )
        return drivers(driver)

    return open_


# -- helpers ----------------------------------------------------------------------------


def wait_for(condition: Callable[[], bool], timeout_s: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def assert_secret_hidden(secret: str, *texts: str) -> None:
    for text in texts:
        assert secret not in text


def redfish_post(server: RedfishServer, creds: LabCredentials, path: str, body: object) -> Any:
    context = ssl.create_default_context(cafile=str(creds.tls_ca_cert))
    token = b64encode(f"{creds.username}:{creds.password}".encode()).decode()
    request = urllib.request.Request(  # noqa: S310 (an https URL built by the test)
        server.url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:  # noqa: S310
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# -- IPMI -------------------------------------------------------------------------------

INTERFACES = pytest.mark.parametrize("interface", ["ipmitool", "rmcpplus"])


@INTERFACES
def test_ipmi_off_on_cycle_change_the_node_over_one_session(
    interface: Literal["ipmitool", "rmcpplus"],
    ipmi_server: IpmiServer,
    node_a: MemoryTarget,
    node_b: MemoryTarget,
    open_ipmi: Callable[..., IpmiDriver],
) -> None:
    driver = open_ipmi(ipmi_server, interface)

    assert driver.state() is PowerState.ON
    driver.off(graceful=True)
    assert node_a.power_state() is PowerState.OFF
    assert driver.state() is PowerState.OFF
    driver.on()
    assert node_a.power_state() is PowerState.ON
    driver.off()
    assert node_a.power_state() is PowerState.OFF
    driver.on()
    driver.cycle()
    assert node_a.power_state() is PowerState.ON
    assert driver.state() is PowerState.ON

    assert node_a.calls() == [OFF_GRACEFUL, ON, OFF_FORCED, ON, RESET]
    assert node_a.transitions == 6
    assert node_b.calls() == []
    opened, _open_now = ipmi_server.sessions()["node-a"]
    assert opened == 1, "the driver must reuse one RMCP+ session"
    driver.close()
    # The BMC forgets the session right after answering Close Session.
    assert wait_for(lambda: ipmi_server.sessions()["node-a"] == (1, 0)), "session left open"


@INTERFACES
def test_ipmi_requests_for_the_current_state_send_nothing_and_cycle_of_off_node_powers_on(
    interface: Literal["ipmitool", "rmcpplus"],
    ipmi_server: IpmiServer,
    node_b: MemoryTarget,
    open_ipmi: Callable[..., IpmiDriver],
) -> None:
    driver = open_ipmi(ipmi_server, interface, node="node-b")

    driver.off()
    assert node_b.calls() == []
    driver.cycle()
    assert node_b.calls() == [ON]
    assert node_b.power_state() is PowerState.ON


@INTERFACES
def test_ipmi_wrong_password_is_permanent_at_once_and_never_shown(
    interface: Literal["ipmitool", "rmcpplus"],
    ipmi_server: IpmiServer,
    creds: LabCredentials,
    node_a: MemoryTarget,
    open_ipmi: Callable[..., IpmiDriver],
) -> None:
    wrong = "Wr0ng-Passw0rd-XYZ"
    driver = open_ipmi(ipmi_server, interface, password=wrong)

    started = time.monotonic()
    with pytest.raises(PermanentError, match="refused the credentials") as caught:
        driver.off()
    assert time.monotonic() - started < 3
    assert node_a.calls() == []
    assert caught.value.acted is False  # the journal records it as not done: nothing owed
    assert_secret_hidden(wrong, str(caught.value), repr(caught.value), repr(driver))
    assert_secret_hidden(creds.password, repr(driver))


@INTERFACES
def test_ipmi_unreachable_bmc_ends_in_a_bounded_wait(
    interface: Literal["ipmitool", "rmcpplus"],
    creds: LabCredentials,
    drivers: Callable[[IpmiDriver], IpmiDriver],
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    driver = drivers(
        IpmiDriver(
            "node-x",
            "127.0.0.1",
            free_port,
            creds.username,
            creds.password,
            interface=interface,
            timeout_s=1.0,
            poll_s=0.1,
        )
    )

    started = time.monotonic()
    with pytest.raises(WaitTimeout) as caught:
        driver.state()
    assert caught.value.waited_s >= 1.0
    assert time.monotonic() - started < 1.0 + 5
    assert "report the power state" in caught.value.expected
    assert_secret_hidden(creds.password, str(caught.value))


def test_ipmi_servers_stop_and_start_again_in_process(
    node_a: MemoryTarget, creds: LabCredentials, open_ipmi: Callable[..., IpmiDriver]
) -> None:
    for _ in range(2):
        server = IpmiServer({0: node_a}, "127.0.0.1", creds.username, creds.password)
        server.start()
        try:
            port = server.port_of("node-a")
            driver = open_ipmi(server, "rmcpplus")
            assert driver.state() is PowerState.ON
            driver.close()
        finally:
            server.stop()
        # The port is free again: stop() closed the socket.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:
            again.bind(("127.0.0.1", port))


# -- Redfish ----------------------------------------------------------------------------


def test_redfish_off_on_cycle_over_verified_https(
    redfish_server: RedfishServer,
    node_a: MemoryTarget,
    node_b: MemoryTarget,
    open_redfish: Callable[..., RedfishDriver],
) -> None:
    driver = open_redfish(redfish_server)

    assert driver.state() is PowerState.ON
    driver.off(graceful=True)
    assert node_a.power_state() is PowerState.OFF
    driver.on()
    driver.off()
    driver.on()
    driver.cycle()
    assert driver.state() is PowerState.ON

    assert node_a.calls() == [OFF_GRACEFUL, ON, OFF_FORCED, ON, RESET]
    assert node_b.calls() == [], "the driver found node-a's system by name among two"


def test_redfish_idle_connections_beyond_its_threads_do_not_hold_up_a_request(
    redfish_server: RedfishServer,
    creds: LabCredentials,
    open_redfish: Callable[..., RedfishDriver],
) -> None:
    """A synchronized cut opens every node's connection when it prepares and writes on it
    only when all are prepared. The lab serves every node from one server: its threads must
    serve requests, not idle connections (at 96 nodes, 64 idle ones held every thread and
    the other nodes' reads timed out)."""
    context = ssl.create_default_context(cafile=str(creds.tls_ca_cert))
    idle: list[ssl.SSLSocket] = []
    try:
        for _ in range(MIN_THREADS + 2):  # more than the server's threads (2 systems: 10)
            raw = socket.create_connection(("127.0.0.1", redfish_server.port), timeout=5)
            idle.append(context.wrap_socket(raw, server_hostname="127.0.0.1"))
        driver = open_redfish(redfish_server, timeout_s=5.0)
        assert driver.state() is PowerState.ON  # served while every idle connection waits
        # ... and an idle connection is served when its request comes.
        idle[0].sendall(b"GET /redfish/v1/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert idle[0].recv(64).startswith(b"HTTP/1.1 ")
    finally:
        for sock in idle:
            sock.close()


def test_redfish_finds_the_system_by_id_or_alias_and_names_the_choices_otherwise(
    redfish_server: RedfishServer,
    node_b: MemoryTarget,
    open_redfish: Callable[..., RedfishDriver],
) -> None:
    by_id = open_redfish(redfish_server, node="b", system_id=system_uuid("node-b"))
    by_alias = open_redfish(redfish_server, node="b", system_id="node-b")
    missing = open_redfish(redfish_server, node="b", system_id="nope")
    ambiguous = open_redfish(redfish_server, node="node-z")

    assert by_id.state() is PowerState.OFF
    by_alias.on()
    assert node_b.calls() == [ON]
    with pytest.raises(PermanentError, match="has no system 'nope'") as caught:
        missing.state()
    assert system_uuid("node-a") in str(caught.value)
    with pytest.raises(PermanentError, match="set system_id"):
        ambiguous.state()


def test_redfish_unsupported_reset_type_is_refused_naming_the_valid_values(
    redfish_factory: Callable[..., RedfishServer],
    creds: LabCredentials,
    node_a: MemoryTarget,
    open_redfish: Callable[..., RedfishDriver],
) -> None:
    server = redfish_factory([node_a], reset_types=("On", "ForceOff", "ForceRestart"))
    driver = open_redfish(server)

    started = time.monotonic()
    with pytest.raises(PermanentError) as caught:
        driver.off(graceful=True)
    assert time.monotonic() - started < 2
    assert "does not allow ResetType GracefulShutdown" in str(caught.value)
    assert "valid values: ForceOff, ForceRestart, On" in str(caught.value)
    assert node_a.calls() == []

    driver.cycle()  # no PowerCycle here: ForceRestart instead
    assert node_a.calls() == [RESET]

    # The server refuses what it does not advertise, whatever the client checks.
    status, body = redfish_post(
        server,
        creds,
        f"{server.system_path('node-a')}/Actions/ComputerSystem.Reset",
        {"ResetType": "GracefulShutdown"},
    )
    assert status == 400
    assert "valid values: On, ForceOff, ForceRestart" in json.loads(body)["error"]["message"]
    status, _body = redfish_post(
        server,
        creds,
        f"{server.system_path('node-a')}/Actions/ComputerSystem.Reset",
        {"ResetType": "Nmi"},
    )
    assert status == 400
    assert node_a.calls() == [RESET]


def test_redfish_wrong_password_is_permanent_at_once_and_never_shown(
    redfish_server: RedfishServer,
    node_a: MemoryTarget,
    open_redfish: Callable[..., RedfishDriver],
) -> None:
    wrong = "Wr0ng-Passw0rd-XYZ"
    driver = open_redfish(redfish_server, password=wrong)

    started = time.monotonic()
    with pytest.raises(PermanentError, match="refused the credentials") as caught:
        driver.off()
    assert time.monotonic() - started < 2
    assert node_a.calls() == []
    assert caught.value.acted is False  # a 401 before any command: not done, nothing owed
    assert_secret_hidden(wrong, str(caught.value), repr(caught.value), repr(driver))


def test_redfish_session_auth_without_a_session_service_says_so(
    redfish_server: RedfishServer, open_redfish: Callable[..., RedfishDriver]
) -> None:
    driver = open_redfish(redfish_server, auth="session")

    with pytest.raises(PermanentError, match="no usable SessionService"):
        driver.state()


@pytest.mark.parametrize("trust", ["system", "other-ca"])
def test_redfish_tls_verification_fails_against_an_unknown_ca(
    trust: str,
    tmp_path: Path,
    redfish_server: RedfishServer,
    node_a: MemoryTarget,
    open_redfish: Callable[..., RedfishDriver],
) -> None:
    verify: bool | str = True
    if trust == "other-ca":
        other_ca, _cert, _key = ensure_tls(tmp_path, prefix="other")
        verify = str(other_ca)
    driver = open_redfish(redfish_server, verify=verify)

    started = time.monotonic()
    with pytest.raises(PermanentError, match="TLS verification failed"):
        driver.off()
    assert time.monotonic() - started < 2
    assert node_a.calls() == []


def test_redfish_server_is_one_per_process(
    redfish_server: RedfishServer, creds: LabCredentials, node_b: MemoryTarget
) -> None:
    second = RedfishServer([node_b], "127.0.0.1", 0, "x", "y", creds.tls_cert, creds.tls_key)
    with pytest.raises(RuntimeError, match="only one RedfishServer can run per process"):
        second.start()


# -- SSH --------------------------------------------------------------------------------


def test_ssh_powers_off_and_reboots_the_node(
    node_a: MemoryTarget, open_ssh: Callable[..., SshDriver]
) -> None:
    driver = open_ssh()

    assert driver.state() is PowerState.ON
    driver.off(graceful=True)
    assert node_a.power_state() is PowerState.OFF
    assert driver.state() is PowerState.OFF

    node_a.power_on()  # what the node's BMC would do
    assert driver.state() is PowerState.ON
    driver.off()
    assert node_a.power_state() is PowerState.OFF

    node_a.power_on()
    driver.cycle()
    assert driver.state() is PowerState.ON
    assert node_a.calls() == [OFF_GRACEFUL, ON, OFF_FORCED, ON, RESET]


def test_ssh_power_off_to_a_host_that_keeps_answering_acted_on_nothing(
    node_a: MemoryTarget, open_ssh: Callable[..., SshDriver]
) -> None:
    # A power-off command that the host runs and survives (a masked poweroff target, a
    # hung shutdown): SSH keeps answering to the end of the deadline.
    driver = open_ssh(command_off_forced="true", timeout_s=1.5)

    with pytest.raises(WaitTimeout, match="still answering") as caught:
        driver.off()
    assert caught.value.acted is False
    assert node_a.power_state() is PowerState.ON
    assert node_a.calls() == []


def test_a_power_off_that_reached_the_bmc_may_have_acted(
    redfish_server: RedfishServer,
    node_a: MemoryTarget,
    open_redfish: Callable[..., RedfishDriver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The BMC took ForceOff, but the read-back never shows Off in time: owed, not "not done".
    driver = open_redfish(redfish_server, timeout_s=1.0)
    monkeypatch.setattr(driver, "_wait_for", _never_off)
    with pytest.raises(WaitTimeout) as caught:
        driver.off()
    assert caught.value.acted is None
    assert node_a.calls() == [OFF_FORCED]


def _never_off(*_args: object) -> None:
    raise WaitTimeout(expected="PowerState Off", last_seen="PowerState On", waited_s=1.0)


def test_ssh_cannot_power_on(node_a: MemoryTarget, open_ssh: Callable[..., SshDriver]) -> None:
    driver = open_ssh()
    node_a.set_state(PowerState.OFF)

    with pytest.raises(PermanentError, match="cannot restore it; use the node's BMC"):
        driver.on()
    with pytest.raises(PermanentError, match="cannot restore it"):
        driver.cycle()
    assert node_a.calls() == []


def test_ssh_unknown_host_key_is_refused(
    tmp_path: Path,
    ssh_server: SshServer,
    node_a: MemoryTarget,
    open_ssh: Callable[..., SshDriver],
) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    impostor_pub = ensure_ssh_keypair(tmp_path / "impostor")
    changed = tmp_path / "changed_known_hosts"
    changed.write_text(known_hosts_line("127.0.0.1", ssh_server.port, impostor_pub))

    with pytest.raises(PermanentError, match=r"not in .*strict host key checking"):
        open_ssh(empty).state()
    with pytest.raises(PermanentError, match="host key changed"):
        open_ssh(changed).off()
    assert node_a.calls() == []


def test_ssh_unknown_client_key_is_refused(
    tmp_path: Path, node_a: MemoryTarget, open_ssh: Callable[..., SshDriver]
) -> None:
    stranger = tmp_path / "stranger"
    ensure_ssh_keypair(stranger)
    driver = open_ssh(key_file=stranger)

    with pytest.raises(PermanentError, match="refused the key"):
        driver.off()
    assert node_a.calls() == []


def test_a_powered_off_node_refuses_ssh_until_it_is_back_on(
    ssh_server: SshServer,
    known_hosts: Path,
    creds: LabCredentials,
    node_a: MemoryTarget,
) -> None:
    def connect() -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        client.load_host_keys(str(known_hosts))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(
            "127.0.0.1",
            port=ssh_server.port,
            username="root",
            key_filename=str(creds.ssh_client_key),
            timeout=2,
            banner_timeout=2,
            look_for_keys=False,
            allow_agent=False,
        )
        return client

    established = connect()
    try:
        node_a.set_state(PowerState.OFF)  # e.g. through its BMC
        with pytest.raises((paramiko.SSHException, OSError, EOFError)):
            connect().close()
        transport = established.get_transport()
        assert transport is not None
        assert wait_for(lambda: not transport.is_active()), "a connection survived power-off"
    finally:
        established.close()

    node_a.set_state(PowerState.ON)
    client = connect()
    try:
        _stdin, stdout, stderr = client.exec_command("systemctl is-system-running", timeout=5)
        assert stdout.read() == b"running\n"
        assert stdout.channel.recv_exit_status() == 0
        _stdin, stdout, stderr = client.exec_command("rm -rf /", timeout=5)
        assert stdout.channel.recv_exit_status() == 127
        assert b"command not found" in stderr.read()
    finally:
        client.close()
    assert node_a.calls() == []


def test_ssh_sees_a_node_powered_off_through_its_bmc(
    creds: LabCredentials,
    node_a: MemoryTarget,
    open_ipmi: Callable[..., IpmiDriver],
    open_ssh: Callable[..., SshDriver],
) -> None:
    ipmi = IpmiServer({0: node_a}, "127.0.0.1", creds.username, creds.password)
    ipmi.start()
    try:
        bmc = open_ipmi(ipmi, "rmcpplus")
        ssh = open_ssh()
        assert ssh.state() is PowerState.ON  # keeps its connection open
        bmc.off()
        assert ssh.state() is PowerState.OFF
        bmc.on()
        assert ssh.state() is PowerState.ON
    finally:
        ipmi.stop()
    assert node_a.calls() == [OFF_FORCED, ON]


class AgentTarget(MemoryTarget):
    """A node whose own OS can be cut off the network or lose its kubelet (what the lab's
    nodes do), recording each request."""

    def __init__(self, name: str) -> None:
        super().__init__(name, PowerState.ON)
        self.agent_calls: list[tuple[str, float | None]] = []
        self.cut = False

    def partition(self, *, heal_after_s: float) -> None:
        if self.cut:
            raise LabError("already cut")
        self.cut = True
        self.agent_calls.append(("partition", heal_after_s))

    def heal(self) -> None:
        self.cut = False
        self.agent_calls.append(("heal", None))

    def stop_kubelet(self, *, restart_after_s: float) -> None:
        self.agent_calls.append(("stop_kubelet", restart_after_s))

    def start_kubelet(self) -> None:
        self.agent_calls.append(("start_kubelet", None))


def test_ssh_partitions_and_stops_the_kubelet_with_the_undo_armed_on_the_node(
    tmp_path: Path, creds: LabCredentials, drivers: Callable[[SshDriver], SshDriver]
) -> None:
    """The driver's real commands (a transient systemd timer armed before the cut) reach
    the node; the lab's SSH server recognises them and hands them to the node's agent."""
    agent = AgentTarget("node-a")
    with SshServer(
        agent, "127.0.0.1", 0, creds.ssh_host_key, [creds.ssh_client_public_key]
    ) as server:
        hosts = tmp_path / "known_hosts"
        hosts.write_text(known_hosts_line("127.0.0.1", server.port, creds.ssh_host_public_key))
        driver = drivers(
            SshDriver(
                "node-a",
                "127.0.0.1",
                server.port,
                "root",
                str(creds.ssh_client_key),
                known_hosts=str(hosts),
                **FAST,
            )
        )
        assert supports(driver, strategy(FailureKind.PARTITION))
        assert supports(driver, strategy(FailureKind.KUBELET_STOP))
        driver.partition("node-a", heal_after_s=12.3)
        assert driver.state() is PowerState.ON  # SSH still answers: the node runs
        with pytest.raises(PermanentError, match="already cut"):
            driver.partition("node-a", heal_after_s=5)
        driver.heal("node-a")
        driver.stop_kubelet("node-a", restart_after_s=30)
        driver.start_kubelet("node-a")
        with pytest.raises(PermanentError, match="acts on node-a, not node-b"):
            driver.heal("node-b")
    assert agent.agent_calls == [
        ("partition", 13.0),  # whole seconds, rounded up
        ("heal", None),
        ("stop_kubelet", 30.0),
        ("start_kubelet", None),
    ]
    assert agent.calls() == []  # no power action


def test_a_node_without_an_agent_refuses_a_partition(
    node_a: MemoryTarget, open_ssh: Callable[..., SshDriver]
) -> None:
    with pytest.raises(PermanentError, match="exit status 127"):
        open_ssh().partition("node-a", heal_after_s=10)


def test_the_default_partition_arms_its_heal_before_it_cuts() -> None:
    from harness.power import ssh

    cmd = ssh.COMMAND_PARTITION
    assert cmd.startswith("systemd-run ") and "--on-active={seconds}" in cmd
    assert cmd.index("systemd-run") < cmd.index("iptables -N")
    assert "--dport 22 -j RETURN" in cmd  # SSH stays open, so the heal can be sent
    assert ssh.COMMAND_KUBELET_STOP.index("systemd-run") < ssh.COMMAND_KUBELET_STOP.index(
        "systemctl stop kubelet"
    )


# -- prepared power-offs (the synchronized cut) -------------------------------------------------


def test_redfish_prepare_connects_and_finds_the_system_then_fire_sends_one_post(
    redfish_server: RedfishServer,
    node_a: MemoryTarget,
    node_b: MemoryTarget,
    open_redfish: Callable[..., RedfishDriver],
) -> None:
    driver = open_redfish(redfish_server)
    prepared = driver.prepare_off()
    assert node_a.calls() == []  # prepared: nothing sent that acts
    started = time.monotonic()
    prepared.fire()
    took = time.monotonic() - started
    assert node_a.calls() == [OFF_FORCED]
    prepared.confirm()
    assert node_a.power_state() is PowerState.OFF
    assert took < 1.0, f"request to acknowledgement took {took:.3f} s"
    assert isinstance(driver.prepare_off(), NothingToDo)  # already off: nothing to send
    assert node_b.calls() == []


@INTERFACES
def test_ipmi_prepare_opens_the_session_then_fire_sends_one_command(
    interface: Literal["ipmitool", "rmcpplus"],
    ipmi_server: IpmiServer,
    node_a: MemoryTarget,
    open_ipmi: Callable[..., IpmiDriver],
) -> None:
    driver = open_ipmi(ipmi_server, interface)
    prepared = driver.prepare_off(graceful=True)
    assert node_a.calls() == []
    assert ipmi_server.sessions()["node-a"][1] == 1  # the session is open, ready
    prepared.fire()
    prepared.confirm()
    assert node_a.calls() == [OFF_GRACEFUL]
    assert node_a.power_state() is PowerState.OFF
    opened, _open_now = ipmi_server.sessions()["node-a"]
    assert opened == 1, "prepare and fire share one session"


def test_redfish_fire_sends_its_post_over_the_connection_prepare_opened(
    redfish_server: RedfishServer,
    node_a: MemoryTarget,
    open_redfish: Callable[..., RedfishDriver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # sushy asks for "Connection: close" on every request and werkzeug's server closed every
    # connection anyway: the fired POST then paid a TCP and TLS handshake at the cut.
    import urllib3.connection

    opened: list[int] = []
    connect = urllib3.connection.HTTPSConnection.connect

    def counting(self: urllib3.connection.HTTPSConnection) -> None:
        opened.append(1)
        connect(self)

    monkeypatch.setattr(urllib3.connection.HTTPSConnection, "connect", counting)
    driver = open_redfish(redfish_server)
    prepared = driver.prepare_off()
    before = len(opened)
    assert before >= 1
    prepared.fire()
    assert node_a.calls() == [OFF_FORCED]
    assert len(opened) == before, "the POST opened a connection of its own"
    prepared.confirm()  # reads back as before: the POST asked to close its connection
    assert node_a.power_state() is PowerState.OFF


def test_redfish_server_checks_every_password_even_after_a_right_one(
    redfish_server: RedfishServer, creds: LabCredentials
) -> None:
    # The server remembers headers that passed its bcrypt check, never anything else.
    path = f"/redfish/v1/Systems/{system_uuid('node-a')}"
    context = ssl.create_default_context(cafile=str(creds.tls_ca_cert))

    def get(password: str) -> int:
        token = b64encode(f"{creds.username}:{password}".encode()).decode()
        request = urllib.request.Request(  # noqa: S310 (https, loopback)
            redfish_server.url + path, headers={"Authorization": f"Basic {token}"}
        )
        try:
            with urllib.request.urlopen(request, context=context, timeout=5) as response:  # noqa: S310
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    assert get(creds.password) == 200
    assert get(creds.password) == 200  # remembered
    assert get("Wr0ng-Passw0rd-XYZ") == 401
    assert get(creds.password + "x") == 401
    assert get(creds.password) == 200


def test_redfish_prepare_with_a_wrong_password_acted_on_nothing(
    redfish_server: RedfishServer,
    node_a: MemoryTarget,
    open_redfish: Callable[..., RedfishDriver],
) -> None:
    driver = open_redfish(redfish_server, password="Wr0ng-Passw0rd-XYZ")
    with pytest.raises(PermanentError, match="refused the credentials") as caught:
        driver.prepare_off()
    assert caught.value.acted is False
    assert node_a.calls() == []


# -- the volley: a synchronized cut on bounded threads ------------------------------------


def test_a_volley_writes_every_request_before_reading_any_answer_and_stamps_each(
    creds: LabCredentials,
    redfish_factory: Callable[..., RedfishServer],
    open_redfish: Callable[..., RedfishDriver],
    open_ipmi: Callable[..., IpmiDriver],
) -> None:
    redfish_nodes = [MemoryTarget(f"rf-{i}", PowerState.ON) for i in range(4)]
    ipmi_nodes = [MemoryTarget(f"ip-{i}", PowerState.ON) for i in range(3)]
    server = redfish_factory(redfish_nodes)
    drivers: dict[str, PowerDriver] = {
        t.name: open_redfish(server, node=t.name) for t in redfish_nodes
    }
    with IpmiServer(ipmi_nodes, "127.0.0.1", creds.username, creds.password) as ipmi:
        drivers.update({t.name: open_ipmi(ipmi, "ipmitool", node=t.name) for t in ipmi_nodes})
        prepared: dict[str, object] = {}

        def prepare(node: str) -> Any:
            prepared[node] = prepare_off(drivers[node])
            return prepared[node]

        shots = Volley(workers=3).run(sorted(drivers), prepare)
    assert all(isinstance(p, SplitPower) for p in prepared.values()), prepared
    for target in redfish_nodes + ipmi_nodes:
        assert target.calls() == [OFF_FORCED], target
        assert target.power_state() is PowerState.OFF
    for shot in shots.values():
        assert shot.error is None and not shot.retried, shot
        assert shot.sent is not None and shot.acknowledged is not None
        assert shot.confirmed is not None
        assert shot.sent < shot.acknowledged <= shot.confirmed
    # Every request was written before any answer was read: the senders finish first.
    assert max(s.sent for s in shots.values() if s.sent) < min(
        s.acknowledged for s in shots.values() if s.acknowledged
    )


def test_a_volley_retries_an_answer_that_is_no_acceptance_the_whole_way(
    redfish_factory: Callable[..., RedfishServer],
    open_redfish: Callable[..., RedfishDriver],
) -> None:
    good, bad = MemoryTarget("good", PowerState.ON), MemoryTarget("bad", PowerState.ON)
    server = redfish_factory([good, bad])
    drivers = {t.name: open_redfish(server, node=t.name, timeout_s=1.0) for t in (good, bad)}

    def prepare(node: str) -> Any:
        p = prepare_off(drivers[node])
        if node == "bad":
            bad.fail_with = RuntimeError("the node's power supply is stuck")
        return p

    shots = Volley().run(["good", "bad"], prepare)
    assert shots["good"].error is None and good.power_state() is PowerState.OFF
    assert shots["bad"].retried and shots["bad"].error is not None
    assert shots["bad"].acknowledged is None
    assert "bad" in str(shots["bad"].error)


def test_a_volley_sends_nothing_when_one_node_cannot_be_prepared(
    redfish_factory: Callable[..., RedfishServer],
    open_redfish: Callable[..., RedfishDriver],
) -> None:
    a, b = MemoryTarget("a", PowerState.ON), MemoryTarget("b", PowerState.ON)
    server = redfish_factory([a, b])
    drivers = {
        "a": open_redfish(server, node="a"),
        "b": open_redfish(server, node="b", password="Wr0ng-Passw0rd-XYZ"),
    }
    shots = Volley().run(["a", "b"], lambda n: prepare_off(drivers[n]))
    assert a.calls() == [] and b.calls() == []
    assert isinstance(shots["b"].error, PermanentError)
    assert "not sent" in str(shots["a"].error) and shots["a"].sent is None
