"""MemoryTarget: the in-memory PowerTarget the BMC server tests drive."""

from __future__ import annotations

import threading

import pytest

from harness.lab.bmc.target import CallbackTarget, MemoryTarget, PowerCall, PowerTarget
from harness.power.base import PowerState


def test_records_calls_and_applies_them() -> None:
    changes: list[PowerState] = []
    target = MemoryTarget("node-a", on_change=changes.append)

    target.power_off(graceful=True)
    target.power_off(graceful=False)  # already off: recorded, no change
    target.power_on()
    target.reset()

    assert isinstance(target, PowerTarget)
    assert target.power_state() is PowerState.ON
    assert target.calls() == [
        PowerCall("off", True),
        PowerCall("off", False),
        PowerCall("on"),
        PowerCall("reset"),
    ]
    assert [str(c) for c in target.calls()] == ["off(graceful)", "off(forced)", "on", "reset"]
    assert changes == [PowerState.OFF, PowerState.ON, PowerState.OFF, PowerState.ON]
    assert target.transitions == 4


def test_reset_of_an_off_target_turns_it_on() -> None:
    target = MemoryTarget("node-b", PowerState.OFF)
    target.reset()
    assert target.power_state() is PowerState.ON
    assert target.transitions == 1


def test_set_state_is_not_a_call_and_failures_are_injectable() -> None:
    target = MemoryTarget("node-a")
    target.set_state(PowerState.OFF)
    assert target.calls() == []

    target.fail_with = RuntimeError("kwok did not start")
    with pytest.raises(RuntimeError, match="kwok"):
        target.power_on()
    assert target.power_state() is PowerState.OFF
    assert target.calls() == [PowerCall("on")]

    with pytest.raises(ValueError):
        MemoryTarget("x", PowerState.UNKNOWN)


def test_is_thread_safe() -> None:
    target = MemoryTarget("node-a")

    def hammer() -> None:
        for _ in range(500):
            target.reset()

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(target.calls()) == 2000
    assert target.transitions == 4000
    assert target.power_state() is PowerState.ON


def test_callback_target_wires_callables_and_resets_as_off_then_on() -> None:
    log: list[str] = []
    state = {"on": True}

    def off(graceful: bool) -> None:
        log.append(f"off graceful={graceful}")
        state["on"] = False

    def on() -> None:
        log.append("on")
        state["on"] = True

    target = CallbackTarget(
        "node-a",
        state=lambda: PowerState.ON if state["on"] else PowerState.OFF,
        on=on,
        off=off,
    )

    assert isinstance(target, PowerTarget)
    target.power_off(graceful=True)
    assert target.power_state() is PowerState.OFF
    target.reset()
    assert log == ["off graceful=True", "off graceful=False", "on"]
    assert target.power_state() is PowerState.ON
