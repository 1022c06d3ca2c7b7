"""The drivers' bounded wait, on a fake clock: no real time passes in these tests."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator, Sequence

import pytest

from harness.errors import PermanentError, TemporaryError, WaitTimeout
from harness.power._wait import Deadline, Secret, redact, retry, wait_until
from tests.fakes.clock import FakeClock


def scripted(
    clock: FakeClock, steps: Sequence[object], cost_s: float = 0.0
) -> Callable[[], object]:
    """A probe returning (or raising) ``steps`` in order, each taking ``cost_s``."""
    it: Iterator[object] = iter(steps)

    def probe() -> object:
        clock.now += cost_s
        step = next(it)
        if isinstance(step, BaseException):
            raise step
        return step

    return probe


def test_returns_the_first_value_that_satisfies_the_condition() -> None:
    clock = FakeClock()
    probe = scripted(clock, ["on", "on", "off"])

    seen = wait_until(
        probe, lambda v: v == "off", expected="off", deadline=Deadline(10, clock), poll_s=0.5
    )

    assert seen == "off"
    assert clock.sleeps == [0.5, 0.5]


def test_a_read_back_starts_with_short_pauses_that_double_up_to_the_poll_interval() -> None:
    clock = FakeClock()
    probe = scripted(clock, ["on"] * 6 + ["off"])

    seen = wait_until(
        probe,
        lambda v: v == "off",
        expected="off",
        deadline=Deadline(10, clock),
        poll_s=0.5,
        first_poll_s=0.05,
    )

    assert seen == "off"
    assert clock.sleeps == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.5, 0.5])


def test_a_first_poll_is_never_longer_than_the_poll_interval_nor_zero() -> None:
    clock = FakeClock()
    probe = scripted(clock, ["on", "off"])
    wait_until(
        probe,
        lambda v: v == "off",
        expected="off",
        deadline=Deadline(10, clock),
        poll_s=0.5,
        first_poll_s=2.0,
    )
    assert clock.sleeps == [0.5]
    with pytest.raises(ValueError, match="first_poll_s"):
        wait_until(
            probe,
            lambda v: True,
            expected="off",
            deadline=Deadline(10, clock),
            poll_s=0.5,
            first_poll_s=0,
        )


def test_timeout_says_what_was_expected_what_was_seen_and_how_long() -> None:
    clock = FakeClock()

    with pytest.raises(WaitTimeout) as caught:
        wait_until(
            lambda: "on",
            lambda v: v == "off",
            expected="node-a powered off",
            deadline=Deadline(3, clock),
            poll_s=1,
            describe=lambda v: f"power {v}",
        )

    assert caught.value.expected == "node-a powered off"
    assert caught.value.last_seen == "power on"
    assert caught.value.waited_s == pytest.approx(3)
    assert "timed out after 3.0s waiting for node-a powered off; last seen: power on" in str(
        caught.value
    )


def test_never_sleeps_past_the_deadline_and_probes_once_more_at_it() -> None:
    clock = FakeClock()
    calls: list[float] = []

    def probe() -> str:
        calls.append(clock.now - 1000.0)
        return "on"

    with pytest.raises(WaitTimeout):
        wait_until(
            probe, lambda v: v == "off", expected="x", deadline=Deadline(2.5, clock), poll_s=1
        )

    assert clock.sleeps == [1, 1, 0.5]
    assert calls == [0, 1, 2, 2.5]


def test_a_slow_probe_counts_against_the_deadline() -> None:
    clock = FakeClock()
    probe = scripted(clock, ["on"] * 10, cost_s=2.0)

    with pytest.raises(WaitTimeout) as caught:
        wait_until(probe, lambda v: v == "off", expected="x", deadline=Deadline(4, clock), poll_s=1)

    # 2 s probe, 1 s pause, 2 s probe: the overshoot is at most one probe.
    assert caught.value.waited_s == pytest.approx(5.0)
    assert clock.sleeps == [1]


def test_permanent_error_ends_the_wait_at_once() -> None:
    clock = FakeClock()
    probe = scripted(clock, ["on", PermanentError("401 from BMC")])

    with pytest.raises(PermanentError, match="401"):
        wait_until(
            probe, lambda v: v == "off", expected="x", deadline=Deadline(60, clock), poll_s=1
        )

    assert clock.sleeps == [1]


def test_temporary_errors_are_retried_with_backoff_and_reported_as_last_seen() -> None:
    clock = FakeClock()
    refused = TemporaryError("connection refused")

    with pytest.raises(WaitTimeout) as caught:
        wait_until(
            scripted(clock, [refused] * 20),
            lambda v: True,
            expected="BMC to answer",
            deadline=Deadline(20, clock),
            poll_s=0.5,
            max_backoff_s=4,
        )

    assert caught.value.last_seen == "TemporaryError: connection refused"
    assert clock.sleeps[:6] == [0.5, 1, 2, 4, 4, 4]
    assert sum(clock.sleeps) == pytest.approx(20)


def test_backoff_restarts_after_a_value() -> None:
    clock = FakeClock()
    err = TemporaryError("503")
    probe = scripted(clock, [err, err, "on", err, "off"])

    assert (
        wait_until(
            probe,
            lambda v: v == "off",
            expected="x",
            deadline=Deadline(60, clock),
            poll_s=1,
            max_backoff_s=8,
        )
        == "off"
    )
    assert clock.sleeps == [1, 2, 1, 1]


def test_unexpected_exceptions_propagate_unchanged() -> None:
    clock = FakeClock()

    with pytest.raises(KeyError):
        wait_until(
            scripted(clock, [KeyError("bug")]),
            lambda v: True,
            expected="x",
            deadline=Deadline(5, clock),
            poll_s=1,
        )
    assert clock.sleeps == []


def test_retry_runs_an_operation_until_it_stops_failing_temporarily() -> None:
    clock = FakeClock()
    operation = scripted(clock, [TemporaryError("busy"), TemporaryError("busy"), "done"])

    assert retry(operation, action="BMC to accept", deadline=Deadline(10, clock), poll_s=0.25) == (
        "done"
    )
    assert clock.sleeps == [0.25, 0.5]


def test_retry_times_out_naming_the_action() -> None:
    clock = FakeClock()

    with pytest.raises(WaitTimeout, match="waiting for BMC to accept power off"):
        retry(
            scripted(clock, [TemporaryError("refused")] * 10),
            action="BMC to accept power off",
            deadline=Deadline(1, clock),
            poll_s=0.5,
        )


def test_zero_timeout_still_tries_once() -> None:
    clock = FakeClock()
    assert retry(lambda: 42, action="x", deadline=Deadline(0, clock), poll_s=1) == 42
    with pytest.raises(WaitTimeout):
        retry(
            scripted(clock, [TemporaryError("no")]),
            action="x",
            deadline=Deadline(0, clock),
            poll_s=1,
        )
    assert clock.sleeps == []


def test_invalid_arguments_are_rejected() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError, match="timeout_s"):
        Deadline(-1, clock)
    with pytest.raises(ValueError, match="poll_s"):
        wait_until(lambda: 1, lambda v: True, expected="x", deadline=Deadline(1, clock), poll_s=0)


def test_deadline_reports_elapsed_and_remaining() -> None:
    clock = FakeClock()
    deadline = Deadline(10, clock)
    clock.now += 4
    assert deadline.elapsed() == 4
    assert deadline.remaining() == 6
    assert not deadline.expired()
    clock.now += 7
    assert deadline.remaining() == 0
    assert deadline.expired()


def test_secret_never_shows_its_value() -> None:
    secret = Secret("hunter2-very-secret")

    shown = [repr(secret), str(secret), f"{secret}", f"{secret!r}", "%s" % (secret,)]  # noqa: UP031
    shown.append(repr({"password": secret}))

    for text in shown:
        assert "hunter2" not in text
    assert secret.reveal() == "hunter2-very-secret"
    with pytest.raises(TypeError):
        pickle.dumps(secret)


def test_redact_removes_secrets_from_third_party_messages() -> None:
    secret = Secret("p@ss")
    assert (
        redact("ipmitool -P p@ss failed: p@ss", secret) == "ipmitool -P ******** failed: ********"
    )
    assert redact("nothing to hide", Secret("")) == "nothing to hide"
