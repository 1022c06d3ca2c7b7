"""The Redfish driver against every vendor profile of the lab's BMC and against the stock
sushy-tools emulator (its own ``sushy-emulator`` process, unmodified, fake driver): real
HTTPS, real sessions, real waits.

Every profile passes the same driver tests (off, on, cycle, the session-leak test); the
profile-specific tests check what makes each vendor different (a 202's Task, no
PowerCycle, throttling, a session cap, a GracefulShutdown the node ignores).
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from base64 import b64encode
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from harness.errors import PermanentError, WaitTimeout
from harness.lab.bmc.creds import LabCredentials, ensure_lab_credentials
from harness.lab.bmc.profiles import PROFILES
from harness.lab.bmc.redfish import RedfishServer
from harness.lab.bmc.target import MemoryTarget, PowerCall
from harness.power.base import GracefulIgnored, PowerState
from harness.power.redfish import RedfishDriver

pytestmark = pytest.mark.timeout(120)

NODES = ("node-a", "node-b")
#: A bmcweb whose host OS does not act on ACPI: GracefulShutdown accepted, never done.
NO_ACPI = dataclasses.replace(PROFILES["bmcweb"], name="bmcweb-no-acpi", graceful_honoured=False)
#: Runs of the session-leak test, and which of them are interrupted mid-wait.
LEAK_RUNS = 20
INTERRUPTED = frozenset({2, 5, 9, 13, 17})


class Bmc:
    """One BMC under test: its URL, how to log in, and how to count its sessions."""

    def __init__(
        self,
        name: str,
        url: str,
        targets: dict[str, MemoryTarget] | None,
        sessions: Callable[[], int] | None,
        *,
        timeout_s: float,
    ) -> None:
        self.name = name
        self.url = url
        self.targets = targets  # None: the stock emulator keeps its own state
        self.sessions = sessions
        self.auth = "session" if sessions is not None else "basic"
        self.timeout_s = timeout_s


@pytest.fixture(scope="module")
def creds(tmp_path_factory: pytest.TempPathFactory) -> LabCredentials:
    return ensure_lab_credentials(tmp_path_factory.mktemp("creds"), username="admin")


@pytest.fixture(scope="module")
def targets() -> dict[str, MemoryTarget]:
    return {n: MemoryTarget(n, PowerState.ON) for n in NODES}


@pytest.fixture(scope="module")
def lab_server(creds: LabCredentials, targets: dict[str, MemoryTarget]) -> Iterator[RedfishServer]:
    vendors = [(p, 0) for p in (*PROFILES.values(), NO_ACPI)]
    with RedfishServer(
        list(targets.values()),
        "127.0.0.1",
        0,
        creds.username,
        creds.password,
        creds.tls_cert,
        creds.tls_key,
        vendors=vendors,
    ) as server:
        yield server


def _free_port() -> int:
    wanted = int(os.environ.get("POWERCUT_TEST_SUSHY_PORT", "0"))
    if wanted:
        return wanted
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def stock_emulator(
    creds: LabCredentials, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """sushy-tools' own ``sushy-emulator``: fake driver, HTTPS with the lab's certificate,
    basic auth from an htpasswd file; nothing of powercut's runs inside it."""
    work = tmp_path_factory.mktemp("sushy")
    digest = bcrypt.hashpw(creds.password.encode(), bcrypt.gensalt(rounds=4)).decode()
    (work / "htpasswd").write_text(f"{creds.username}:{digest}\n")
    systems = [
        {"uuid": f"27946b59-9e44-4fa7-8e91-f3527a1ef09{i}", "name": n, "power_state": "On"}
        for i, n in enumerate(NODES)
    ]
    (work / "emulator.conf").write_text(
        textwrap.dedent(
            f"""\
            SUSHY_EMULATOR_FAKE_DRIVER = True
            SUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}
            SUSHY_EMULATOR_STATE_DIR = {str(work / "state")!r}
            SUSHY_EMULATOR_AUTH_FILE = {str(work / "htpasswd")!r}
            """
        )
    )
    port = _free_port()
    emulator = Path(sys.executable).with_name("sushy-emulator")
    log = (work / "emulator.log").open("wb")
    proc = subprocess.Popen(
        [
            str(emulator),
            "--config",
            str(work / "emulator.conf"),
            "--interface",
            "127.0.0.1",
            "--port",
            str(port),
            "--ssl-certificate",
            str(creds.tls_cert),
            "--ssl-key",
            str(creds.tls_key),
            "--fake",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not _answers(url, creds):
            assert proc.poll() is None, (work / "emulator.log").read_text()
            assert time.monotonic() < deadline, "sushy-emulator did not answer within 30 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def _answers(url: str, creds: LabCredentials) -> bool:
    try:
        get(url, "/redfish/v1/", creds)
    except (OSError, urllib.error.URLError):
        return False
    return True


def request(
    url: str,
    path: str,
    creds: LabCredentials,
    method: str = "GET",
    body: object = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    context = ssl.create_default_context(cafile=str(creds.tls_ca_cert))
    token = b64encode(f"{creds.username}:{creds.password}".encode()).decode()
    req = urllib.request.Request(  # noqa: S310 (an https URL built by the test)
        url + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={
            "Authorization": f"Basic {token}",
            "Content-Type": "application/json",
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(req, context=context, timeout=10) as response:  # noqa: S310
            raw = response.read()
            return response.status, dict(response.headers), json.loads(raw) if raw else {}
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, dict(exc.headers), json.loads(raw) if raw else {}


def get(url: str, path: str, creds: LabCredentials) -> Any:
    for _ in range(10):  # a throttling profile may answer 503/429: come back as told
        status, headers, body = request(url, path, creds)
        if status not in (429, 503):
            assert status == 200, (path, status, body)
            return body
        time.sleep(float(headers.get("Retry-After", "1")))
    raise AssertionError(f"{path}: still throttled")


def session_count(url: str, creds: LabCredentials) -> int:
    return int(get(url, "/redfish/v1/SessionService/Sessions", creds)["Members@odata.count"])


PARAMS = [*PROFILES, "stock"]


@pytest.fixture(params=PARAMS)
def bmc(
    request: pytest.FixtureRequest, creds: LabCredentials, targets: dict[str, MemoryTarget]
) -> Bmc:
    name = request.param
    if name == "stock":
        url = request.getfixturevalue("stock_emulator")
        # Its fake driver applies a change 1-11 s after the request, on a read.
        return Bmc(name, url, None, None, timeout_s=40)
    server: RedfishServer = request.getfixturevalue("lab_server")
    url = server.vendor_url(name)
    for target in targets.values():
        if target.power_state() is not PowerState.ON:
            target.power_on()
    sessions = (lambda: session_count(url, creds)) if PROFILES[name].has_sessions else None
    return Bmc(name, url, targets, sessions, timeout_s=20)


def driver(bmc: Bmc, creds: LabCredentials, node: str = "node-a", **kwargs: Any) -> RedfishDriver:
    options: dict[str, Any] = {
        "verify": str(creds.tls_ca_cert),
        "auth": bmc.auth,
        "timeout_s": bmc.timeout_s,
        "poll_s": 0.2,
        **kwargs,
    }
    return RedfishDriver(node, bmc.url, creds.username, creds.password, **options)


# -- every profile, and the stock emulator ----------------------------------------------


def test_off_on_cycle_change_the_node(bmc: Bmc, creds: LabCredentials) -> None:
    seen = len(bmc.targets["node-b"].calls()) if bmc.targets is not None else 0
    with driver(bmc, creds, "node-b") as d:
        assert d.state() is PowerState.ON
        d.off()
        assert d.state() is PowerState.OFF
        d.on()
        assert d.state() is PowerState.ON
        d.cycle()
        assert d.state() is PowerState.ON
    if bmc.targets is not None:
        calls = bmc.targets["node-b"].calls()[seen:]
        assert calls[:2] == [PowerCall("off", False), PowerCall("on")]
        assert calls[2:] in ([PowerCall("reset")], [PowerCall("off", False), PowerCall("on")])


def test_twenty_runs_interrupted_ones_included_leave_the_session_count_as_it_was(
    bmc: Bmc, creds: LabCredentials
) -> None:
    before = bmc.sessions() if bmc.sessions else _connections(bmc.url)
    interrupted = 0
    for run in range(LEAK_RUNS):
        extra: dict[str, Any] = {"clock": _Interrupting(after=4)} if run in INTERRUPTED else {}
        d = driver(bmc, creds, **extra)
        try:
            with d:
                state = d.state()
                if run in INTERRUPTED or run % 5 == 0:  # a power action, read back
                    d.off() if state is PowerState.ON else d.on()
        except KeyboardInterrupt:
            interrupted += 1
    assert interrupted == len(INTERRUPTED)
    after = bmc.sessions() if bmc.sessions else _connections(bmc.url)
    assert after == before
    with driver(bmc, creds) as d:  # the node is left on
        d.on()


#: Where the SIGINT lands in the child of the test below. "waiting": sent by the test while
#: the child waits, wherever it is (a poll's request or the pause between two). The other
#: two are sent by the child to itself at one point, the same on every run, through an
#: audit hook on urllib3's "http.client.connect" event (its TCP connection made, its TLS
#: handshake not begun): "connecting", a poll's connection (the interrupted request leaves
#: that connection half-made; the lab's BMC, whose TLS handshakes are done one at a time,
#: then serves nobody until it is closed, the log-out included); "logging out", the
#: log-out's own connection (a Ctrl-C there would cut the DELETE off).
LANDINGS = ("waiting", "connecting", "logging out")

CHILD = """\
import gc, logging, os, signal, sys
from harness.power.base import PowerState, ResetType
from harness.power.redfish import RedfishDriver

# A terminal's Ctrl-C: Python's default handler. A process started in the background by a
# non-interactive shell (as a CI runner may start `make test`) inherits SIGINT ignored, and
# Python then installs no handler: the signal would never reach the driver.
signal.signal(signal.SIGINT, signal.default_int_handler)
# sushy's own finalizer deletes a session when its client object is collected (a garbage
# collection, or the exit): the driver's close() must have done it, so none runs here.
gc.disable()
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)  # every library's log, for secrets
LAND = {land!r}
armed = None  # the landing the next connection gets the signal at


def hook(event, args):
    global armed
    if event == "http.client.connect" and armed is not None and armed == LAND:
        armed = None
        os.kill(os.getpid(), signal.SIGINT)


class Driver(RedfishDriver):
    def close(self):
        global armed
        armed = "logging out"
        super().close()


sys.addaudithook(hook)
password = open({password_file!r}).read().strip()
try:
    with Driver("node-a", {url!r}, {username!r}, password, verify={ca!r}, auth="session",
                timeout_s=60, poll_s=0.2) as d:
        assert d.state() is PowerState.ON
        # The token, for the test to look for in the log (sushy's own record of it).
        print("session open", d._auth._session_key, flush=True)
        sys.stdin.readline()  # the test has counted the sessions
        if LAND != "logging out":  # else the block ends now, its log-out gets the signal
            armed = "connecting"
            # A wait that only the signal ends: the node stays on.
            d._wait_for(PowerState.OFF, d._deadline(), ResetType.FORCE_OFF)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.stdin.readline()  # the test has counted the sessions, this process still alive
    raise
"""


@pytest.mark.parametrize("land", LANDINGS)
def test_a_process_interrupted_by_sigint_logs_its_session_out(
    bmc: Bmc, creds: LabCredentials, tmp_path: Path, land: str
) -> None:
    if bmc.sessions is None:
        pytest.skip(f"{bmc.name} has no SessionService (basic auth): no session to leak")
    before = bmc.sessions()
    script = tmp_path / "child.py"
    script.write_text(
        CHILD.format(
            land=land,
            password_file=str(creds.directory / "bmc-password"),
            url=bmc.url,
            username=creds.username,
            ca=str(creds.tls_ca_cert),
        )
    )
    log = (tmp_path / "child.log").open("wb")
    child = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        opened = child.stdout.readline().decode().split()
        assert opened[:2] == ["session", "open"], opened
        token = opened[2]
        assert bmc.sessions() == before + 1
        child.stdin.write(b"go\n")
        child.stdin.flush()
        if land == "waiting":
            child.send_signal(signal.SIGINT)
        ready, _, _ = select.select([child.stdout], [], [], 20)  # it stops promptly
        assert ready and child.stdout.readline() == b"interrupted\n"
        after = bmc.sessions()  # counted while it runs: no finalizer of its exit did it
        child.stdin.write(b"exit\n")
        child.stdin.flush()
        child.wait(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        log.close()
    err = (tmp_path / "child.log").read_text()
    assert after == before, err[-3000:]
    assert child.returncode != 0
    assert "\nKeyboardInterrupt\n" in err, err[-3000:]  # the interrupt ended it, once done
    if land == "logging out":  # the signal was held, the DELETE done, then the signal raised
        assert "SIGINT received while node-a: logging the Redfish session out" in err
    assert len(token) >= 8 and token not in err
    assert creds.password not in err


# -- what makes each vendor different ---------------------------------------------------


def test_bmcweb_answers_a_reset_with_a_task_the_driver_follows(
    lab_server: RedfishServer, creds: LabCredentials, targets: dict[str, MemoryTarget]
) -> None:
    url = lab_server.vendor_url("bmcweb")
    system = get(url, "/redfish/v1/Systems", creds)["Members"][0]["@odata.id"]
    status, headers, task = request(
        url, f"{system}/Actions/ComputerSystem.Reset", creds, "POST", {"ResetType": "ForceOff"}
    )
    assert status == 202
    assert headers["Location"].endswith("/Monitor")
    assert task["TaskState"] == "Running"
    assert request(url, headers["Location"], creds)[0] == 202
    time.sleep(PROFILES["bmcweb"].task_s)
    status, _headers, done = request(url, headers["Location"], creds)
    assert (status, done["TaskState"]) == (200, "Completed")

    for target in targets.values():
        target.power_on()
    tasks_before = lab_server.vendor("bmcweb")._tasks.copy()
    bmc = Bmc("bmcweb", url, None, None, timeout_s=20)
    with driver(bmc, creds, "node-b") as d:
        d.off()
        d.on()
    assert len(lab_server.vendor("bmcweb")._tasks) == len(tasks_before) + 2


def test_bmcweb_shows_powering_states_while_a_change_is_read_back(
    lab_server: RedfishServer, creds: LabCredentials, targets: dict[str, MemoryTarget]
) -> None:
    url = lab_server.vendor_url("bmcweb")
    path = next(
        m["@odata.id"]
        for m in get(url, "/redfish/v1/Systems", creds)["Members"]
        if get(url, m["@odata.id"], creds)["Name"] == "node-b"
    )
    targets["node-b"].power_on()
    request(url, f"{path}/Actions/ComputerSystem.Reset", creds, "POST", {"ResetType": "ForceOff"})
    assert targets["node-b"].power_state() is PowerState.OFF  # the node acted at once
    assert get(url, path, creds)["PowerState"] == "PoweringOff"  # the BMC shows it late
    time.sleep(PROFILES["bmcweb"].readback_s)
    assert get(url, path, creds)["PowerState"] == "Off"
    targets["node-b"].power_on()


def test_ilo_has_no_power_cycle_so_cycle_is_off_then_on(
    lab_server: RedfishServer, creds: LabCredentials, targets: dict[str, MemoryTarget]
) -> None:
    url = lab_server.vendor_url("ilo")
    system = get(url, "/redfish/v1/Systems", creds)["Members"][0]["@odata.id"]
    status, _h, body = request(
        url, f"{system}/Actions/ComputerSystem.Reset", creds, "POST", {"ResetType": "PowerCycle"}
    )
    assert status == 400
    assert "valid values: On, ForceOff, GracefulShutdown, ForceRestart" in body["error"]["message"]

    before = len(targets["node-a"].calls())
    bmc = Bmc("ilo", url, targets, None, timeout_s=20)
    with driver(bmc, creds, auth="session") as d:
        d.cycle()
    assert targets["node-a"].calls()[before:] == [PowerCall("off", False), PowerCall("on")]


def test_throttling_profiles_are_served_through_their_retry_after(
    lab_server: RedfishServer, creds: LabCredentials
) -> None:
    for name in ("xcc", "supermicro"):
        vendor = lab_server.vendor(name)
        throttled = vendor.throttled
        bmc = Bmc(name, lab_server.vendor_url(name), None, None, timeout_s=30)
        with driver(bmc, creds, "node-b", auth="session") as d:
            d.off()
            d.on()
            assert d.state() is PowerState.ON
        assert vendor.throttled > throttled, name


def test_a_full_session_table_is_one_clear_error_within_the_deadline(
    lab_server: RedfishServer, creds: LabCredentials
) -> None:
    url = lab_server.vendor_url("idrac")
    cap = PROFILES["idrac"].max_sessions
    assert cap is not None
    opened = []
    for _ in range(cap - session_count(url, creds)):
        status, headers, _body = request(
            url,
            "/redfish/v1/SessionService/Sessions",
            creds,
            "POST",
            {"UserName": creds.username, "Password": creds.password},
        )
        assert status == 201
        opened.append(headers["Location"])
    try:
        bmc = Bmc("idrac", url, None, None, timeout_s=3)
        with pytest.raises(PermanentError) as caught, driver(bmc, creds, auth="session") as d:
            d.state()
        assert "SessionLimitExceeded" in str(caught.value) or "simultaneous sessions" in str(
            caught.value
        )
        assert creds.password not in str(caught.value)
    finally:
        for location in opened:
            request(url, location, creds, "DELETE")
    assert session_count(url, creds) == 0


def test_a_graceful_shutdown_the_node_ignores_is_reported_as_ignored(
    lab_server: RedfishServer, creds: LabCredentials, targets: dict[str, MemoryTarget]
) -> None:
    bmc = Bmc(NO_ACPI.name, lab_server.vendor_url(NO_ACPI.name), targets, None, timeout_s=2)
    with pytest.raises(GracefulIgnored) as caught, driver(bmc, creds, auth="session") as d:
        d.off(graceful=True)
    assert isinstance(caught.value, WaitTimeout)
    assert "ignored it" in str(caught.value)
    assert targets["node-a"].power_state() is PowerState.ON
    with driver(bmc, creds, auth="session", timeout_s=10) as d:
        d.off()  # forced still works
        d.on()


def test_the_stock_emulator_has_no_session_service_and_the_driver_says_so(
    stock_emulator: str, creds: LabCredentials
) -> None:
    bmc = Bmc("stock", stock_emulator, None, None, timeout_s=3)
    with pytest.raises(PermanentError) as caught, driver(bmc, creds, auth="session") as d:
        d.state()
    assert "SessionService" in str(caught.value)


# -- helpers ----------------------------------------------------------------------------


class _Interrupting:
    """The real clock, except that its ``after``-th reading raises KeyboardInterrupt: a
    Ctrl-C that lands while the driver is between two requests of a power action (its
    session open), at the same point on every profile."""

    def __init__(self, after: int) -> None:
        self.after = after

    def monotonic(self) -> float:
        self.after -= 1
        if self.after <= 0:
            raise KeyboardInterrupt
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _connections(url: str) -> int:
    """TCP connections this process holds open to ``url``'s port (basic auth has no
    session: what a client can leak there is connections)."""
    port = int(url.rsplit(":", 1)[1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        inodes = _own_socket_inodes()
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].split(":")[1], 16)
            if remote_port == port and fields[3] == "01" and fields[9] in inodes:
                count += 1
    return count


def _own_socket_inodes() -> set[str]:
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def test_discovery_probe_reads_protocol_vendor_sessions_and_system_ids(
    lab_server: RedfishServer, creds: LabCredentials
) -> None:
    from harness.discover import probe_redfish

    url = lab_server.vendor_url("ilo")
    anonymous = probe_redfish(url, verify=str(creds.tls_ca_cert))
    assert (anonymous.offered, anonymous.vendor, anonymous.sessions) == (True, "HPE", True)
    assert anonymous.systems is None
    assert anonymous.problem is not None and "no credentials" in anonymous.problem

    facts = probe_redfish(
        url, verify=str(creds.tls_ca_cert), username=creds.username, password=creds.password
    )
    assert sorted(name for _id, name in facts.systems or []) == list(NODES)
    assert creds.password not in facts.summary()

    plain = probe_redfish(lab_server.url, verify=str(creds.tls_ca_cert))
    assert (plain.offered, plain.sessions) == (True, False)  # the lab's own BMC: basic auth
    untrusted = probe_redfish(url)  # the system's CAs do not know the lab's
    assert not untrusted.offered
    assert untrusted.problem is not None and "TLS verification failed" in untrusted.problem


@pytest.mark.parametrize("auth", ["basic", "session"])
def test_a_synchronized_cut_follows_bmcwebs_task_too(
    lab_server: RedfishServer,
    creds: LabCredentials,
    targets: dict[str, MemoryTarget],
    auth: str,
) -> None:
    """The synchronized cut's request (a volley: raw bytes on a connection opened ahead with
    basic auth, sushy's POST with a session) is answered 202 too: its Task is read from the
    answer and followed before the state is confirmed."""
    from harness.power.base import prepare_off
    from harness.power.volley import Volley

    for target in targets.values():
        target.power_on()
    tasks = len(lab_server.vendor("bmcweb")._tasks)
    bmc = Bmc("bmcweb", lab_server.vendor_url("bmcweb"), targets, None, timeout_s=20)
    drivers = {n: driver(bmc, creds, n, auth=auth) for n in NODES}
    prepared: dict[str, Any] = {}

    def prepare(node: str) -> Any:
        prepared[node] = prepare_off(drivers[node])
        return prepared[node]

    try:
        shots = Volley(workers=2).run(list(NODES), prepare)
    finally:
        for d in drivers.values():
            d.close()
    for node, shot in shots.items():
        assert shot.error is None and not shot.retried, shot
        assert shot.confirmed is not None
        assert prepared[node].task is not None  # the monitor came with the 202
        assert targets[node].power_state() is PowerState.OFF
    assert len(lab_server.vendor("bmcweb")._tasks) == tasks + len(NODES)
    for target in targets.values():
        target.power_on()
