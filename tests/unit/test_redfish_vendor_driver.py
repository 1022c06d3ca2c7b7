"""The Redfish driver against services as vendors ship them, without a network: answers
recorded from the lab's vendor profiles (docs/bmc.md) played back on a fake clock."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pytest
import sushy
from sushy import exceptions as sushy_exc

from harness.errors import PermanentError, TemporaryError, WaitTimeout
from harness.power.base import GracefulIgnored, PowerState, ResetType
from harness.power.redfish import Answer, RedfishDriver, retry_after_s
from tests.fakes.clock import FakeClock

PASSWORD = "vendor-Passw0rd"
MONITOR = "/redfish/v1/TaskService/Tasks/7/Monitor"

# A bmcweb-style answer to a reset: 202 Accepted, the Task in the body, its monitor in
# Location (as the lab's bmcweb profile answers; see docs/bmc.md).
ACCEPTED = Answer(
    202,
    {"location": MONITOR, "retry-after": "1"},
    {"@odata.id": "/redfish/v1/TaskService/Tasks/7", "Id": "7", "TaskState": "Running"},
)


class Bmc:
    """A scripted BMC at the driver's seams: the system's PowerState over time, the answer
    to each POST, and the Task monitor's answers in turn."""

    def __init__(self, clock: FakeClock, state: str, allowed: tuple[str, ...]) -> None:
        self.clock = clock
        self.state = state
        self.allowed = allowed
        self.posts: list[str] = []
        self.reads = 0
        self.post_answers: list[Answer | BaseException] = []
        self.task_answers: list[Answer] = []
        self.task_reads = 0
        #: (at, state): the PowerState the BMC shows from clock time ``at`` on.
        self.schedule: list[tuple[float, str]] = []
        self.on_post: Callable[[str], None] = lambda _r: None

    # The system object as sushy shows it.
    @property
    def power_state(self) -> Any:
        for at, state in sorted(self.schedule):
            if self.clock.monotonic() >= at:
                self.state = state
        return sushy.PowerState(self.state)

    def refresh(self, force: bool = True) -> None:
        self.reads += 1

    def get_allowed_reset_system_values(self) -> set[Any]:
        return {sushy.ResetType(v) for v in self.allowed}


def driver_for(bmc: Bmc, **kwargs: Any) -> RedfishDriver:
    options: dict[str, Any] = {"timeout_s": 60, "poll_s": 1.0, "clock": bmc.clock}
    options.update(kwargs)
    driver = RedfishDriver("node-a", "https://bmc.example:443", "ops", PASSWORD, **options)
    driver._get_system = lambda: bmc  # type: ignore[method-assign]

    def post(reset: ResetType) -> Answer:
        bmc.posts.append(reset.value)
        answer = bmc.post_answers.pop(0) if bmc.post_answers else Answer(204)
        if isinstance(answer, BaseException):
            # What sushy's response callback would have recorded for this answer.
            driver._last_answer = getattr(answer, "recorded", driver._last_answer)
            raise answer
        bmc.on_post(reset.value)
        return answer

    def get(path: str) -> Answer:
        assert path == MONITOR
        bmc.task_reads += 1
        return bmc.task_answers.pop(0)

    driver._post_reset = post  # type: ignore[method-assign]
    driver._get = get  # type: ignore[method-assign]
    return driver


def http_error(
    driver: RedfishDriver, status: int, headers: dict[str, str], cls: type[Any]
) -> sushy_exc.HTTPError:
    response = types.SimpleNamespace(
        status_code=status,
        json=lambda: {"error": {"code": "Base.1.0.X", "message": "busy"}},
    )
    error = cls("POST", "https://bmc.example/redfish/v1/Systems/1/Actions/x", response)
    error.recorded = (status, headers)
    driver._last_answer = (status, headers)  # what sushy's response callback recorded
    return error


def test_a_202_task_is_followed_to_completion_before_the_state_is_read_back() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff"))
    bmc.post_answers = [ACCEPTED]
    bmc.task_answers = [
        Answer(202, {}, {"TaskState": "Running"}),
        Answer(202, {}, {"TaskState": "Running"}),
        Answer(200, {}, {"Id": "7", "TaskState": "Completed"}),
    ]
    # The BMC shows Off once its Task is done: reading earlier would see On.
    bmc.on_post = lambda _r: bmc.schedule.append((clock.monotonic() + 0.1, "Off"))

    driver_for(bmc).off()

    assert bmc.posts == ["ForceOff"]
    assert bmc.task_reads == 3
    assert bmc.state == "Off"


def test_a_task_that_ends_in_exception_is_permanent_at_once_naming_its_messages() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff"))
    bmc.post_answers = [ACCEPTED]
    bmc.task_answers = [
        Answer(202, {}, {"TaskState": "Running"}),
        Answer(
            200,
            {},
            {"TaskState": "Exception", "Messages": [{"Message": "Chassis power fault"}]},
        ),
    ]

    with pytest.raises(PermanentError) as caught:
        driver_for(bmc).off()

    assert f"the Task {MONITOR} of ResetType ForceOff ended Exception" in str(caught.value)
    assert "Chassis power fault" in str(caught.value)
    assert clock.monotonic() < 1.0  # no wait for the deadline
    assert bmc.reads == 1  # the read before the POST only


def test_a_task_that_never_completes_times_out_naming_its_last_state() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff"))
    bmc.post_answers = [ACCEPTED]
    bmc.task_answers = [Answer(202, {}, {"TaskState": "Running"})] * 200

    with pytest.raises(WaitTimeout) as caught:
        driver_for(bmc, timeout_s=10).off()

    assert f"the Task {MONITOR} of ResetType ForceOff to complete" in caught.value.expected
    assert caught.value.last_seen == "TaskState Running"
    assert caught.value.waited_s == pytest.approx(10)


def test_a_node_already_powering_on_gets_no_second_request_and_is_waited_for() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "PoweringOn", ("On", "ForceOff"))
    bmc.schedule = [(4.0, "On")]

    driver_for(bmc).on()

    assert bmc.posts == []
    assert 4.0 <= clock.monotonic() < 6.0


def test_transitional_states_are_waited_through_to_the_requested_one() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff"))
    bmc.on_post = lambda _r: bmc.schedule.extend([(0.0, "PoweringOff"), (7.0, "Off")])

    driver_for(bmc).off()

    assert bmc.posts == ["ForceOff"]
    assert bmc.state == "Off"
    assert 7.0 <= clock.monotonic() < 8.5


def test_slow_read_back_is_waited_for_up_to_the_budget_and_no_further() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "Off", ("On", "ForceOff"))
    bmc.on_post = lambda _r: bmc.schedule.append((45.0, "On"))  # iLO-like: 45 s to show On

    driver_for(bmc, timeout_s=60).on()
    assert 45.0 <= clock.monotonic() < 46.5

    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "Off", ("On", "ForceOff"))
    bmc.on_post = lambda _r: bmc.schedule.append((45.0, "On"))
    with pytest.raises(WaitTimeout) as caught:
        driver_for(bmc, timeout_s=30).on()
    assert caught.value.last_seen == "PowerState Off"
    assert caught.value.waited_s == pytest.approx(30)


def test_503_with_retry_after_is_retried_after_the_time_asked() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff"))
    driver = driver_for(bmc)
    bmc.post_answers = [
        http_error(driver, 503, {"Retry-After": "7"}, sushy_exc.ServerSideError),
        http_error(driver, 429, {"Retry-After": "3"}, sushy_exc.HTTPError),
    ]
    bmc.on_post = lambda _r: bmc.schedule.append((0.0, "Off"))

    driver.off()

    assert bmc.posts == ["ForceOff", "ForceOff", "ForceOff"]
    assert clock.sleeps[:2] == [7.0, 3.0]


def test_a_retry_after_beyond_the_deadline_ends_the_wait_at_once_saying_so() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff"))
    driver = driver_for(bmc, timeout_s=10)
    bmc.post_answers = [http_error(driver, 503, {"Retry-After": "30"}, sushy_exc.ServerSideError)]

    with pytest.raises(WaitTimeout) as caught:
        driver.off()

    assert "Retry-After 30 s" in caught.value.last_seen
    assert "beyond the deadline" in caught.value.last_seen
    assert clock.sleeps == []


def test_429_without_retry_after_is_temporary_not_permanent() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff"))
    driver = driver_for(bmc)
    error = driver._translate("reset", http_error(driver, 429, {}, sushy_exc.HTTPError))
    assert isinstance(error, TemporaryError)
    assert "busy (HTTP 429)" in str(error)


def test_retry_after_values() -> None:
    assert retry_after_s({"retry-after": "5"}) == 5.0
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}) == 1.0
    assert retry_after_s({"retry-after": "3600"}) == 60.0  # capped
    assert retry_after_s({}) is None


def test_graceful_shutdown_the_node_ignores_is_reported_as_the_node_ignoring_it() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff", "GracefulShutdown"))  # accepted, never done

    with pytest.raises(GracefulIgnored) as caught:
        driver_for(bmc, timeout_s=20).off(graceful=True)

    assert isinstance(caught.value, WaitTimeout)
    assert caught.value.node == "node-a"
    assert "the node ignored it" in str(caught.value)
    assert caught.value.last_seen == "PowerState On"
    assert bmc.posts == ["GracefulShutdown"]


def test_a_forced_off_that_times_out_is_a_plain_timeout() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff"))
    with pytest.raises(WaitTimeout) as caught:
        driver_for(bmc, timeout_s=5).off()
    assert not isinstance(caught.value, GracefulIgnored)


def test_cycle_without_power_cycle_is_off_read_back_then_on() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff", "GracefulShutdown", "ForceRestart", "Nmi"))
    seen: list[str] = []

    def apply(reset: str) -> None:
        seen.append(bmc.state)
        bmc.schedule.append((clock.monotonic() + 2.0, "Off" if reset == "ForceOff" else "On"))

    bmc.on_post = apply
    driver_for(bmc).cycle()

    assert bmc.posts == ["ForceOff", "On"]
    assert seen == ["On", "Off"]  # On was sent once Off was read back


class FakeAuth:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class FakeConnector:
    def __init__(self) -> None:
        self.closed = 0
        self.timeouts: tuple[float, float] | None = None

    def close(self) -> None:
        self.closed += 1

    def set_timeouts(self, *, connect_s: float, read_s: float) -> None:
        self.timeouts = (connect_s, read_s)


def test_a_dropped_connection_keeps_the_session_and_close_logs_it_out_once() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff"))
    driver = driver_for(bmc, auth="session")
    auth, connector = FakeAuth(), FakeConnector()
    driver._auth, driver._connector, driver._root = auth, connector, object()

    error = driver._translate(
        "read", sushy_exc.ConnectionError(url="https://bmc.example", error="reset by peer")
    )
    assert isinstance(error, TemporaryError)
    assert driver._auth is auth  # the session survives a reconnect
    assert connector.closed == 1

    with driver:
        pass
    driver.close()
    assert auth.closed == 1
    assert driver._auth is None


def test_an_interrupted_request_still_logs_the_session_out_on_close() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "On", ("On", "ForceOff"))
    auth = FakeAuth()
    bmc.post_answers = [KeyboardInterrupt()]

    with pytest.raises(KeyboardInterrupt), driver_for(bmc, auth="session") as driver:
        driver._auth, driver._connector = auth, FakeConnector()
        driver.off()

    assert auth.closed == 1


def test_power_state_values() -> None:
    clock = FakeClock(start=0.0)
    for raw, state in (("On", PowerState.ON), ("Off", PowerState.OFF), ("PoweringOn", None)):
        bmc = Bmc(clock, raw, ("On",))
        got = driver_for(bmc)._read_state()
        assert got == (state or PowerState.UNKNOWN, raw)


def test_a_transition_that_ends_elsewhere_is_waited_out_then_the_request_is_sent() -> None:
    clock = FakeClock(start=0.0)
    bmc = Bmc(clock, "PoweringOff", ("On", "ForceOff"))
    bmc.schedule = [(2.0, "On")]  # the power-off in progress was abandoned
    bmc.on_post = lambda _r: bmc.schedule.append((clock.monotonic() + 1.0, "Off"))

    driver_for(bmc).off()

    assert bmc.posts == ["ForceOff"]
    assert bmc.state == "Off"
